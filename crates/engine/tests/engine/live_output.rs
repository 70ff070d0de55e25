//! Live output limits: a flood of tool output or model text becomes a
//! bounded number of stored bytes and one `output.truncated`, while the model
//! still gets its result and the turn its final message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentd_engine::{Agent, AgentConfig, TurnLimits};
use agentd_model::scripted::{Script, ScriptedClient};
use agentd_protocol::{ContentBlock, Event, OutputLimit, TurnStatus};
use agentd_tools::{ToolContext, builtin_tools};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::collected::{Collected, user_turn as input};

impl Collected {
    fn output_bytes(&self, call: &str) -> usize {
        self.events
            .lock()
            .unwrap()
            .iter()
            .map(|e| match e {
                Event::ToolOutput { call_id, text, .. } if call_id == call => text.len(),
                _ => 0,
            })
            .sum()
    }

    fn delta_bytes(&self) -> usize {
        self.events
            .lock()
            .unwrap()
            .iter()
            .map(|e| match e {
                Event::MessageDelta { text, .. } => text.len(),
                _ => 0,
            })
            .sum()
    }

    fn truncations(&self) -> Vec<(Option<String>, OutputLimit, u64)> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                Event::OutputTruncated {
                    call_id,
                    limit,
                    limit_bytes,
                    ..
                } => Some((call_id.clone(), *limit, *limit_bytes)),
                _ => None,
            })
            .collect()
    }
}

fn agent(
    script: Value,
    workspace: &std::path::Path,
    limits: TurnLimits,
) -> (Agent, Arc<ScriptedClient>) {
    let script: Script = serde_json::from_value(script).unwrap();
    let client = Arc::new(ScriptedClient::new(script));
    let agent = Agent::new(
        client.clone(),
        builtin_tools(),
        ToolContext::for_workspace(workspace).unwrap(),
        AgentConfig {
            model_name: "scripted".into(),
            system_prompt: "test".into(),
            limits,
            price: None,
        },
    );
    (agent, client)
}

fn bash(id: &str, command: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": command}})
}

#[tokio::test]
async fn a_flood_of_output_streams_up_to_the_call_limit_and_the_model_still_gets_its_result() {
    let ws = tempfile::tempdir().unwrap();
    let limits = TurnLimits {
        max_tool_output_stream_bytes: 64 * 1024,
        ..TurnLimits::default()
    };
    let (agent, client) = agent(
        json!({"replies": [
            {"content": [bash("flood", "yes abcdefghij | head -c 20000000; echo THE-END")]},
            {"content": [{"type": "text", "text": "done"}]}
        ]}),
        ws.path(),
        limits,
    );
    let sink = Collected::default();
    let finished = agent
        .run_turn(input("flood"), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::Completed, "{finished:?}");

    let streamed = sink.output_bytes("flood");
    assert!(streamed <= 64 * 1024, "{streamed} bytes streamed");
    assert!(streamed >= 60 * 1024, "streams up to the limit: {streamed}");
    assert_eq!(
        sink.truncations(),
        [(Some("flood".to_string()), OutputLimit::ToolCall, 64 * 1024)]
    );
    let events = sink.events.lock().unwrap();
    let finished_output = events.iter().find_map(|e| match e {
        Event::ToolFinished { output, .. } => Some(output.clone()),
        _ => None,
    });
    assert!(
        finished_output
            .unwrap()
            .starts_with("abcdefghij\nabcdefghij\n")
    );

    // The model's next request has the bounded result: the head and the cut.
    let requests = client.requests();
    let result = requests[1]
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .find_map(|b| match b {
            ContentBlock::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap();
    assert!(result.starts_with("abcdefghij\n"), "{}", &result[..40]);
    assert!(
        result.contains("[output truncated"),
        "{}",
        &result[result.len() - 200..]
    );
    assert!(result.len() < 40_000, "{} bytes", result.len());
}

#[tokio::test]
async fn past_the_turn_limit_nothing_more_streams_but_the_turn_finishes_whole() {
    let ws = tempfile::tempdir().unwrap();
    let limits = TurnLimits {
        max_turn_stream_bytes: 50_000,
        ..TurnLimits::default()
    };
    let reply: String = "word ".repeat(4_000);
    let (agent, _) = agent(
        json!({"replies": [
            {"content": [bash("one", "head -c 40000 /dev/zero | tr '\\0' a")]},
            {"content": [
                {"type": "text", "text": "again"},
                bash("two", "head -c 40000 /dev/zero | tr '\\0' b")]},
            {"content": [{"type": "text", "text": reply}]}
        ]}),
        ws.path(),
        limits,
    );
    let sink = Collected::default();
    let finished = agent
        .run_turn(input("go"), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::Completed, "{finished:?}");

    assert_eq!(sink.output_bytes("one"), 40_000);
    let total = sink.output_bytes("one") + sink.output_bytes("two") + sink.delta_bytes();
    assert!(total <= 50_000, "{total} bytes streamed");
    assert_eq!(
        sink.truncations(),
        [(Some("two".to_string()), OutputLimit::Turn, 50_000)],
        "one notice for the whole turn"
    );
    // The final reply streamed no deltas, but is recorded whole.
    assert_eq!(finished.result.as_deref(), Some(reply.as_str()));
    let events = sink.events.lock().unwrap();
    assert!(
        events.iter().any(
            |e| matches!(e, Event::MessageCompleted { message, .. } if message.text() == reply)
        )
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::ToolFinished { .. }))
            .count(),
        2
    );
}
