//! `agentd run --input-format stream-json`: user messages on stdin in the
//! `claude` CLI's shape, one turn each in one session, until EOF.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_protocol::Event;
use agentd_store::SessionStore;
use serde_json::json;

use crate::run_harness::{self, Harness, Wire};

fn script() -> serde_json::Value {
    json!({"replies": [
        {"when": {"last_user_contains": "kestrel"}, "content": [
            {"type": "text", "text": "noted the falcon"}]},
        {"when": {"last_user_contains": "which bird"}, "content": [
            {"type": "text", "text": "it was a kestrel"}]},
        {"repeat": true, "content": [{"type": "text", "text": "ok"}]}
    ]})
}

/// A `{"type":"user",…}` line as the Agent SDK writes it.
fn user_line(content: serde_json::Value) -> String {
    json!({"type": "user", "message": {"role": "user", "content": content},
           "parent_tool_use_id": null, "session_id": "default"})
    .to_string()
}

fn finished_statuses(run: &run_harness::Run) -> Vec<String> {
    run.events
        .iter()
        .filter_map(|e| match &e.event {
            Event::TurnFinished(f) => Some(f.status.as_str().to_string()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn each_stdin_message_is_a_turn_of_one_session() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    let stdin = format!(
        "{}\n\n{}\n",
        user_line(json!("remember the word kestrel")),
        user_line(json!([{"type": "text", "text": "which bird was it?"}])),
    );
    let run = h.run_stdin(&stdin, &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(finished_statuses(&run), ["completed", "completed"]);
    let session = run.session_id();
    assert!(run.events.iter().all(|e| e.session_id == session));
    run.assert_gapless_from(run.events[0].seq);

    let requests = h.model_requests();
    assert_eq!(requests.len(), 2);
    let second = run_harness::request_text(&requests[1]);
    assert!(
        second.contains("remember the word kestrel") && second.contains("noted the falcon"),
        "the second turn sees the first's history: {second}"
    );
    let first = run_harness::request_text(&requests[0]);
    assert!(!first.contains("which bird"), "{first}");
}

#[tokio::test]
async fn an_image_block_on_stdin_reaches_the_model_as_sent() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    let image = json!({"type": "image", "source": {"type": "base64",
        "media_type": "image/png", "data": crate::serve_attachments::PNG_B64}});
    let stdin = user_line(json!([{"type": "text", "text": "what is this?"}, image]));
    let run = h.run_stdin(&format!("{stdin}\n"), &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(finished_statuses(&run), ["completed"]);
    let request = h.model_requests().last().unwrap().body.clone();
    let mut content = request["messages"][0]["content"].clone();
    // The prompt-cache mark on the last block is the provider adapter's.
    content[1].as_object_mut().unwrap().remove("cache_control");
    assert_eq!(
        content,
        json!([{"type": "text", "text": "what is this?"}, image]),
        "the blocks are kept, not joined"
    );
}

#[tokio::test]
async fn a_malformed_line_stops_the_run_after_the_turns_before_it() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    let stdin = format!(
        "{}\nthis is not json\n{}\n",
        user_line(json!("remember the word kestrel")),
        user_line(json!("which bird was it?")),
    );
    let run = h.run_stdin(&stdin, &[]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("stdin line 2: not a JSON object"),
        "{}",
        run.stderr
    );
    assert_eq!(finished_statuses(&run), ["completed"]);
    let last = run.events.last().unwrap();
    match &last.event {
        Event::Error(error) => {
            assert_eq!(error.code, "invalid_input");
            assert!(error.message.contains("stdin line 2"), "{}", error.message);
        }
        other => panic!("the last record is not the input error: {other:?}"),
    }
    assert_eq!(
        h.model_requests().len(),
        1,
        "nothing after the bad line ran"
    );

    // The turn before it is recorded: the session goes on from it.
    let again = h
        .run("which bird was it?", &["--resume", &run.session_id()])
        .await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    let last = run_harness::request_text(h.model_requests().last().unwrap());
    assert!(last.contains("noted the falcon"), "{last}");
}

#[tokio::test]
async fn unusable_input_is_refused_before_a_session_exists() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    let mislabelled = user_line(json!([
        {"type": "text", "text": "what is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "iVBORw0KGgo="}}
    ]));
    for (stdin, reason) in [
        (
            mislabelled.as_str(),
            "stdin line 1: content[1]: the data is not image/jpeg",
        ),
        ("", "stdin held no message"),
        (
            r#"{"type":"user","message":{"role":"assistant","content":"hi"}}"#,
            "role must be \"user\"",
        ),
    ] {
        let run = h.run_stdin(stdin, &[]).await;
        assert_eq!(run.code, 2, "{stdin}: {}", run.stderr);
        assert!(run.stderr.contains(reason), "{stdin}: {}", run.stderr);
        assert!(run.events.is_empty(), "{stdin}: nothing on stdout");
    }
    assert!(h.model_requests().is_empty());
    let store = h.store().await;
    let sessions = store.list_sessions("local", None, 10).await.unwrap();
    assert!(sessions.is_empty(), "no empty session left behind");

    // The flags the CLI requires with stream-json input.
    for (args, reason) in [
        (
            vec!["run", "--input-format", "stream-json"],
            "needs --output-format stream-json",
        ),
        (
            vec![
                "run",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "hi",
            ],
            "give no prompt argument",
        ),
        (vec!["run"], "a prompt is needed"),
        (
            vec![
                "run",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--image",
                "shot.png",
            ],
            "--image is for a prompt argument",
        ),
    ] {
        let out = h.command(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
    }
}
