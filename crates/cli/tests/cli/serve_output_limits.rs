//! Bounded live output over the real HTTP API with real bubblewrap: a
//! command printing 200 MB stores about 1 MiB of `tool.output` and one
//! `output.truncated`, the model still gets its head-and-tail result, and
//! the server answers other requests while the flood runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use reqwest::StatusCode;
use serde_json::json;
use serve_harness::{Harness, SseEvent};

const CONFIG: &str = "[server]\nauth = \"none\"\n[models.default]\nprovider = \"anthropic\"\n\
    model = \"claude-sonnet-4-5\"\nbase_url = \"{URL}\"\n\
    [profiles.default]\nmode = \"bypass\"\n";

const FLOOD: &str = "yes abcdefghij | head -c 200000000; echo FLOOD-END";
const ONE_MIB: usize = 1 << 20;

fn output_bytes(events: &[SseEvent]) -> usize {
    events
        .iter()
        .filter(|e| e.event == "tool.output")
        .map(|e| e.data["text"].as_str().unwrap().len())
        .sum()
}

#[tokio::test]
async fn a_200_mb_flood_stores_one_mib_and_the_model_still_gets_its_result() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "flood"}, "content": [
            {"type": "tool_use", "name": "Bash", "input": {"command": FLOOD}}]},
        {"when": {"last_tool_name": "Bash"}, "content": [{"type": "text", "text": "flooded"}]}
    ]});
    let h = Harness::new(script, CONFIG).await;
    let server = h.start().await;
    let session = server.session().await;
    let mut live = server.events(&session, None).await;
    // What the server grew to by itself (its binary, pools, a live stream).
    let before = peak_rss_bytes(server.pid());
    server.message(&session, "flood the terminal").await;

    // Once the flood has started, the server keeps answering.
    loop {
        let event = live.next().await.expect("stream ended");
        if event.event == "tool.output" {
            break;
        }
    }
    let (status, _) = server.get("/healthz").await;
    assert_eq!(status, StatusCode::OK);
    let (status, info) = server.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(status, StatusCode::OK, "{info}");
    live.until_finished(1).await;

    let events = server.all_events(&session).await;
    let finished = events.iter().find(|e| e.event == "turn.finished").unwrap();
    assert_eq!(finished.data["status"], "completed", "{}", server.log());
    assert_eq!(finished.data["result"], "flooded");

    let stored = output_bytes(&events);
    assert!(stored <= ONE_MIB, "{stored} bytes of tool.output stored");
    assert!(
        stored >= ONE_MIB - 16 * 1024,
        "streamed up to the cap: {stored}"
    );
    let truncations: Vec<&SseEvent> = events
        .iter()
        .filter(|e| e.event == "output.truncated")
        .collect();
    assert_eq!(truncations.len(), 1, "one notice");
    let call_id = events
        .iter()
        .find(|e| e.event == "tool.started")
        .unwrap()
        .data["call_id"]
        .clone();
    assert_eq!(truncations[0].data["call_id"], call_id);
    assert_eq!(truncations[0].data["limit"], "tool_call");
    assert_eq!(truncations[0].data["limit_bytes"], ONE_MIB);
    // Everything the session stored is a few MiB at most, not 200 MB.
    let total: usize = events.iter().map(|e| e.data.to_string().len()).sum();
    assert!(total < 4 * ONE_MIB, "{total} bytes of events");

    // Nor did the server hold the flood in memory: its peak resident size
    // grew far less than the 200 MB that went through it. (About 14 MiB: a
    // first command's sandbox, checkpoint and buffers. Output read faster
    // than it was relayed used to queue, 14 to 66 MiB depending on load.)
    let peak = peak_rss_bytes(server.pid());
    let grown = peak.saturating_sub(before);
    eprintln!(
        "server peak RSS: {} MiB, {} MiB before the flood",
        peak / ONE_MIB,
        before / ONE_MIB
    );
    assert!(
        grown < 32 * ONE_MIB,
        "peak RSS grew {} MiB during the flood",
        grown / ONE_MIB
    );

    // The model's next request has the bounded result: the head, the cut, the tail.
    let requests = h.model_requests();
    let last = requests.last().unwrap();
    let result = last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result")
        .expect("a tool_result");
    let content = result["content"].to_string();
    assert!(
        content.contains("abcdefghij\\nabcdefghij"),
        "{content:.200}"
    );
    assert!(content.contains("not kept"), "{content:.200}");
    assert!(content.contains("FLOOD-END"), "the tail too");
    assert!(content.len() < 40_000, "{} bytes", content.len());
}

/// `VmHWM` of a process: the most memory it has had resident.
fn peak_rss_bytes(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[tokio::test]
async fn past_the_turn_limit_only_the_notice_and_the_final_records_are_stored() {
    let reply = "word ".repeat(20_000);
    let script = json!({"replies": [
        {"when": {"last_user_contains": "two"}, "content": [
            {"type": "tool_use", "name": "Bash", "input": {"command": "head -c 60000 /dev/zero | tr '\\0' a"}}]},
        {"when": {"last_tool_result_contains": "aaaa"}, "content": [
            {"type": "tool_use", "name": "Bash", "input": {"command": "head -c 60000 /dev/zero | tr '\\0' b"}}]},
        {"when": {"last_tool_result_contains": "bbbb"}, "content": [{"type": "text", "text": reply}]}
    ]});
    let toml = format!("{CONFIG}max_turn_stream_bytes = 100000\n");
    let h = Harness::new(script, &toml).await;
    let server = h.start().await;
    let session = server.session().await;
    server.message(&session, "run two commands").await;
    server.wait_idle(&session).await;

    let events = server.all_events(&session).await;
    let deltas: usize = events
        .iter()
        .filter(|e| e.event == "message.delta")
        .map(|e| e.data["text"].as_str().unwrap().len())
        .sum();
    assert!(output_bytes(&events) + deltas <= 100_000);
    let notices: Vec<&SseEvent> = events
        .iter()
        .filter(|e| e.event == "output.truncated")
        .collect();
    assert_eq!(notices.len(), 1, "one notice for the turn");
    assert_eq!(notices[0].data["limit"], "turn");
    // The results, the whole final message and turn.finished are there.
    assert_eq!(
        events.iter().filter(|e| e.event == "tool.finished").count(),
        2
    );
    let completed = events
        .iter()
        .rev()
        .find(|e| e.event == "message.completed")
        .unwrap();
    assert_eq!(completed.data["message"]["content"][0]["text"], reply);
    let finished = events.last().unwrap();
    assert_eq!(finished.event, "turn.finished");
    assert_eq!(finished.data["status"], "completed");
    assert_eq!(finished.data["result"], reply);
}
