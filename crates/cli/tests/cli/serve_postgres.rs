//! `agentd serve` on PostgreSQL (`[database] url`), over real HTTP: a
//! tool-using turn, a server killed mid-turn and started again, and the
//! session resumed with full context. Needs the throwaway cluster that
//! `make test` starts (`AGENTD_TEST_POSTGRES_URL`, see `scripts/postgres.sh`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use serde_json::json;
use serve_harness::{Harness, SseEvent, assert_gapless, fresh_database_url};

fn statuses(events: &[SseEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.event == "turn.finished")
        .map(|e| e.data["status"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn tool_turn_kill_9_restart_and_resume_on_postgres() {
    let url = fresh_database_url().await;
    let toml = format!(
        "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n\
         [database]\nurl = \"{url}\"\n"
    );
    let h = Harness::new(
        json!({"replies": [
            {"when": {"last_user_contains": "remember"}, "content": [
                {"type": "tool_use", "name": "Bash", "input": {"command": "echo PINEAPPLE-42"}}
            ]},
            {"when": {"last_tool_result_contains": "PINEAPPLE-42"}, "content": [
                {"type": "text", "text": "The keyword is PINEAPPLE-42."}
            ]},
            {"when": {"last_user_contains": "sleepy"}, "content": [
                {"type": "text", "text": "Sleeping now."},
                {"type": "tool_use", "name": "Bash", "input": {"command": "echo started; sleep 30"}}
            ]},
            {"when": {"last_user_contains": "go on"},
             "content": [{"type": "text", "text": "resumed with context"}]}
        ]}),
        &toml,
    )
    .await;

    let server = h.start().await;
    let id = server.session().await;
    let mut events = server.events(&id, None).await;
    server.message(&id, "remember the keyword").await;
    let first = events.until_finished(1).await;
    assert_eq!(statuses(&first), ["completed"], "{}", server.log());
    assert!(first.iter().any(|e| e.event == "tool.finished"));

    // A second turn, killed mid-tool: nothing gets to record the end.
    let turn_id = server.message(&id, "sleepy task").await;
    loop {
        let event = events.next().await.expect("stream ended");
        if event.event == "tool.output" && event.data["text"].as_str().unwrap().contains("started")
        {
            break;
        }
    }
    drop(events);
    server.kill9().await;
    assert!(
        !h.data().join("agentd.db").exists(),
        "the store is PostgreSQL, not SQLite"
    );

    let server = h.start().await;
    let info = server.wait_idle(&id).await;
    assert_eq!(info["status"], "idle");
    let stored = server.all_events(&id).await;
    assert_gapless(&stored);
    assert_eq!(stored[..first.len()], first[..]);
    let finished = stored.last().unwrap();
    assert_eq!(finished.event, "turn.finished");
    assert_eq!(finished.data["turn_id"], turn_id.as_str());
    assert_eq!(finished.data["status"], "interrupted");

    let mut events = server.events(&id, Some(finished.id)).await;
    server.message(&id, "go on").await;
    let next = events.until_finished(1).await;
    let done = next.last().unwrap();
    assert_eq!(done.data["status"], "completed", "{}", server.log());
    assert_eq!(done.data["result"], "resumed with context");
    assert_eq!(next[0].id, finished.id + 1);

    // The model saw the whole conversation, from both server processes.
    let last = h.model_requests().last().unwrap().body.to_string();
    for needle in [
        "remember the keyword",
        "echo PINEAPPLE-42",
        "The keyword is PINEAPPLE-42.",
        "sleepy task",
        "sleep 30",
        "go on",
    ] {
        assert!(last.contains(needle), "request lacks {needle:?}: {last}");
    }
}
