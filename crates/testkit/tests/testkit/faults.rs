//! Scripted faults, matching, recording and the demo script over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, Instant};

use agentd_testkit::{ModelServer, RecordedRequest, demo_script};
use futures::StreamExt;
use serde_json::{Value, json};
use support::{anthropic_request, openai_request, parse_sse, post, script};

#[tokio::test]
async fn http_fault_has_status_retry_after_and_error_body() {
    let server = ModelServer::start(script(json!({"replies": [
        {"fault": {"kind": "http", "status": 429, "retry_after_s": 3}},
        {"fault": {"kind": "http", "status": 529, "message": "busy"}},
        {"fault": {"kind": "http", "status": 401}},
        {"content": [{"type": "text", "text": "finally"}]}
    ]})))
    .await
    .unwrap();
    let url = format!("{}/v1/messages", server.url());
    let response = post(&url, &anthropic_request("hi", true)).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "3");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "rate_limit_error");
    assert!(body["error"]["message"].is_string());

    let response = post(&url, &anthropic_request("hi", true)).await;
    assert_eq!(response.status(), 529);
    assert!(response.headers().get("retry-after").is_none());
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["error"],
        json!({"type": "overloaded_error", "message": "busy"})
    );

    // The OpenAI wire answers the same faults in its own error format.
    let response = post(
        &format!("{}/chat/completions", server.openai_base_url()),
        &openai_request("hi", true),
    )
    .await;
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    assert!(body["error"]["message"].is_string());
    assert!(body["error"]["type"].is_string());
    assert!(body["error"].get("code").is_some());

    let response = post(&url, &anthropic_request("hi", false)).await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn cut_stream_truncates_and_breaks_the_connection() {
    let server = ModelServer::start(script(json!({"replies": [
        {"fault": {"kind": "cut_stream", "after_chunks": 4},
         "content": [{"type": "text", "text": "This reply will never be finished by the server."}]},
        {"fault": {"kind": "cut_stream", "after_chunks": 2},
         "content": [{"type": "text", "text": "Neither will this one, sadly."}]}
    ]})))
    .await
    .unwrap();
    let response = post(
        &format!("{}/v1/messages", server.url()),
        &anthropic_request("hi", true),
    )
    .await;
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut received = Vec::new();
    let mut failed = false;
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(bytes) => received.extend_from_slice(&bytes),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "the client must see a broken body, not a clean end");
    let text = String::from_utf8(received).unwrap();
    let events = parse_sse(&text);
    assert_eq!(events.len(), 4);
    assert!(!text.contains("message_stop"));

    let response = post(
        &format!("{}/chat/completions", server.openai_base_url()),
        &openai_request("hi", true),
    )
    .await;
    let result = response.text().await;
    assert!(
        result.is_err(),
        "cut OpenAI stream must error, got {result:?}"
    );
}

#[tokio::test]
async fn garbage_delay_and_exhaustion() {
    let server = ModelServer::start(script(json!({"replies": [
        {"fault": {"kind": "garbage"}},
        {"delay_ms": 30, "content": [{"type": "text", "text": "one two three four five six"}]}
    ]})))
    .await
    .unwrap();
    let url = format!("{}/v1/messages", server.url());
    let response = post(&url, &anthropic_request("hi", true)).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(serde_json::from_str::<Value>(&text).is_err());
    assert!(!text.contains("data:"));

    let started = Instant::now();
    let events = parse_sse(
        &post(&url, &anthropic_request("hi", true))
            .await
            .text()
            .await
            .unwrap(),
    );
    // Chunks are paced: at least one delay between each pair.
    assert!(started.elapsed() >= Duration::from_millis(30 * (events.len() as u64 - 1)));

    let response = post(&url, &anthropic_request("hi", true)).await;
    assert_eq!(response.status(), 500);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exhausted")
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn matchers_pick_replies_by_user_text_and_tool_result() {
    let server = ModelServer::start(script(json!({"replies": [
        {"when": {"last_tool_result_contains": "README"}, "content": [{"type": "text", "text": "saw readme"}]},
        {"when": {"last_user_contains": "weather"}, "repeat": true, "content": [{"type": "text", "text": "sunny"}]},
        {"when": {"any_contains": "SECRET-MARK"}, "content": [{"type": "text", "text": "system matched"}]}
    ]})))
    .await
    .unwrap();
    let url = format!("{}/v1/messages", server.url());
    let text_of = |v: Value| v["content"][0]["text"].as_str().unwrap().to_string();

    for _ in 0..2 {
        let v: Value = post(&url, &anthropic_request("how is the weather?", false))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(text_of(v), "sunny");
    }
    let with_result = json!({
        "model": "m", "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "look"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "LS", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                "content": [{"type": "text", "text": "README.md"}]}]}
        ]
    });
    let v: Value = post(&url, &with_result).await.json().await.unwrap();
    assert_eq!(text_of(v), "saw readme");
    let mut req = anthropic_request("nothing special", false);
    req["system"] = json!("Prompt with SECRET-MARK inside");
    let v: Value = post(&url, &req).await.json().await.unwrap();
    assert_eq!(text_of(v), "system matched");
    // Used up: the same request now finds nothing.
    assert_eq!(post(&url, &req).await.status(), 500);

    server.set_script(script(
        json!({"replies": [{"content": [{"type": "text", "text": "new script"}]}]}),
    ));
    let v: Value = post(&url, &req).await.json().await.unwrap();
    assert_eq!(text_of(v), "new script");
}

#[tokio::test]
async fn records_requests_and_serves_side_endpoints() {
    let server = ModelServer::start(script(json!({"replies": [
        {"content": [{"type": "text", "text": "ok"}]}
    ]})))
    .await
    .unwrap();
    let client = reqwest::Client::new();
    let response = client
        .post(format!("{}/v1/messages?beta=true", server.url()))
        .header("x-api-key", "sk-test")
        .header("anthropic-version", "2023-06-01")
        .json(&anthropic_request("record me", false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    let count: Value = client
        .post(format!("{}/v1/messages/count_tokens", server.url()))
        .json(&anthropic_request("count me", false))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(count["input_tokens"].as_u64().unwrap() > 0);

    let missing = client
        .get(format!("{}/nope", server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["type"], "not_found_error");

    let bad = client
        .post(format!("{}/v1/messages", server.url()))
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);

    let requests = server.requests();
    let paths: Vec<&str> = requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/v1/messages",
            "/v1/messages/count_tokens",
            "/nope",
            "/v1/messages"
        ]
    );
    assert_eq!(requests[0].headers["x-api-key"], "sk-test");
    assert_eq!(requests[0].headers["anthropic-version"], "2023-06-01");
    assert_eq!(requests[0].body["messages"][0]["content"], "record me");
    assert_eq!(requests[2].method, "GET");
    assert_eq!(requests[3].body, json!("not json"));
    assert_eq!(server.requests_to("/v1/messages").len(), 2);

    let over_http: Vec<RecordedRequest> = client
        .get(format!("{}/_testkit/requests", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(over_http, requests);
}

#[tokio::test]
async fn demo_script_plays_over_both_wires() {
    let server = ModelServer::start(demo_script()).await.unwrap();
    let url = format!("{}/v1/messages", server.url());
    let mut messages = vec![json!({"role": "user", "content": "hello"})];
    let mut names = Vec::new();
    for _ in 0..3 {
        let body = json!({"model": "demo", "max_tokens": 100, "messages": messages});
        let reply: Value = post(&url, &body).await.json().await.unwrap();
        let content = reply["content"].as_array().unwrap().clone();
        messages.push(json!({"role": "assistant", "content": content}));
        match content.iter().find(|b| b["type"] == "tool_use") {
            Some(tool) => {
                names.push(tool["name"].as_str().unwrap().to_string());
                messages.push(json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": tool["id"], "content": "output"}
                ]}));
            }
            None => {
                let text = content[0]["text"].as_str().unwrap();
                assert!(text.contains("offline demo model"));
                names.push("text".to_string());
            }
        }
    }
    assert_eq!(names, ["LS", "Bash", "text"]);

    let openai: Value = post(
        &format!("{}/chat/completions", server.openai_base_url()),
        &openai_request("again", false),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        openai["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "LS"
    );
}
