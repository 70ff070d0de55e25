//! Long turns under control: automatic and manual compaction, budgets (per
//! turn with subagents, per session), the circuit breaker, and the agent's
//! status line — with the in-process scripted model and real tools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentd_engine::{Agent, AgentConfig, AgentToolSet, Subagents, TurnInput, TurnLimits};
use agentd_model::price::Price;
use agentd_model::scripted::{Script, ScriptedClient};
use agentd_protocol::{AgentStatus, CompactionTrigger, Event, Message, TurnStatus};
use agentd_tools::{ReadTool, ToolContext, ToolRegistry};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::collected::Collected;

/// An agent with only `Read` (small tool specs keep the estimates simple).
fn make_agent(
    script: Value,
    ws: &std::path::Path,
    limits: TurnLimits,
) -> (Agent, Arc<ScriptedClient>) {
    let script: Script = serde_json::from_value(script).unwrap();
    let client = Arc::new(ScriptedClient::new(script));
    let agent = Agent::new(
        client.clone(),
        ToolRegistry::new(vec![Arc::new(ReadTool)]),
        ToolContext::for_workspace(ws).unwrap(),
        AgentConfig {
            model_name: "scripted".into(),
            system_prompt: "test".into(),
            limits,
            // One dollar per 100 input tokens.
            price: Some(Price {
                input_per_mtok: 10_000.0,
                output_per_mtok: 0.0,
                cache_read_per_mtok: 0.0,
                cache_write_per_mtok: 0.0,
            }),
        },
    )
    .with_agent_tools(AgentToolSet::NONE);
    (agent, client)
}

fn input(text: &str, history: Vec<Message>) -> TurnInput {
    TurnInput {
        turn_id: "t1".into(),
        history,
        message: Message::user_text(text),
    }
}

fn read(file: &str) -> Value {
    json!({"type": "tool_use", "name": "Read", "input": {"file_path": file}})
}

fn size(request: &agentd_model::ModelRequest) -> usize {
    serde_json::to_string(&*request.messages).unwrap().len()
}

/// Five files of 100 lines (`a.txt` of A… to `e.txt` of E…), and a script
/// that reads them one a call, then answers (with a summary when asked to
/// compact): more than a 4 000-token context holds.
pub(crate) fn five_files_to_read(ws: &std::path::Path) -> Value {
    for (name, fill) in [("a", "A"), ("b", "B"), ("c", "C"), ("d", "D"), ("e", "E")] {
        let line = format!("{}\n", fill.repeat(29));
        std::fs::write(ws.join(format!("{name}.txt")), line.repeat(100)).unwrap();
    }
    json!({"replies": [
        {"when": {"any_contains": "Summarise the conversation above"}, "content": [
            {"type": "text", "text": "SUMMARY-TEXT: read a, b and c; d and e are next."}]},
        {"when": {"last_user_contains": "read all"}, "content": [read("a.txt")]},
        {"when": {"last_tool_result_contains": "AAAA"}, "content": [read("b.txt")]},
        {"when": {"last_tool_result_contains": "BBBB"}, "content": [read("c.txt")]},
        {"when": {"last_tool_result_contains": "CCCC"}, "content": [read("d.txt")]},
        {"when": {"last_tool_result_contains": "DDDD"}, "content": [read("e.txt")]},
        {"when": {"last_tool_result_contains": "EEEE"}, "content": [
            {"type": "text", "text": "Read them all.\nstatus: complete"}]}
    ]})
}

#[tokio::test]
async fn a_long_turn_compacts_automatically_and_keeps_working() {
    let ws = tempfile::tempdir().unwrap();
    let script = five_files_to_read(ws.path());
    let limits = TurnLimits {
        context_window: Some(4_000),
        ..TurnLimits::default()
    };
    let (agent, client) = make_agent(script, ws.path(), limits);
    let sink = Collected::default();
    let finished = agent
        .run_turn(
            input("read all five files", Vec::new()),
            &sink,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(finished.status, TurnStatus::Completed, "{finished:?}");
    assert_eq!(finished.agent_status, Some(AgentStatus::Complete));

    let events = sink.events.lock().unwrap();
    let compactions: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Compaction {
                trigger,
                tokens_before,
                tokens_after,
                summary,
            } => Some((*trigger, *tokens_before, *tokens_after, summary.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(compactions.len(), 1, "{compactions:?}");
    let (trigger, before, after, summary) = &compactions[0];
    assert_eq!(*trigger, CompactionTrigger::Auto);
    assert!(after < before, "{after} < {before}");
    assert!(summary.as_deref().unwrap().contains("SUMMARY-TEXT"));

    // The request after the compaction is smaller than the one before it and
    // starts from the summary; the summariser saw trimmed outputs.
    let requests = client.requests();
    let summary_call = requests
        .iter()
        .position(|r| {
            r.messages[0]
                .text()
                .contains("Summarise the conversation above")
        })
        .unwrap();
    assert!(requests[summary_call].tools.is_empty());
    let (before, after) = (&requests[summary_call - 1], &requests[summary_call + 1]);
    assert!(
        size(after) < size(before),
        "{} < {}",
        size(after),
        size(before)
    );
    assert!(after.messages[0].text().contains("SUMMARY-TEXT"));
    assert!(after.messages[0].text().contains("read all five files"));
    assert!(
        !serde_json::to_string(&*after.messages)
            .unwrap()
            .contains("AAAA")
    );
    assert!(
        serde_json::to_string(&*after.messages)
            .unwrap()
            .contains("DDDD"),
        "recent output kept"
    );
    assert!(
        requests[summary_call].messages[0]
            .text()
            .contains("more characters trimmed")
    );

    // The sink got the new context; the transcript still has everything.
    let recorded = sink.compactions.lock().unwrap();
    assert_eq!(
        recorded[0].context,
        after.messages[..recorded[0].context.len()].to_vec()
    );
    let transcript = serde_json::to_string(&*sink.messages.lock().unwrap()).unwrap();
    assert_eq!(transcript.matches(&"A".repeat(29)).count(), 100);
    assert_eq!(transcript.matches(&"E".repeat(29)).count(), 100);
}

#[tokio::test]
async fn a_manual_compaction_is_a_turn_of_its_own() {
    let ws = tempfile::tempdir().unwrap();
    let script = json!({"replies": [
        {"when": {"any_contains": "Summarise the conversation above"}, "content": [
            {"type": "text", "text": "SUMMARY: we talked."}]}
    ]});
    let (agent, client) = make_agent(script, ws.path(), TurnLimits::default());
    let history = vec![
        Message::user_text("first question"),
        Message::assistant(vec![agentd_protocol::ContentBlock::Text {
            text: "first answer".into(),
        }]),
        Message::user_text("second question"),
        Message::assistant(vec![agentd_protocol::ContentBlock::Text {
            text: "second answer".into(),
        }]),
    ];
    let sink = Collected::default();
    let finished = agent
        .run_compaction(input("/compact", history), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::Completed);
    assert!(finished.result.unwrap().starts_with("Compacted"));
    assert!(
        sink.messages.lock().unwrap().is_empty(),
        "/compact is not part of the transcript"
    );
    let compaction = &sink.compactions.lock().unwrap()[0];
    assert_eq!(compaction.trigger, CompactionTrigger::Manual);
    assert_eq!(compaction.context.len(), 2, "summary + the last answer");
    assert!(compaction.context[0].text().contains("SUMMARY: we talked."));
    assert_eq!(compaction.context[1].text(), "second answer");
    assert!(
        client.requests()[0].messages[0]
            .text()
            .contains("first question")
    );
}

fn priced(text: &str) -> Value {
    json!({"usage": {"input_tokens": 100}, "content": [{"type": "text", "text": text}]})
}

#[tokio::test]
async fn the_turn_budget_counts_subagents_and_stops_them() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("f.txt"), "x").unwrap();
    let task = |id: &str| {
        json!({"type": "tool_use", "id": id, "name": "Task", "input": {
        "description": "d", "prompt": format!("SUB {id}"), "subagent_type": "general-purpose"}})
    };
    let script = json!({"replies": [
        {"when": {"last_user_contains": "start"}, "usage": {"input_tokens": 100},
         "content": [task("t1"), task("t2")]},
        {"repeat": true, "when": {"any_contains": "SUB"}, "usage": {"input_tokens": 100},
         "content": [read("f.txt")]},
        {"repeat": true, "usage": {"input_tokens": 100}, "content": [{"type": "text", "text": "done"}]}
    ]});
    let limits = TurnLimits {
        max_budget_usd: Some(3.5),
        max_identical_calls: 0,
        ..TurnLimits::default()
    };
    let (agent, client) = make_agent(script, ws.path(), limits);
    let agent = agent
        .with_agent_tools(AgentToolSet {
            task: true,
            ..AgentToolSet::NONE
        })
        .with_subagents(Subagents::default());
    let sink = Collected::default();
    let finished = agent
        .run_turn(input("start", Vec::new()), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::BudgetExceeded, "{finished:?}");
    assert_eq!(finished.error.unwrap().code, "budget_exceeded");
    // $1 a call: the subagents stop as soon as the whole turn reaches $3.5.
    let calls = client.requests().len();
    assert!((4..=6).contains(&calls), "{calls} model calls");
    assert!(
        finished.cost_usd >= 3.5 && finished.cost_usd <= 6.0,
        "{}",
        finished.cost_usd
    );
}

#[tokio::test]
async fn a_spent_session_budget_stops_the_turn_before_any_model_call() {
    let ws = tempfile::tempdir().unwrap();
    let limits = TurnLimits {
        max_session_budget_usd: Some(4.0),
        session_spent_usd: 4.0,
        ..TurnLimits::default()
    };
    let (agent, client) = make_agent(json!({"replies": [priced("hi")]}), ws.path(), limits);
    let sink = Collected::default();
    let finished = agent
        .run_turn(input("hello", Vec::new()), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::BudgetExceeded);
    let error = finished.error.unwrap();
    assert_eq!(error.code, "session_budget_exceeded");
    assert!(error.message.contains("$4.0000"), "{}", error.message);
    assert!(client.requests().is_empty());
}

#[tokio::test]
async fn the_circuit_breaker_trips_on_failures_and_on_repeats() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("same.txt"), "same").unwrap();
    // Different failing calls in a row.
    let failing = json!({"replies": [
        {"content": [read("missing-1.txt")]}, {"content": [read("missing-2.txt")]},
        {"content": [read("missing-3.txt")]}, {"content": [read("missing-4.txt")]},
        {"repeat": true, "content": [{"type": "text", "text": "never"}]}
    ]});
    let limits = TurnLimits {
        max_failed_calls: 3,
        ..TurnLimits::default()
    };
    let (agent, _) = make_agent(failing, ws.path(), limits);
    let sink = Collected::default();
    let finished = agent
        .run_turn(input("go", Vec::new()), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::CircuitBreaker);
    let error = finished.error.unwrap();
    assert_eq!(error.code, "too_many_failures");
    assert!(
        error.message.contains("3 tool calls in a row failed"),
        "{}",
        error.message
    );
    assert_eq!(finished.num_model_calls, 3);

    // The same successful call over and over.
    let repeating = json!({"replies": [{"repeat": true, "content": [read("same.txt")]}]});
    let limits = TurnLimits {
        max_identical_calls: 4,
        ..TurnLimits::default()
    };
    let (agent, _) = make_agent(repeating, ws.path(), limits);
    let sink = Collected::default();
    let finished = agent
        .run_turn(input("go", Vec::new()), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::CircuitBreaker);
    assert_eq!(finished.error.unwrap().code, "repeated_call");
    assert_eq!(finished.num_model_calls, 4);
    // The results are in the transcript: nothing is left unanswered.
    assert_eq!(sink.messages.lock().unwrap().len(), 9);
}
