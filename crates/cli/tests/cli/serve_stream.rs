//! `agentd serve` event streams over real HTTP: reconnecting with
//! `Last-Event-ID` (also across a restart) gets exactly the missing events,
//! and a server killed mid-turn comes back with the turn interrupted and the
//! session able to go on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use std::time::Duration;

use serde_json::json;
use serve_harness::{Harness, SseEvent, assert_gapless, words};

fn statuses(events: &[SseEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.event == "turn.finished")
        .map(|e| e.data["status"].as_str().unwrap().to_string())
        .collect()
}

/// A turn of a few dozen events spread over a second or two.
fn slow_script() -> serde_json::Value {
    json!({"replies": [
        {"when": {"last_user_contains": "first"}, "delay_ms": 20, "content": [
            {"type": "text", "text": words(60)},
            {"type": "tool_use", "name": "Bash",
             "input": {"command": "for i in 1 2 3 4 5; do echo line$i; sleep 0.1; done"}}
        ]},
        {"when": {"last_tool_name": "Bash"}, "delay_ms": 20,
         "content": [{"type": "text", "text": words(60)}]},
        {"when": {"last_user_contains": "second"},
         "content": [{"type": "text", "text": "second turn done"}]}
    ]})
}

#[tokio::test]
async fn reconnecting_with_last_event_id_gets_exactly_the_rest() {
    let h = Harness::open(slow_script()).await;
    let server = h.start().await;
    let id = server.session().await;
    let mut first = server.events(&id, None).await;
    server.message(&id, "first").await;
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(first.next().await.unwrap());
    }
    drop(first);
    // The turn goes on without the client.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut second = server.events(&id, Some(seen.last().unwrap().id)).await;
    seen.extend(second.until_finished(1).await);

    assert_gapless(&seen);
    assert_eq!(statuses(&seen), ["completed"], "{}", server.log());
    assert!(seen.len() > 10, "a turn of many events: {}", seen.len());
    // What the two connections saw is exactly what a replay gives.
    assert_eq!(server.all_events(&id).await, seen);
    // `?after=` works like the header.
    let (status, _) = server
        .get(&format!("/v1/sessions/{id}/events?after=abc"))
        .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn reconnecting_after_a_server_restart_gets_exactly_the_rest() {
    let h = Harness::open(slow_script()).await;
    let server = h.start().await;
    let id = server.session().await;
    let mut first = server.events(&id, None).await;
    server.message(&id, "first").await;
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(first.next().await.unwrap());
    }
    drop(first);
    // A graceful stop interrupts the turn and records that.
    assert_eq!(server.terminate().await, 0);

    let server = h.start().await;
    let mut second = server.events(&id, Some(seen.last().unwrap().id)).await;
    seen.extend(second.until_finished(1).await);
    assert_eq!(statuses(&seen), ["interrupted"]);
    // The same stream carries the next turn live.
    server.message(&id, "second").await;
    seen.extend(second.until_finished(1).await);

    assert_gapless(&seen);
    assert_eq!(statuses(&seen), ["interrupted", "completed"]);
    assert_eq!(server.all_events(&id).await, seen);
}

#[tokio::test]
async fn kill_9_mid_turn_leaves_an_interrupted_turn_and_a_session_that_goes_on() {
    let h = Harness::open(json!({"replies": [
        {"when": {"last_user_contains": "sleepy"}, "content": [
            {"type": "text", "text": "Sleeping now."},
            {"type": "tool_use", "name": "Bash", "input": {"command": "echo started; sleep 30"}}
        ]},
        {"when": {"last_user_contains": "go on"},
         "content": [{"type": "text", "text": "resumed with context"}]}
    ]}))
    .await;
    let server = h.start().await;
    let id = server.session().await;
    let mut events = server.events(&id, None).await;
    let turn_id = server.message(&id, "sleepy task").await;
    loop {
        let event = events.next().await.expect("stream ended");
        if event.event == "tool.output" && event.data["text"].as_str().unwrap().contains("started")
        {
            break;
        }
    }
    server.kill9().await;

    let server = h.start().await;
    let info = server.wait_idle(&id).await;
    assert_eq!(info["status"], "idle");
    let stored = server.all_events(&id).await;
    assert_gapless(&stored);
    let finished = stored.last().unwrap();
    assert_eq!(finished.event, "turn.finished");
    assert_eq!(finished.data["turn_id"], turn_id.as_str());
    assert_eq!(finished.data["status"], "interrupted");
    assert_eq!(finished.data["error"]["code"], "server_restarted");

    // The transcript kept the user message and the tool call.
    let (_, transcript) = server.get(&format!("/v1/sessions/{id}/messages")).await;
    let text = transcript.to_string();
    assert!(text.contains("sleepy task"), "{text}");
    assert!(text.contains("sleep 30"), "{text}");

    let mut events = server.events(&id, Some(finished.id)).await;
    server.message(&id, "go on").await;
    let next = events.until_finished(1).await;
    let done = next.last().unwrap();
    assert_eq!(done.data["status"], "completed", "{}", server.log());
    assert_eq!(done.data["result"], "resumed with context");
    assert_eq!(next[0].id, finished.id + 1);

    // The model saw the whole conversation, the interrupted tool call included.
    let last = h.model_requests().last().unwrap().body.to_string();
    for needle in ["sleepy task", "sleep 30", "Sleeping now.", "go on"] {
        assert!(last.contains(needle), "request lacks {needle:?}: {last}");
    }
}
