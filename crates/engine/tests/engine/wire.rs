//! A turn's requests over the Anthropic wire, as a provider receives them:
//! each call serialises only what the transcript gained (the request's
//! wire cache), and a compaction in the middle of the turn is sent as the
//! new, shorter context, never with the old one's messages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentd_engine::{Agent, AgentConfig, AgentToolSet, TurnInput, TurnLimits};
use agentd_model::anthropic::{AnthropicClient, AnthropicConfig};
use agentd_protocol::{CompactionTrigger, Event, Message, TurnStatus};
use agentd_testkit::ModelServer;
use agentd_tools::{ReadTool, ToolContext, ToolRegistry};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::collected::Collected;

/// `messages` without their prompt-cache breakpoints (which move to the
/// last message at each call).
fn without_breakpoints(messages: &[Value]) -> Vec<Value> {
    let mut messages = messages.to_vec();
    for message in &mut messages {
        for block in message["content"].as_array_mut().into_iter().flatten() {
            block.as_object_mut().unwrap().remove("cache_control");
        }
    }
    messages
}

#[tokio::test]
async fn a_compaction_mid_turn_is_sent_as_the_new_context() {
    let ws = tempfile::tempdir().unwrap();
    let script = crate::guardrails::five_files_to_read(ws.path());
    let server = ModelServer::start(serde_json::from_value(script).unwrap())
        .await
        .unwrap();
    let client = AnthropicClient::new(AnthropicConfig {
        base_url: server.url(),
        ..AnthropicConfig::new("test-key")
    });
    let agent = Agent::new(
        Arc::new(client),
        ToolRegistry::new(vec![Arc::new(ReadTool)]),
        ToolContext::for_workspace(ws.path()).unwrap(),
        AgentConfig {
            model_name: "claude-sonnet-4-5".into(),
            system_prompt: "test".into(),
            limits: TurnLimits {
                context_window: Some(4_000),
                ..TurnLimits::default()
            },
            price: None,
        },
    )
    .with_agent_tools(AgentToolSet::NONE);
    let sink = Collected::default();
    let input = TurnInput {
        turn_id: "t1".into(),
        history: vec![Message::user_text("an earlier question")],
        message: Message::user_text("read all five files"),
    };
    let finished = agent.run_turn(input, &sink, CancellationToken::new()).await;
    assert_eq!(finished.status, TurnStatus::Completed, "{finished:?}");
    let compacted = sink.events.lock().unwrap().iter().any(|event| {
        matches!(
            event,
            Event::Compaction {
                trigger: CompactionTrigger::Auto,
                ..
            }
        )
    });
    assert!(compacted, "the turn compacted");

    let requests: Vec<Vec<Value>> = server
        .requests_to("/v1/messages")
        .into_iter()
        .map(|r| r.body["messages"].as_array().unwrap().clone())
        .collect();
    let summarised = requests
        .iter()
        .position(|m| {
            m[0].to_string()
                .contains("Summarise the conversation above")
        })
        .unwrap();
    // Before the compaction each call sends the previous call's messages,
    // then what the turn added.
    for pair in requests[..summarised].windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        assert!(after.len() > before.len());
        assert_eq!(
            without_breakpoints(&after[..before.len()]),
            without_breakpoints(before)
        );
    }
    // After it: the summary, and nothing of the files read before it.
    let after = requests[summarised + 1..]
        .iter()
        .map(|m| Value::Array(m.clone()).to_string())
        .collect::<Vec<_>>();
    assert!(!after.is_empty());
    for body in &after {
        assert!(body.contains("SUMMARY-TEXT"), "{body}");
        assert!(!body.contains("AAAA"), "{body}");
    }
    assert!(after.last().unwrap().contains("EEEE"));
}
