//! The `claude-code` engine end to end: the real `claude` CLI (installed by
//! `make test` into `.tools`, or `AGENTD_CLAUDE_BIN`) driven by a real
//! `agentd serve`, against the testkit model server over HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use serve_harness::{Harness, SseEvent, WAIT};

pub(crate) fn claude_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("AGENTD_CLAUDE_BIN") {
        return PathBuf::from(bin);
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/node_modules/.bin/claude");
    assert!(
        local.exists(),
        "the `claude` CLI is missing; `make test` installs it into .tools"
    );
    local.canonicalize().unwrap()
}

fn toml(mode: &str) -> String {
    format!(
        "[server]\nauth = \"none\"\n\
         [models.default]\nprovider = \"claude-code\"\nmodel = \"claude-sonnet-4-5\"\n\
         base_url = \"{{URL}}\"\ncommand = \"{}\"\n\
         [models.native]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = \"{{URL}}\"\n\
         [profiles.default]\nmode = \"{mode}\"\n",
        claude_binary().display()
    )
}

/// Side requests the CLI may make on its own (titles, topic checks).
pub(crate) fn side() -> Value {
    json!({"repeat": true, "content": [{"type": "text", "text": "{\"isNewTopic\": false, \"title\": \"T\"}"}]})
}

pub(crate) fn bash(command: &str) -> Value {
    json!({"type": "tool_use", "name": "mcp__agentd__Bash", "input": {"command": command, "description": "probe"}})
}

fn types(events: &[SseEvent]) -> Vec<&str> {
    events.iter().map(|e| e.event.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_runs_in_agentds_sandbox() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "SANDBOX-PROBE"}, "content": [
            {"type": "text", "text": "Probing."},
            bash("echo \"home=$HOME\"; echo net=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ,)")
        ]},
        {"when": {"last_tool_result_contains": "home="}, "content": [{"type": "text", "text": "PROBE-DONE"}]},
        side()
    ]});
    let h = Harness::new(script, &toml("bypass")).await;
    let server = h.start().await;
    let session = server.session().await;
    let mut stream = server.events(&session, None).await;
    server.message(&session, "SANDBOX-PROBE").await;
    let events = tokio::time::timeout(WAIT * 2, stream.until_finished(1))
        .await
        .unwrap_or_else(|_| panic!("no turn.finished; log:\n{}", server.log()));
    let finished = events.last().unwrap();
    assert_eq!(
        finished.data["status"],
        "completed",
        "{events:#?}\n{}",
        server.log()
    );
    assert_eq!(finished.data["result"], "PROBE-DONE");
    let started = events.iter().find(|e| e.event == "tool.started").unwrap();
    assert_eq!(started.data["name"], "Bash");
    let done = events.iter().find(|e| e.event == "tool.finished").unwrap();
    let output = done.data["output"].as_str().unwrap();
    let workspace = h.data().join("workspaces").join(&session);
    let workspace = workspace.canonicalize().unwrap();
    assert!(
        output.contains(&format!("home={}\n", workspace.display())),
        "{output}"
    );
    // Only loopback: the sandbox has no network.
    assert!(
        output.contains("net=lo,\n") || output.trim_end().ends_with("net=lo,"),
        "{output}"
    );
    assert_eq!(done.data["call_id"], started.data["call_id"]);
    // The transcript has the call and its result.
    let (_, messages) = server
        .get(&format!("/v1/sessions/{session}/messages"))
        .await;
    let text = messages.to_string();
    assert!(
        text.contains("PROBE-DONE") && text.contains("tool_result"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_approved_through_the_api() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "TOUCH-IT"}, "content": [bash("touch approved.txt")]},
        {"when": {"last_tool_result_contains": ""}, "content": [{"type": "text", "text": "TOUCHED"}]},
        side()
    ]});
    let h = Harness::new(script, &toml("default")).await;
    let server = h.start().await;
    let session = server.session().await;
    let mut stream = server.events(&session, None).await;
    server.message(&session, "TOUCH-IT").await;
    let requested = loop {
        let event = tokio::time::timeout(WAIT, stream.next())
            .await
            .unwrap()
            .unwrap();
        if event.event == "permission.requested" {
            break event;
        }
    };
    assert_eq!(requested.data["tool"], "Bash");
    let request_id = requested.data["request_id"].as_str().unwrap();
    let (_, pending) = server.get(&format!("/v1/sessions/{session}/pending")).await;
    assert_eq!(pending["pending"][0]["request_id"], request_id);
    let path = format!("/v1/sessions/{session}/permissions/{request_id}");
    let (status, body) = server.post(&path, json!({"decision": "allow"})).await;
    assert!(status.is_success(), "{body}");
    let events = tokio::time::timeout(WAIT, stream.until_finished(1))
        .await
        .unwrap();
    let resolved = events
        .iter()
        .find(|e| e.event == "permission.resolved")
        .unwrap();
    assert_eq!(resolved.data["decision"], "allow");
    assert_eq!(
        events.last().unwrap().data["status"],
        "completed",
        "{}",
        server.log()
    );
    let workspace = h.data().join("workspaces").join(&session);
    assert!(workspace.join("approved.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_stops_the_cli_turn() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "SLEEP"}, "content": [bash("sleep 60")]},
        {"repeat": true, "when": {"last_user_contains": "AFTER"}, "content": [{"type": "text", "text": "AWAKE"}]},
        {"when": {"last_tool_result_contains": ""}, "content": [{"type": "text", "text": "slept"}]},
        side()
    ]});
    let h = Harness::new(script, &toml("bypass")).await;
    let server = h.start().await;
    let session = server.session().await;
    let mut stream = server.events(&session, None).await;
    server.message(&session, "SLEEP").await;
    loop {
        let event = tokio::time::timeout(WAIT, stream.next())
            .await
            .unwrap()
            .unwrap();
        if event.event == "tool.started" {
            break;
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let asked = std::time::Instant::now();
    let (status, body) = server
        .post(&format!("/v1/sessions/{session}/interrupt"), json!({}))
        .await;
    assert!(status.is_success(), "{body}");
    let events = tokio::time::timeout(WAIT, stream.until_finished(1))
        .await
        .unwrap();
    assert_eq!(
        events.last().unwrap().data["status"],
        "interrupted",
        "{events:#?}"
    );
    assert!(asked.elapsed() < std::time::Duration::from_secs(10));
    // The session goes on.
    server.message(&session, "AFTER").await;
    let events = tokio::time::timeout(WAIT, stream.until_finished(1))
        .await
        .unwrap();
    let last = events.last().unwrap();
    assert_eq!(
        last.data["status"],
        "completed",
        "{events:#?}\n{}",
        server.log()
    );
    assert_eq!(last.data["result"], "AWAKE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_resumes_after_a_restart_from_the_store() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "REMEMBER"}, "content": [{"type": "text", "text": "Noted."}]},
        {"when": {"last_user_contains": "RECALL"}, "content": [{"type": "text", "text": "It was KEYWORD-ZEBRA."}]},
        side()
    ]});
    let h = Harness::new(script, &toml("bypass")).await;
    let server = h.start().await;
    let session = server.session().await;
    let mut stream = server.events(&session, None).await;
    server
        .message(&session, "REMEMBER the word KEYWORD-ZEBRA")
        .await;
    let events = tokio::time::timeout(WAIT, stream.until_finished(1))
        .await
        .unwrap();
    assert_eq!(
        events.last().unwrap().data["status"],
        "completed",
        "{}",
        server.log()
    );
    drop(stream);
    assert_eq!(server.terminate().await, 0);
    // Another machine: nothing of the CLI's own files is left.
    std::fs::remove_dir_all(h.data().join("claude-code")).unwrap();

    let server = h.start().await;
    let last = server.all_events(&session).await.last().unwrap().id;
    let mut stream = server.events(&session, Some(last)).await;
    server.message(&session, "RECALL the word").await;
    let events = tokio::time::timeout(WAIT, stream.until_finished(1))
        .await
        .unwrap();
    assert_eq!(
        events.last().unwrap().data["status"],
        "completed",
        "{}",
        server.log()
    );
    let recall = h
        .model_requests()
        .into_iter()
        .rev()
        .find(|r| r.body_text().contains("RECALL the word"))
        .unwrap();
    assert!(
        recall.body_text().contains("KEYWORD-ZEBRA"),
        "the resumed CLI sent the earlier turn\n{}",
        std::fs::read_to_string(h.data().join("server-0.log")).unwrap_or_default()
    );
}

/// Types with runs of the same type collapsed (deltas and outputs are
/// coalesced differently), minus the engine-specific extras listed here.
fn shape(events: &[SseEvent]) -> Vec<String> {
    const EXTRAS: &[&str] = &["checkpoint.created", "session.updated"];
    let mut out: Vec<String> = Vec::new();
    for t in types(events) {
        if EXTRAS.contains(&t) || out.last().is_some_and(|l| l == t) {
            continue;
        }
        out.push(t.to_string());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_event_types_as_the_native_engine() {
    let conversation = |tool: &str| {
        json!({"replies": [
            {"when": {"last_user_contains": "PARITY"}, "content": [
                {"type": "text", "text": "Listing."},
                {"type": "tool_use", "name": tool, "input": {"command": "echo parity-out", "description": "d"}}
            ]},
            {"repeat": true, "when": {"last_tool_result_contains": "parity-out"}, "content": [{"type": "text", "text": "PARITY-DONE"}]},
            side()
        ]})
    };
    let mut shapes = Vec::new();
    for (model, tool) in [("native", "Bash"), ("default", "mcp__agentd__Bash")] {
        let h = Harness::new(conversation(tool), &toml("bypass")).await;
        let server = h.start().await;
        let (_, body) = server.post("/v1/sessions", json!({"model": model})).await;
        let session = body["id"].as_str().unwrap().to_string();
        let mut stream = server.events(&session, None).await;
        server.message(&session, "PARITY").await;
        let events = tokio::time::timeout(WAIT, stream.until_finished(1))
            .await
            .unwrap();
        assert_eq!(
            events.last().unwrap().data["status"],
            "completed",
            "{model}: {events:#?}"
        );
        assert_eq!(events.last().unwrap().data["result"], "PARITY-DONE");
        shapes.push(shape(&events));
    }
    assert_eq!(shapes[0], shapes[1]);
}

/// The messages of every model request the CLI made.
fn sent_messages(h: &Harness) -> Vec<Value> {
    h.model_requests()
        .into_iter()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_reach_the_model_through_the_cli() {
    use crate::serve_attachments::{PNG_B64, png};
    let script = json!({"replies": [
        {"when": {"last_user_contains": "LOOK-AT-SHOT"}, "content": [
            {"type": "tool_use", "name": "mcp__agentd__Read", "input": {"file_path": "shot.png"}}]},
        {"when": {"last_tool_result_contains": "image/png"}, "content": [{"type": "text", "text": "SEEN-IT"}]},
        side()
    ]});
    let h = Harness::new(script, &toml("bypass")).await;
    let server = h.start().await;
    let session = server.session().await;
    let upload = server
        .request(
            reqwest::Method::POST,
            &format!("/v1/sessions/{session}/files"),
        )
        .query(&[("path", "shot.png")])
        .body(png());
    let (status, body) = server.send(upload).await;
    assert!(status.is_success(), "{body}");
    let mut stream = server.events(&session, None).await;
    let image = json!({"type": "image", "source":
        {"type": "base64", "media_type": "image/png", "data": PNG_B64}});
    let content = json!([{"type": "text", "text": "LOOK-AT-SHOT and this"}, image]);
    let (status, body) = server
        .post(
            &format!("/v1/sessions/{session}/messages"),
            json!({"content": content}),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let events = tokio::time::timeout(WAIT * 2, stream.until_finished(1))
        .await
        .unwrap_or_else(|_| panic!("no turn.finished; log:\n{}", server.log()));
    let finished = events.last().unwrap();
    assert_eq!(finished.data["result"], "SEEN-IT", "{}", server.log());

    // The message's own image, as sent.
    let messages = sent_messages(&h);
    let with_image = |m: &&Value| {
        m["content"]
            .as_array()
            .is_some_and(|blocks| blocks.contains(&image))
    };
    let user = messages.iter().find(with_image);
    assert!(user.is_some(), "no request has the image: {messages:#?}");
    assert!(user.unwrap().to_string().contains("LOOK-AT-SHOT"));
    // Read's image, handed to the CLI as an MCP image item.
    let read_result = messages
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result" && b.to_string().contains("image (image/png)"))
        .unwrap_or_else(|| panic!("no Read result reached the model: {messages:#?}"));
    assert!(
        read_result.to_string().contains(PNG_B64),
        "the result has no image: {read_result}"
    );
}
