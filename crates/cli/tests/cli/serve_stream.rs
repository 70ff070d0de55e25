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

/// HTTP/2 cleartext with prior knowledge (curl's own HTTP/2): two event
/// streams at once, one replaying from the start and one after
/// `Last-Event-ID`, both carrying the next turn live.
#[tokio::test]
async fn event_streams_over_http2_replay_and_go_live() {
    let h = Harness::open(slow_script()).await;
    let server = h.start().await;
    let id = server.session().await;
    server.message(&id, "first").await;
    server.wait_idle(&id).await;
    let first = server.all_events(&id).await;
    let resume = first[first.len() / 2].id;

    let dir = h.data().join("h2");
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("{}/v1/sessions/{id}/events", server.url);
    // `--next` keeps the header to the second transfer. (curl 7.88 drops a
    // transfer left waiting to multiplex on a prior-knowledge connection, so
    // each gets its own; the peer bench holds 256 streams per connection.)
    let transfer = |name: &str| -> Vec<String> {
        let out = dir.join(name).display().to_string();
        [
            "--http2-prior-knowledge",
            "--no-buffer",
            "--silent",
            "--max-time",
            "6",
        ]
        .into_iter()
        .map(String::from)
        .chain([
            "--write-out".into(),
            "%{http_version} %{num_connects}\\n".into(),
        ])
        .chain(["--output".into(), out, url.clone()])
        .collect()
    };
    let curl = tokio::process::Command::new("curl")
        .args(["--parallel", "--parallel-immediate"])
        .args(transfer("all"))
        .arg("--next")
        .args(["--header", &format!("Last-Event-ID: {resume}")])
        .args(transfer("rest"))
        .output();
    let curl = tokio::spawn(curl);
    // Both streams are open before the next turn starts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.message(&id, "second").await;
    server.wait_idle(&id).await;
    let out = curl.await.unwrap().unwrap();
    let written = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = written.lines().collect();
    assert_eq!(lines.len(), 2, "{written}");
    assert!(
        lines.iter().all(|l| l.starts_with("2 ")),
        "HTTP/2: {written}"
    );

    let stored = server.all_events(&id).await;
    assert_eq!(statuses(&stored), ["completed", "completed"]);
    let read =
        |name: &str| serve_harness::parse_events(&std::fs::read_to_string(dir.join(name)).unwrap());
    let all = read("all");
    assert_gapless(&all);
    assert_eq!(all, stored, "replayed, then the second turn live");
    let rest = read("rest");
    assert_eq!(
        rest,
        stored[resume as usize..],
        "exactly the events after {resume}"
    );
}
