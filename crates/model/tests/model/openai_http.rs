//! `OpenAiClient` over real HTTP against the testkit's scripted model server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, Instant};

use agentd_model::openai::{OpenAiClient, OpenAiConfig};
use agentd_model::retry::RetryPolicy;
use agentd_model::{ModelClient, ModelError, ModelEvent, StopReason};
use agentd_protocol::{ContentBlock, Usage};
use agentd_testkit::ModelServer;
use serde_json::json;
use support::*;

fn client(base_url: String, retry: RetryPolicy) -> OpenAiClient {
    OpenAiClient::new(OpenAiConfig {
        retry,
        ..OpenAiConfig::new(base_url, "sk-test")
    })
}

#[tokio::test]
async fn streams_a_text_and_tool_call_turn() {
    let server = ModelServer::start(tool_turn_script()).await.unwrap();
    let client = client(
        format!("{}/", server.openai_base_url()),
        RetryPolicy::none(),
    );
    let events = collect(client.stream(request("gpt-4o")).await.unwrap()).await;

    let text_deltas = events
        .iter()
        .filter(|e| matches!(e, Ok(ModelEvent::TextDelta { index: 1, .. })))
        .count();
    assert!(text_deltas > 1, "{events:?}");
    assert!(matches!(
        events[0],
        Ok(ModelEvent::ThinkingDelta { index: 0, .. })
    ));

    let (text, thinking, response) = summarize(events);
    assert_eq!(
        text,
        "I will read the README file now, then summarise it for you."
    );
    assert_eq!(thinking, "The user wants the README summarised.");
    assert_eq!(
        response.content[..2],
        [
            ContentBlock::Thinking {
                thinking,
                signature: None
            },
            ContentBlock::Text { text },
        ]
    );
    match &response.content[2..] {
        [ContentBlock::ToolUse { id, name, input }] => {
            assert!(id.starts_with("call_"), "{id}");
            assert_eq!(name, "Read");
            assert_eq!(input, &tool_turn_input());
        }
        other => panic!("expected one tool call, got {other:?}"),
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
    let client = client(server.openai_base_url(), RetryPolicy::none());
    complete(client.stream(request("gpt-4.1")).await.unwrap()).await;

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.headers["authorization"], "Bearer sk-test");
    let body = &sent.body;
    assert_eq!(body["model"], "gpt-4.1");
    assert_eq!(body["max_tokens"], 2048);
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "LS", "description": "List a directory",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "what is here?"},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [
                {"id": "tool_1", "type": "function",
                 "function": {"name": "LS", "arguments": "{\"path\":\".\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "tool_1", "content": "README.md\nsrc"},
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
    let client = client(server.openai_base_url(), fast_retry(3));
    let start = Instant::now();
    let (text, _, response) = complete(client.stream(request("gpt-4o")).await.unwrap()).await;
    assert!(
        start.elapsed() >= Duration::from_millis(950),
        "retry-after honoured"
    );
    assert_eq!(text, "after the wait");
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn server_errors_after_all_retries() {
    let server = ModelServer::start(script(json!({"replies": [
        {"repeat": true, "fault": {"kind": "http", "status": 500, "message": "boom"}},
    ]})))
    .await
    .unwrap();
    let client = client(server.openai_base_url(), fast_retry(2));
    let err = client.stream(request("gpt-4o")).await.err().unwrap();
    assert!(
        matches!(err, ModelError::Server { status: 500, ref message, .. } if message == "boom"),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn auth_errors_are_not_retried() {
    let server = ModelServer::start(script(json!({"replies": [
        {"repeat": true, "fault": {"kind": "http", "status": 401, "message": "Incorrect API key"}},
    ]})))
    .await
    .unwrap();
    let client = client(server.openai_base_url(), fast_retry(3));
    let err = client.stream(request("gpt-4o")).await.err().unwrap();
    assert!(
        matches!(err, ModelError::Auth { status: 401, ref message } if message == "Incorrect API key"),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_cut_stream_ends_with_a_stream_error() {
    let server = ModelServer::start(script(json!({"replies": [
        {"content": [{"type": "text", "text": "this reply will never be finished by the server"}],
         "fault": {"kind": "cut_stream", "after_chunks": 3}},
    ]})))
    .await
    .unwrap();
    let client = client(server.openai_base_url(), fast_retry(3));
    let events = collect(client.stream(request("gpt-4o")).await.unwrap()).await;
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
    let client = client(server.openai_base_url(), RetryPolicy::none());
    let (_, _, response) = complete(client.stream(request("gpt-4o")).await.unwrap()).await;
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
    let client = client(server.openai_base_url(), RetryPolicy::none());
    let events = collect(client.stream(request("gpt-4o")).await.unwrap()).await;
    assert!(
        matches!(events[..], [Err(ModelError::Protocol(_))]),
        "{events:?}"
    );
}

#[tokio::test]
async fn no_key_sends_no_authorization() {
    let server = ModelServer::start(tool_turn_script()).await.unwrap();
    let client = OpenAiClient::new(OpenAiConfig {
        retry: RetryPolicy::none(),
        extra_headers: vec![("X-Title".into(), "agentd".into())],
        ..OpenAiConfig::new(server.openai_base_url(), "")
    });
    complete(client.stream(request("llama3.1:8b")).await.unwrap()).await;
    let sent = &server.requests()[0];
    assert!(!sent.headers.contains_key("authorization"));
    assert_eq!(sent.headers["x-title"], "agentd");
}

#[tokio::test]
async fn an_unreachable_server_is_a_transport_error() {
    let client = client(format!("{}/v1", dead_url()), fast_retry(1));
    let err = client.stream(request("gpt-4o")).await.err().unwrap();
    assert!(matches!(err, ModelError::Transport(_)), "{err:?}");
}

#[tokio::test]
async fn an_invalid_config_fails_up_front_or_on_every_call() {
    let config = OpenAiConfig {
        extra_headers: vec![("bad header".into(), "x".into())],
        ..OpenAiConfig::new("http://127.0.0.1:1/v1", "k")
    };
    assert!(OpenAiClient::try_new(config.clone()).is_err());
    let err = OpenAiClient::new(config)
        .stream(request("gpt-4o"))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, ModelError::BadRequest { .. }), "{err:?}");
    let bad_key = OpenAiConfig::new("http://127.0.0.1:1/v1", "bad\nkey");
    assert!(OpenAiClient::try_new(bad_key).is_err());
    assert!(OpenAiClient::try_new(OpenAiConfig::default()).is_ok());
}
