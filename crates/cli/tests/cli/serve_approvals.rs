//! Approving tool calls over HTTP: the request shows up live and in `pending`,
//! the answer resumes the turn, and answers are checked.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use reqwest::StatusCode;
use serde_json::json;
use serve_harness::Harness;

fn script() -> serde_json::Value {
    json!({"replies": [
        {"repeat": true, "when": {"last_user_contains": "touch"}, "content": [
            {"type": "tool_use", "name": "Bash", "input": {"command": "touch approved.txt"}}
        ]},
        {"repeat": true, "content": [{"type": "text", "text": "done"}]}
    ]})
}

#[tokio::test]
async fn a_person_approves_a_call_through_the_api() {
    let h = Harness::new(script(), "[server]\nauth = \"none\"\n").await;
    let server = h.start().await;
    let session = server.session().await;
    let mut stream = server.events(&session, None).await;
    server.message(&session, "touch it").await;

    let requested = loop {
        let event = stream.next().await.unwrap();
        if event.event == "permission.requested" {
            break event;
        }
    };
    let request_id = requested.data["request_id"].as_str().unwrap().to_string();
    assert_eq!(requested.data["tool"], "Bash");
    let (status, session_json) = server.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(session_json["status"], "waiting");
    let (_, pending) = server.get(&format!("/v1/sessions/{session}/pending")).await;
    assert_eq!(pending["pending"][0]["request_id"], request_id.as_str());
    assert_eq!(
        pending["pending"][0]["request"]["input"]["command"],
        "touch approved.txt"
    );

    let path = format!("/v1/sessions/{session}/permissions/{request_id}");
    let (status, bad) = server.post(&path, json!({"decision": "maybe"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    let (status, answered) = server.post(&path, json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    let events = stream.until_finished(1).await;
    let resolved = events
        .iter()
        .find(|e| e.event == "permission.resolved")
        .unwrap();
    assert_eq!(resolved.data["decision"], "allow");
    assert_eq!(resolved.data["by"], "user:local");
    assert!(events.last().unwrap().data["status"] == "completed");

    let (status, again) = server.post(&path, json!({"decision": "deny"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");
    let (_, pending) = server.get(&format!("/v1/sessions/{session}/pending")).await;
    assert_eq!(pending["pending"], json!([]));
    let (status, _) = server
        .post(
            &format!("/v1/sessions/{session}/permissions/nope"),
            json!({"decision": "allow"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let workspace = h.data().join("workspaces").join(&session);
    assert!(workspace.join("approved.txt").exists());
}
