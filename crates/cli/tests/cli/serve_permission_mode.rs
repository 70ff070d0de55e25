//! A message's own permission mode (`POST …/messages {"permission_mode"}`):
//! a stricter one than the profile's applies to that turn only; a looser
//! one is refused, so a user never steps out of their profile (issue 27).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::serve_harness::{Harness, Server};

/// Edits run unasked in this profile; nothing else is allowed.
const CONFIG: &str = "[server]\nauth = \"token\"\n[profiles.default]\nmode = \"accept_edits\"\n";

fn script() -> Value {
    // Repeated: each turn asks for the same Write.
    json!({"replies": [
        {"when": {"last_tool_name": "Write"}, "repeat": true,
         "content": [{"type": "text", "text": "done"}]},
        {"when": {"last_user_contains": "write"}, "repeat": true, "content": [
            {"type": "tool_use", "name": "Write", "input": {
                "file_path": "note.txt", "content": "written\n"}}]}
    ]})
}

async fn send(alice: &Server, id: &str, body: Value) -> (StatusCode, Value) {
    alice
        .post(&format!("/v1/sessions/{id}/messages"), body)
        .await
}

async fn note(alice: &Server, id: &str) -> StatusCode {
    let path = format!("/v1/sessions/{id}/files/content");
    let request = alice
        .request(Method::GET, &path)
        .query(&[("path", "note.txt")]);
    alice.send(request).await.0
}

/// The tool names the model was offered in its last request.
fn offered(h: &Harness) -> Vec<String> {
    let request = h.model_requests().last().unwrap().body.clone();
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn a_message_may_ask_for_a_stricter_mode_never_a_looser_one() {
    let h = Harness::new(script(), CONFIG).await;
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let id = alice.session().await;

    let (status, profiles) = alice.get("/v1/profiles").await;
    assert_eq!(status, StatusCode::OK, "{profiles}");
    assert_eq!(profiles["profiles"][0]["permission_mode"], "accept_edits");

    // Looser than the profile's: refused, and no turn starts.
    for looser in ["bypass", "bypassPermissions"] {
        let body = json!({"content": "write it", "permission_mode": looser});
        let (status, error) = send(&alice, &id, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{looser}: {error}");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("looser"), "{error}");
    }
    let body = json!({"content": "write it", "permission_mode": "sloppy"});
    let (status, error) = send(&alice, &id, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert!(h.model_requests().is_empty(), "nothing ran");

    // Claude Code's `plan` (read_only): Write is not offered, and the
    // model's Write writes nothing.
    let body = json!({"content": "write it", "permission_mode": "plan"});
    let (status, accepted) = send(&alice, &id, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    alice.wait_idle(&id).await;
    assert!(
        !offered(&h).contains(&"Write".to_string()),
        "{:?}",
        offered(&h)
    );
    assert_eq!(note(&alice, &id).await, StatusCode::NOT_FOUND);

    // The next message, with no mode of its own, has the profile's again:
    // the same Write runs unasked.
    let (status, accepted) = send(&alice, &id, json!({"content": "write again"})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    alice.wait_idle(&id).await;
    assert!(offered(&h).contains(&"Write".to_string()));
    assert_eq!(note(&alice, &id).await, StatusCode::OK);
}

#[tokio::test]
async fn read_only_and_dont_ask_do_not_replace_each_other() {
    // Each lets run something the other does not (dont_ask: allow rules for
    // writing tools; read_only: any WebFetch, and asking).
    for (profile, other) in [("read_only", "dont_ask"), ("dont_ask", "plan")] {
        let config = format!(
            "[server]\nauth = \"token\"\n[profiles.default]\nmode = \"{profile}\"\nallow = [\"Write\"]\n"
        );
        let h = Harness::new(script(), &config).await;
        let server = h.start().await;
        let alice = server.as_user(&h.token("alice").await);
        let id = alice.session().await;
        let body = json!({"content": "write it", "permission_mode": other});
        let (status, error) = send(&alice, &id, body).await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{profile} → {other}: {error}"
        );
        assert_eq!(note(&alice, &id).await, StatusCode::NOT_FOUND);
    }
}
