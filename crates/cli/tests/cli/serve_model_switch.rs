//! A model's thinking budget in the Anthropic request, and a session's model
//! changed over HTTP: the next turn runs on the new one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::serve_harness::Harness;

const CONFIG: &str = "[models.thinker]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\
    base_url = \"{URL}\"\nthinking = { budget_tokens = 2048 }\n\
    [models.quick]\nprovider = \"anthropic\"\nmodel = \"claude-haiku-4-5\"\nbase_url = \"{URL}\"\n\
    [profiles.default]\nallow = [\"Bash\"]\n\
    [profiles.deep]\nallow = [\"Bash\"]\nthinking = { budget_tokens = 8192 }\n";

#[tokio::test]
async fn thinking_is_asked_for_and_the_model_can_change_between_turns() {
    let script =
        json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "ok"}]}]});
    let h = Harness::new(script, CONFIG).await;
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let (status, session) = alice
        .post("/v1/sessions", json!({"model": "thinker"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    assert_eq!(
        session["default_thinking"],
        json!({"budget_tokens": 2048}),
        "what it thinks with when it has no budget of its own: its model's"
    );
    let id = session["id"].as_str().unwrap();

    alice.message(id, "first").await;
    alice.wait_idle(id).await;
    let first = h.model_requests().last().unwrap().body.clone();
    assert_eq!(first["model"], "claude-sonnet-4-5");
    assert_eq!(
        first["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );

    let patch = |body| {
        alice.send(
            alice
                .request(Method::PATCH, &format!("/v1/sessions/{id}"))
                .json(&body),
        )
    };
    let (status, changed) = patch(json!({"model": "quick"})).await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["model"], "quick");
    assert_eq!(
        changed["default_thinking"],
        json!(null),
        "quick does not think"
    );
    for bad in [
        json!({"model": ""}),
        json!({"title": "   ", "model": "thinker"}),
    ] {
        let (status, body) = patch(bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }

    alice.message(id, "second").await;
    alice.wait_idle(id).await;
    let second = h.model_requests().last().unwrap().body.clone();
    assert_eq!(
        second["model"], "claude-haiku-4-5",
        "the next turn runs on the new model"
    );
    assert!(second.get("thinking").is_none(), "{second}");
    assert!(
        second.to_string().contains("first"),
        "with the session's history"
    );

    // A profile's budget wins over its model's.
    let body = json!({"model": "thinker", "profile": "deep"});
    let (status, deep) = alice.post("/v1/sessions", body).await;
    assert_eq!(status, StatusCode::CREATED, "{deep}");
    let deep = deep["id"].as_str().unwrap();
    alice.message(deep, "think hard").await;
    alice.wait_idle(deep).await;
    let request = h.model_requests().last().unwrap().body.clone();
    assert_eq!(request["thinking"]["budget_tokens"], 8192);
}

#[tokio::test]
async fn a_sessions_thinking_budget_wins_until_set_back_to_null() {
    let script =
        json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "ok"}]}]});
    let h = Harness::new(script, CONFIG).await;
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let body = json!({"model": "thinker", "profile": "deep"});
    let (status, session) = alice.post("/v1/sessions", body).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    assert_eq!(session["thinking"], json!(null), "none of its own yet");
    assert_eq!(
        session["default_thinking"],
        json!({"budget_tokens": 8192}),
        "its profile's, over its model's"
    );
    let id = session["id"].as_str().unwrap();
    let patch = |body| {
        alice.send(
            alice
                .request(Method::PATCH, &format!("/v1/sessions/{id}"))
                .json(&body),
        )
    };
    let (alice, h) = (&alice, &h);
    let turn_thinking = |text: &'static str| async move {
        alice.message(id, text).await;
        alice.wait_idle(id).await;
        let request = h.model_requests().last().unwrap().body.clone();
        assert!(request.to_string().contains(text), "{request}");
        request["thinking"].clone()
    };

    let (status, changed) = patch(json!({"thinking": {"budget_tokens": 1024}})).await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["thinking"], json!({"budget_tokens": 1024}));
    let (_, read) = alice.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(read["thinking"], json!({"budget_tokens": 1024}), "stored");
    assert_eq!(
        turn_thinking("one").await,
        json!({"type": "enabled", "budget_tokens": 1024}),
        "the session's budget wins over its profile's 8192 and its model's 2048"
    );

    for bad in [
        json!({"thinking": {"budget_tokens": 1023}}),
        json!({"thinking": {"budget_tokens": 1_000_001}}),
        json!({"thinking": {"budget_tokens": -5}}),
        json!({"thinking": {}}),
        json!({"thinking": 4096}),
        json!({"thinking": {"budget_tokens": 4096}, "title": " "}),
    ] {
        let (status, body) = patch(bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert!(body["error"]["message"].is_string(), "{body}");
    }
    let (_, read) = alice.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(read["thinking"]["budget_tokens"], 1024, "nothing changed");

    let (status, fork) = alice
        .post(&format!("/v1/sessions/{id}/fork"), json!({}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{fork}");
    assert_eq!(
        fork["thinking"],
        json!({"budget_tokens": 1024}),
        "a fork keeps it"
    );

    let (status, changed) = patch(json!({"title": "renamed"})).await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["thinking"]["budget_tokens"], 1024, "left alone");

    // All three at once, in one write.
    let all = json!({"title": "all three", "model": "quick", "thinking": {"budget_tokens": 3072}});
    let (status, changed) = patch(all).await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    let (_, read) = alice.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(read, changed);
    assert_eq!(
        (&read["title"], &read["model"], &read["thinking"]),
        (
            &json!("all three"),
            &json!("quick"),
            &json!({"budget_tokens": 3072})
        )
    );
    assert!(read["updated_at"].as_str() > changed["created_at"].as_str());

    let (status, changed) = patch(json!({"thinking": null})).await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["thinking"], json!(null));
    assert_eq!(
        turn_thinking("two").await["budget_tokens"],
        8192,
        "back to the profile's"
    );
    let (status, _) = patch(json!({"thinking": null, "profile": "deep"})).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "unknown fields are refused"
    );
}
