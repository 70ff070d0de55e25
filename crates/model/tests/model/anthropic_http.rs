//! `AnthropicClient` over real HTTP against the testkit's scripted model server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, Instant};

use agentd_model::anthropic::{AnthropicClient, AnthropicConfig};
use agentd_model::retry::RetryPolicy;
use agentd_model::{ModelClient, ModelError, ModelEvent, StopReason};
use agentd_protocol::{ContentBlock, Usage};
use agentd_testkit::ModelServer;
use serde_json::json;
use support::*;

fn client(base_url: String, retry: RetryPolicy) -> AnthropicClient {
    AnthropicClient::new(AnthropicConfig {
        base_url,
        retry,
        ..AnthropicConfig::new("sk-ant-test")
    })
}

#[tokio::test]
async fn streams_a_text_and_tool_use_turn() {
    let server = ModelServer::start(tool_turn_script()).await.unwrap();
    // A trailing slash on the base URL is tolerated.
    let client = client(format!("{}/", server.url()), RetryPolicy::none());
    let stream = client.stream(request("claude-sonnet-4-5")).await.unwrap();
    let events = collect(stream).await;

    // Deltas arrive in several pieces, indexed by content block, before Completed.
    let text_deltas = events
        .iter()
        .filter(|e| matches!(e, Ok(ModelEvent::TextDelta { index: 1, .. })))
        .count();
    assert!(text_deltas > 1, "{events:?}");
    assert!(matches!(
        events[0],
        Ok(ModelEvent::ThinkingDelta { index: 0, .. })
    ));
    assert!(matches!(events.last(), Some(Ok(ModelEvent::Completed(_)))));

    let (text, thinking, response) = summarize(events);
    assert_eq!(
        text,
        "I will read the README file now, then summarise it for you."
    );
    assert_eq!(thinking, "The user wants the README summarised.");
    assert_eq!(response.content.len(), 3);
    assert!(matches!(&response.content[0],
        ContentBlock::Thinking { signature: Some(sig), .. } if !sig.is_empty()));
    assert_eq!(response.content[1], ContentBlock::Text { text });
    match &response.content[2] {
        ContentBlock::ToolUse { id, name, input } => {
            assert!(id.starts_with("toolu_"), "{id}");
            assert_eq!(name, "Read");
            assert_eq!(input, &tool_turn_input());
        }
        other => panic!("expected a tool call, got {other:?}"),
    }
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 120,
            output_tokens: 45,
            cache_read_tokens: 30,
            cache_write_tokens: 0,
        }
    );
}

#[tokio::test]
async fn sends_the_documented_request() {
    let server = ModelServer::start(tool_turn_script()).await.unwrap();
    let client = client(server.url(), RetryPolicy::none());
    complete(client.stream(request("claude-sonnet-4-5")).await.unwrap()).await;

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.headers["x-api-key"], "sk-ant-test");
    assert_eq!(sent.headers["anthropic-version"], "2023-06-01");
    assert_eq!(sent.headers["content-type"], "application/json");
    let body = &sent.body;
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["max_tokens"], 2048);
    assert_eq!(body["stream"], true);
    assert_eq!(body["system"], "You are terse.");
    assert_eq!(
        body["tools"],
        json!([{"name": "LS", "description": "List a directory",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
                "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "what is here?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "tool_1", "name": "LS", "input": {"path": "."}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "tool_1", "content": "README.md\nsrc",
                 "is_error": false, "cache_control": {"type": "ephemeral"}},
            ]},
        ])
    );
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_retried() {
    let server = ModelServer::start(script(json!({"replies": [
        {"fault": {"kind": "http", "status": 429, "retry_after_s": 1}},
        {"content": [{"type": "text", "text": "after the wait"}]},
    ]})))
    .await
    .unwrap();
    let client = client(server.url(), fast_retry(3));
    let start = Instant::now();
    let (text, _, response) =
        complete(client.stream(request("claude-haiku-4-5")).await.unwrap()).await;
    assert!(
        start.elapsed() >= Duration::from_millis(950),
        "retry-after honoured"
    );
    assert_eq!(text, "after the wait");
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn overloaded_is_retried() {
    let server = ModelServer::start(script(json!({"replies": [
        {"fault": {"kind": "http", "status": 529}},
        {"content": [{"type": "text", "text": "ok"}]},
    ]})))
    .await
    .unwrap();
    let client = client(server.url(), fast_retry(3));
    let (text, _, _) = complete(client.stream(request("claude-haiku-4-5")).await.unwrap()).await;
    assert_eq!(text, "ok");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn server_errors_after_all_retries() {
    let server = ModelServer::start(script(json!({"replies": [
        {"repeat": true, "fault": {"kind": "http", "status": 500, "message": "boom"}},
    ]})))
    .await
    .unwrap();
    let client = client(server.url(), fast_retry(2));
    let err = client
        .stream(request("claude-haiku-4-5"))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, ModelError::Server { status: 500, ref message, .. } if message == "boom"),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn auth_errors_are_not_retried() {
    let server = ModelServer::start(script(json!({"replies": [
        {"repeat": true, "fault": {"kind": "http", "status": 401, "message": "invalid x-api-key"}},
    ]})))
    .await
    .unwrap();
    let client = client(server.url(), fast_retry(3));
    let err = client
        .stream(request("claude-haiku-4-5"))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, ModelError::Auth { status: 401, ref message } if message == "invalid x-api-key"),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn context_overflow_is_typed() {
    let server = ModelServer::start(script(json!({"replies": [
        {"fault": {"kind": "http", "status": 400,
                   "message": "prompt is too long: 210000 tokens > 200000 maximum"}},
    ]})))
    .await
    .unwrap();
    let client = client(server.url(), fast_retry(3));
    let err = client
        .stream(request("claude-haiku-4-5"))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, ModelError::ContextOverflow { .. }), "{err:?}");
}

#[tokio::test]
async fn a_cut_stream_ends_with_a_stream_error() {
    let server = ModelServer::start(script(json!({"replies": [
        {"content": [{"type": "text", "text": "this reply will never be finished by the server"}],
         "fault": {"kind": "cut_stream", "after_chunks": 5}},
    ]})))
    .await
    .unwrap();
    let client = client(server.url(), fast_retry(3));
    let events = collect(client.stream(request("claude-haiku-4-5")).await.unwrap()).await;
    assert!(
        matches!(events.last(), Some(Err(ModelError::Stream(_)))),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Ok(ModelEvent::TextDelta { .. })))
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Ok(ModelEvent::Completed(_))))
    );
    // Mid-stream failures are not retried.
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn invalid_tool_json_is_kept_raw() {
    let server = ModelServer::start(script(json!({"replies": [
        {"content": [{"type": "raw_tool_use", "name": "Bash",
                      "raw_input": "{\"command\": \"ls -la\", "}]},
    ]})))
    .await
    .unwrap();
    let client = client(server.url(), RetryPolicy::none());
    let (_, _, response) =
        complete(client.stream(request("claude-haiku-4-5")).await.unwrap()).await;
    match &response.content[..] {
        [ContentBlock::ToolUse { name, input, .. }] => {
            assert_eq!(name, "Bash");
            assert_eq!(input, &json!("{\"command\": \"ls -la\", "));
        }
        other => panic!("expected one tool call, got {other:?}"),
    }
    assert_eq!(response.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn a_non_sse_body_is_a_protocol_error() {
    let server = ModelServer::start(script(json!({"replies": [{"fault": {"kind": "garbage"}}]})))
        .await
        .unwrap();
    let client = client(server.url(), RetryPolicy::none());
    let events = collect(client.stream(request("claude-haiku-4-5")).await.unwrap()).await;
    assert!(
        matches!(events[..], [Err(ModelError::Protocol(_))]),
        "{events:?}"
    );
}

#[tokio::test]
async fn an_unreachable_server_is_a_transport_error() {
    let client = client(dead_url(), fast_retry(1));
    let err = client
        .stream(request("claude-haiku-4-5"))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, ModelError::Transport(_)), "{err:?}");
}

#[tokio::test]
async fn an_invalid_key_fails_up_front_or_on_every_call() {
    let config = AnthropicConfig::new("bad\nkey");
    assert!(AnthropicClient::try_new(config.clone()).is_err());
    let err = AnthropicClient::new(config)
        .stream(request("claude-haiku-4-5"))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, ModelError::BadRequest { .. }), "{err:?}");
    assert!(AnthropicClient::try_new(AnthropicConfig::default()).is_ok());
}
