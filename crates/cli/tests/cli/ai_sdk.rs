//! The Vercel AI SDK's UI message stream (issue 27): the npm `ai` package
//! (installed into `.tools/` by scripts/install-deps.sh) sends a chat
//! message with `DefaultChatTransport` to a real `agentd serve` and
//! assembles the reply with `readUIMessageStream`; the message it builds
//! must be agentd's transcript of the turn.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::serve_harness::{Harness, Server, WAIT};

const TOML: &str = "[server]\nauth = \"token\"\n[profiles.default]\nallow = [\"Bash\"]\n";

/// The package's entry point; a missing package fails the test.
fn ai_sdk() -> PathBuf {
    let entry =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/node_modules/ai/dist/index.js");
    assert!(
        entry.is_file(),
        "the AI SDK (npm `ai`) is not installed at {}: run scripts/install-deps.sh",
        entry.display()
    );
    entry
}

/// Thinking, text and a Bash call; then a closing answer (after a pause
/// long enough to cut the connection while the turn runs).
fn script() -> Value {
    json!({"replies": [
        {"when": {"last_user_contains": "count the files"}, "content": [
            {"type": "thinking", "thinking": "A shell command will count them."},
            {"type": "text", "text": "Counting."},
            {"type": "tool_use", "name": "Bash", "input": {"command": "echo FILES-3"}}]},
        {"when": {"last_tool_result_contains": "FILES-3"}, "delay_ms": 1500, "content": [
            {"type": "text", "text": "There are 3 files."}]}
    ]})
}

/// `node chat.mjs` in `mode` against the session; what it printed.
async fn chat(server: &Server, session: &str, mode: &str, extra: &[(&str, &str)]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/ai_sdk/chat.mjs");
    let mut node = tokio::process::Command::new("node");
    node.arg(script)
        .env("AI_SDK", ai_sdk())
        .env("URL", &server.url)
        .env("TOKEN", server.token.as_deref().unwrap_or(""))
        .env("SESSION", session)
        .env("MODE", mode)
        .env("PROMPT", "count the files")
        .envs(extra.iter().copied())
        .kill_on_drop(true);
    let output = tokio::time::timeout(WAIT, node.output())
        .await
        .expect("the AI SDK script took too long")
        .expect("node (on PATH) runs the AI SDK script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the AI SDK script failed ({}): {stderr}\nstdout: {stdout}",
        output.status
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// What a UI message part shows a user: its kind, text, tool input and result.
fn shown(part: &Value) -> Value {
    match part["type"].as_str().unwrap() {
        "step-start" => json!({"type": "step-start"}),
        "text" | "reasoning" => json!({"type": part["type"], "text": part["text"]}),
        tool => json!({"type": tool, "toolCallId": part["toolCallId"], "state": part["state"],
            "input": part["input"], "output": part["output"], "errorText": part["errorText"]}),
    }
}

/// agentd's transcript of turn `turn_id` as the UI message parts it stands
/// for: a step per assistant message, tool results on their calls.
fn transcript_parts(transcript: &Value, turn_id: &str) -> Vec<Value> {
    let mut parts: Vec<Value> = Vec::new();
    let messages = transcript["messages"].as_array().unwrap();
    for stored in messages.iter().filter(|m| m["turn_id"] == turn_id) {
        let message = &stored["message"];
        let assistant = message["role"] == "assistant";
        if assistant {
            parts.push(json!({"type": "step-start"}));
        }
        for block in message["content"].as_array().unwrap() {
            match block["type"].as_str().unwrap() {
                "thinking" => parts.push(json!({"type": "reasoning", "text": block["thinking"]})),
                "text" if assistant => parts.push(json!({"type": "text", "text": block["text"]})),
                "tool_use" => parts.push(
                    json!({"type": format!("tool-{}", block["name"].as_str().unwrap()),
                    "toolCallId": block["id"], "state": "input-available", "input": block["input"],
                    "output": null, "errorText": null}),
                ),
                "tool_result" => {
                    let call = parts
                        .iter_mut()
                        .find(|p| p["toolCallId"] == block["tool_use_id"])
                        .unwrap();
                    if block["is_error"] == true {
                        call["state"] = json!("output-error");
                        call["errorText"] = block["content"].clone();
                    } else {
                        call["state"] = json!("output-available");
                        call["output"] = block["content"].clone();
                    }
                }
                _ => {}
            }
        }
    }
    parts
}

async fn transcript(server: &Server, session: &str) -> Value {
    let (status, transcript) = server
        .get(&format!("/v1/sessions/{session}/messages"))
        .await;
    assert_eq!(status, StatusCode::OK, "{transcript}");
    transcript
}

fn assembled_parts(message: &Value) -> Vec<Value> {
    message["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(shown)
        .collect()
}

#[tokio::test]
async fn the_ai_sdk_assembles_agentds_transcript_from_the_stream() {
    let h = Harness::new(script(), TOML).await;
    let token = h.token("alice").await;
    let server = h.start().await.with_token(&token);
    let session = server.session().await;

    let out = chat(&server, &session, "send", &[]).await;
    assert_eq!(out["header"], "v1", "{out}");
    let message = &out["message"];
    assert_eq!(message["role"], "assistant");
    let turn_id = message["id"].as_str().unwrap();
    let expected = transcript_parts(&transcript(&server, &session).await, turn_id);
    let parts = assembled_parts(message);
    assert_eq!(
        parts, expected,
        "the AI SDK's message is agentd's transcript"
    );
    // Reasoning, text, a tool with its output, and the closing text: a user
    // sees the whole turn.
    let kinds: Vec<&str> = parts.iter().map(|p| p["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "step-start",
            "reasoning",
            "text",
            "tool-Bash",
            "step-start",
            "text"
        ]
    );
    assert_eq!(parts[3]["state"], "output-available");
    assert!(
        parts[3]["output"].as_str().unwrap().contains("FILES-3"),
        "{}",
        parts[3]
    );
    assert_eq!(parts[5]["text"], "There are 3 files.");
    let chunks: Vec<&str> = out["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(chunks.first(), Some(&"start"), "{chunks:?}");
    assert_eq!(chunks.last(), Some(&"finish"), "{chunks:?}");
    for kind in [
        "reasoning-delta",
        "text-delta",
        "tool-input-start",
        "tool-output-available",
        "finish-step",
    ] {
        assert!(chunks.contains(&kind), "{kind} missing from {chunks:?}");
    }

    // Nothing runs now: nothing to resume.
    let out = chat(&server, &session, "resume", &[]).await;
    assert_eq!(out["resumed"], false, "{out}");
}

#[tokio::test]
async fn a_cut_connection_resumes_the_running_turn_from_its_start() {
    let h = Harness::new(script(), TOML).await;
    let token = h.token("alice").await;
    let server = h.start().await.with_token(&token);
    let session = server.session().await;

    let out = chat(&server, &session, "cut-and-resume", &[]).await;
    // Cut after the tool call, with the closing answer still to come.
    let partial = assembled_parts(&out["partial"]);
    assert!(
        !partial.iter().any(|p| p["text"] == "There are 3 files."),
        "{partial:?}"
    );
    let message = &out["message"];
    let turn_id = message["id"].as_str().unwrap();
    assert_eq!(out["partial"]["id"], turn_id, "the same message");
    let expected = transcript_parts(&transcript(&server, &session).await, turn_id);
    assert_eq!(assembled_parts(message), expected);
    assert_eq!(expected.last().unwrap()["text"], "There are 3 files.");
    // One turn: resuming started nothing.
    assert_eq!(h.model_requests().len(), 2);
}

/// A turn whose Bash asks for approval, answered `approved` by the
/// script's next request, as `addToolApprovalResponse` does.
async fn approval_answered(script: Value, approved: bool) -> (Harness, Server, String, Value) {
    // The default profile asks before Bash runs.
    let h = Harness::new(script, "[server]\nauth = \"token\"\n").await;
    let token = h.token("alice").await;
    let server = h.start().await.with_token(&token);
    let session = server.session().await;
    let answer = [("APPROVED", if approved { "true" } else { "false" })];
    let out = chat(&server, &session, "approve", &answer).await;
    (h, server, session, out)
}

/// The chunk types under `key` of the script's output.
fn chunk_types<'a>(out: &'a Value, key: &str) -> Vec<&'a str> {
    let chunks = out[key].as_array().unwrap().iter();
    chunks.map(|c| c.as_str().unwrap()).collect()
}

/// The Bash tool part of a UI message.
fn bash_part(message: &Value) -> &Value {
    let parts = message["parts"].as_array().unwrap();
    parts.iter().find(|p| p["type"] == "tool-Bash").unwrap()
}

#[tokio::test]
async fn an_approval_is_asked_in_the_stream_and_answered_by_the_next_request() {
    let (_h, server, session, out) = approval_answered(script(), true).await;
    let first_chunks = chunk_types(&out, "firstChunks");
    assert!(
        first_chunks.contains(&"tool-approval-request"),
        "{first_chunks:?}"
    );
    let waiting = bash_part(&out["first"]);
    assert_eq!(waiting["state"], "approval-requested", "{waiting}");
    let message = &out["message"];
    let turn_id = message["id"].as_str().unwrap();
    assert_eq!(out["first"]["id"], turn_id);
    let expected = transcript_parts(&transcript(&server, &session).await, turn_id);
    assert_eq!(assembled_parts(message), expected, "{message}");
    assert!(
        expected[3]["output"].as_str().unwrap().contains("FILES-3"),
        "the approved call ran"
    );
}

#[tokio::test]
async fn a_denied_approval_is_a_denied_tool_output_and_nothing_runs() {
    let mut script = script();
    let told = json!({"when": {"last_tool_result_contains": "denied"}, "content": [
        {"type": "text", "text": "Not run."}]});
    script["replies"].as_array_mut().unwrap().push(told);
    let (h, _server, _session, out) = approval_answered(script, false).await;
    let chunks = chunk_types(&out, "chunks");
    assert!(chunks.contains(&"tool-output-denied"), "{chunks:?}");
    let denied = bash_part(&out["message"]);
    assert_eq!(denied["state"], "output-denied", "{denied}");
    // The call did not run: the model was told it was denied.
    let request = h.model_requests().last().unwrap().body.clone();
    let last = request["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let result = &last["content"][0];
    assert_eq!(result["type"], "tool_result", "{result}");
    assert_eq!(result["is_error"], true, "{result}");
    let output = result["content"].to_string();
    assert!(
        output.contains("denied") && !output.contains("FILES-3"),
        "{output}"
    );
}

#[tokio::test]
async fn the_chat_endpoint_refuses_strangers_and_malformed_bodies() {
    let h = Harness::new(script(), TOML).await;
    let token = h.token("alice").await;
    let server = h.start().await.with_token(&token);
    let session = server.session().await;
    let path = format!("/v1/sessions/{session}/chat");
    let body = json!({"id": session, "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "count the files"}]}]});

    let mut stranger = server.as_user("");
    stranger.token = None;
    for request in [
        stranger.request(Method::POST, &path).json(&body),
        stranger.request(Method::GET, &format!("{path}/stream")),
    ] {
        let (status, answer) = stranger.send(request).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{answer}");
    }
    // Another user's session is not found.
    let bob = server.as_user(&h.token("bob").await);
    let (status, _) = bob.post(&path, body.clone()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    for (bad, says) in [
        (json!({"messages": "hello"}), "messages"),
        (
            json!({"messages": [{"id": "u", "role": "user", "parts": [{"type": "file", "mediaType": "text/csv",
            "url": "data:text/csv;base64,YQ=="}]}]}),
            "text/csv",
        ),
        (
            json!({"messages": [{"id": "u", "role": "user", "parts": [{"type": "file", "mediaType": "image/png",
            "url": "data:image/png;base64,bm90IGEgcG5n"}]}]}),
            "image",
        ),
    ] {
        let (status, answer) = server.post(&path, bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert!(
            answer.to_string().contains(says),
            "{answer} should say {says}"
        );
    }
    let (status, answer) = server
        .send(
            server
                .request(Method::POST, &path)
                .header("content-type", "application/json")
                .body("{not json"),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    // Nothing reached the model.
    assert!(h.model_requests().is_empty());
}
