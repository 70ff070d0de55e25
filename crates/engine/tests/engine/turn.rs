//! The turn loop with the in-process scripted model and real tools: what a
//! client of the event stream sees.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use agentd_engine::{Agent, AgentConfig, SinkError, TurnInput, TurnLimits, TurnSink};
use agentd_model::scripted::{Script, ScriptedClient};
use agentd_protocol::{ContentBlock, DeltaKind, Event, Message, Role, TurnStatus};
use agentd_tools::{ToolContext, builtin_tools};
use async_trait::async_trait;
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Collected {
    events: Mutex<Vec<Event>>,
    /// When each event was emitted (Tokio's clock, so paused time counts).
    emitted_at: Mutex<Vec<tokio::time::Instant>>,
    messages: Mutex<Vec<Message>>,
    fail_after: Option<usize>,
    /// `flush` reports a failed message write, as a pipelining sink does
    /// when the store refused a message it had queued.
    fail_flush: bool,
}

#[async_trait]
impl TurnSink for Collected {
    async fn emit(&self, event: Event) -> Result<(), SinkError> {
        let mut events = self.events.lock().unwrap();
        if self.fail_after.is_some_and(|n| events.len() >= n) {
            return Err(SinkError("disk full".into()));
        }
        events.push(event);
        self.emitted_at
            .lock()
            .unwrap()
            .push(tokio::time::Instant::now());
        Ok(())
    }
    async fn flush(&self) -> Result<(), SinkError> {
        if self.fail_flush {
            return Err(SinkError("the message was refused".into()));
        }
        Ok(())
    }
    async fn append_message(&self, _turn_id: &str, message: &Message) -> Result<(), SinkError> {
        self.messages.lock().unwrap().push(message.clone());
        Ok(())
    }
}

fn agent(script: serde_json::Value, workspace: &std::path::Path) -> Agent {
    let script: Script = serde_json::from_value(script).unwrap();
    Agent::new(
        Arc::new(ScriptedClient::new(script)),
        builtin_tools(),
        ToolContext::for_workspace(workspace).unwrap(),
        AgentConfig {
            price: None,
            model_name: "scripted".into(),
            system_prompt: "test".into(),
            limits: TurnLimits::default(),
        },
    )
}

fn input(text: &str) -> TurnInput {
    TurnInput {
        turn_id: "t1".into(),
        history: Vec::new(),
        message: Message::user_text(text),
    }
}

#[tokio::test]
async fn a_long_reply_becomes_few_delta_events_with_the_same_text() {
    let long: String = (0..3000).map(|i| format!("word{i} ")).collect();
    let ws = tempfile::tempdir().unwrap();
    let agent = agent(
        json!({"replies": [{"content": [{"type": "text", "text": long}]}]}),
        ws.path(),
    );
    let sink = Collected::default();
    let finished = agent
        .run_turn(input("talk"), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::Completed);
    let events = sink.events.lock().unwrap();
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::MessageDelta {
                kind: DeltaKind::Text,
                text,
                ..
            } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    // ~1000 model chunks, coalesced into ~1 KiB events.
    assert!(deltas.len() < 60, "{} delta events", deltas.len());
    assert!(deltas.len() > 1, "still streamed");
    assert_eq!(deltas.concat(), long);
}

/// Text the model sends and then pauses after reaches the client within the
/// coalescing delay, not with the next chunk.
#[tokio::test(start_paused = true)]
async fn text_before_a_pause_goes_out_after_the_coalescing_delay() {
    let ws = tempfile::tempdir().unwrap();
    // Two chunks of three words, each (and the end) a second apart.
    let agent = agent(
        json!({"replies": [{"delay_ms": 1000, "content": [
            {"type": "text", "text": "one two three four five six"}
        ]}]}),
        ws.path(),
    );
    let sink = Collected::default();
    let started = tokio::time::Instant::now();
    let finished = agent
        .run_turn(input("talk"), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::Completed);
    let events = sink.events.lock().unwrap();
    let emitted_at = sink.emitted_at.lock().unwrap();
    let deltas: Vec<(&str, u128)> = events
        .iter()
        .zip(emitted_at.iter())
        .filter_map(|(event, at)| match event {
            Event::MessageDelta { text, .. } => Some((text.as_str(), (*at - started).as_millis())),
            _ => None,
        })
        .collect();
    // The engine's coalescing delay (up to 50 ms).
    let delay = 50;
    assert_eq!(
        deltas,
        [
            ("one two three ", 1000 + delay),
            ("four five six", 2000 + delay)
        ]
    );
}

#[tokio::test]
async fn read_only_calls_run_together_and_results_keep_call_order() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha").unwrap();
    std::fs::write(ws.path().join("b.txt"), "beta").unwrap();
    let agent = agent(
        json!({"replies": [
            {"content": [
                {"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": "a.txt"}},
                {"type": "tool_use", "id": "w1", "name": "Write", "input": {"file_path": "c.txt", "content": "gamma"}},
                {"type": "tool_use", "id": "r2", "name": "Read", "input": {"file_path": "b.txt"}},
                {"type": "tool_use", "id": "r3", "name": "Read", "input": {"file_path": "c.txt"}}
            ]},
            {"content": [{"type": "text", "text": "done"}]}
        ]}),
        ws.path(),
    );
    let sink = Collected::default();
    agent
        .run_turn(input("go"), &sink, CancellationToken::new())
        .await;
    let messages = sink.messages.lock().unwrap();
    let results = &messages[2];
    assert_eq!(results.role, Role::User);
    let ids: Vec<(&str, &str)> = results
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } => Some((tool_use_id.as_str(), content.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        ids.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        ["r1", "w1", "r2", "r3"]
    );
    assert!(
        ids[3].1.contains("gamma"),
        "the Read after the Write sees it: {}",
        ids[3].1
    );
}

#[tokio::test]
async fn a_store_failure_fails_the_turn_instead_of_losing_events() {
    let ws = tempfile::tempdir().unwrap();
    let agent = agent(
        json!({"replies": [{"content": [{"type": "text", "text": "hello there"}]}]}),
        ws.path(),
    );
    let sink = Collected {
        fail_after: Some(1),
        ..Collected::default()
    };
    let finished = agent
        .run_turn(input("hi"), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::Failed);
    assert_eq!(finished.error.unwrap().code, "store_error");
}

/// A sink that stores messages behind the turn reports a refused one at the
/// next flush: the turn must still end `failed`, with the error and
/// `turn.finished` recorded, not `completed` with its answer missing.
#[tokio::test]
async fn a_message_write_that_fails_late_still_fails_the_turn() {
    let ws = tempfile::tempdir().unwrap();
    let agent = agent(
        json!({"replies": [{"content": [{"type": "text", "text": "hello there"}]}]}),
        ws.path(),
    );
    let sink = Collected {
        fail_flush: true,
        ..Collected::default()
    };
    let finished = agent
        .run_turn(input("hi"), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::Failed);
    assert_eq!(finished.error.unwrap().code, "store_error");
    let events = sink.events.lock().unwrap();
    let n = events.len();
    assert!(matches!(&events[n - 2], Event::Error(e) if e.code == "store_error"));
    assert!(matches!(&events[n - 1], Event::TurnFinished(f) if f.status == TurnStatus::Failed));
}

#[tokio::test]
async fn an_interrupt_while_the_model_streams_ends_the_turn_promptly() {
    let ws = tempfile::tempdir().unwrap();
    let slow: String = (0..200).map(|i| format!("w{i} ")).collect();
    let agent = agent(
        json!({"replies": [{"delay_ms": 50, "content": [{"type": "text", "text": slow}]}]}),
        ws.path(),
    );
    let sink = Collected::default();
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        canceller.cancel();
    });
    let started = std::time::Instant::now();
    let finished = agent.run_turn(input("talk slowly"), &sink, cancel).await;
    assert_eq!(finished.status, TurnStatus::Interrupted);
    assert!(
        started.elapsed().as_millis() < 1200,
        "{:?}",
        started.elapsed()
    );
    let events = sink.events.lock().unwrap();
    assert!(matches!(events.last(), Some(Event::TurnFinished(_))));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::TurnFinished(_)))
            .count(),
        1
    );
}

struct CountingCheckpointer(Mutex<Vec<String>>);

#[async_trait]
impl agentd_engine::Checkpointer for CountingCheckpointer {
    async fn checkpoint(&self, turn_id: &str) -> Result<Option<(String, Vec<String>)>, String> {
        let mut calls = self.0.lock().unwrap();
        calls.push(turn_id.to_string());
        Ok(Some((format!("cp{}", calls.len()), vec!["a.txt".into()])))
    }
}

#[tokio::test]
async fn the_workspace_is_checkpointed_once_before_the_first_change() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha").unwrap();
    let checkpointer = Arc::new(CountingCheckpointer(Mutex::new(Vec::new())));
    let agent = agent(
        json!({"replies": [
            {"content": [{"type": "tool_use", "id": "r", "name": "Read", "input": {"file_path": "a.txt"}}]},
            {"content": [{"type": "tool_use", "id": "w", "name": "Write", "input": {"file_path": "b.txt", "content": "b"}}]},
            {"content": [{"type": "tool_use", "id": "e", "name": "Edit", "input": {"file_path": "a.txt", "old_string": "alpha", "new_string": "beta"}}]},
            {"content": [{"type": "text", "text": "done"}]}
        ]}),
        ws.path(),
    )
    .with_checkpointer(checkpointer.clone());
    let sink = Collected::default();
    agent
        .run_turn(input("go"), &sink, CancellationToken::new())
        .await;
    assert_eq!(*checkpointer.0.lock().unwrap(), ["t1"]);
    let events = sink.events.lock().unwrap();
    let at = |pred: &dyn Fn(&Event) -> bool| events.iter().position(pred).unwrap();
    let checkpoint = at(
        &|e| matches!(e, Event::CheckpointCreated { checkpoint_id, .. } if checkpoint_id == "cp1"),
    );
    let read_done = at(&|e| matches!(e, Event::ToolFinished { call_id, .. } if call_id == "r"));
    let write_started = at(&|e| matches!(e, Event::ToolStarted { call_id, .. } if call_id == "w"));
    let write_done = at(&|e| matches!(e, Event::ToolFinished { call_id, .. } if call_id == "w"));
    assert!(
        read_done < checkpoint,
        "a read-only call takes no checkpoint"
    );
    assert!(write_started < checkpoint && checkpoint < write_done);
}
