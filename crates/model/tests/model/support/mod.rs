//! Helpers shared by the provider tests against the testkit model server.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use agentd_model::retry::RetryPolicy;
use agentd_model::scripted::Script;
use agentd_model::{ModelError, ModelEvent, ModelRequest, ModelResponse, ModelStream, ToolSpec};
use agentd_protocol::{ContentBlock, Message, Role};
use futures::StreamExt;
use serde_json::{Value, json};

pub fn script(value: Value) -> Script {
    serde_json::from_value(value).expect("valid script")
}

/// Fast retries so tests spend milliseconds, not seconds, on backoff.
pub fn fast_retry(max_retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
        max_retry_after: Duration::from_secs(60),
    }
}

/// A request that has been through one tool round trip.
pub fn request(model: &str) -> ModelRequest {
    ModelRequest {
        model: model.into(),
        system: Some("You are terse.".into()),
        messages: std::sync::Arc::new(vec![
            Message::user_text("what is here?"),
            Message::assistant(vec![
                ContentBlock::Text {
                    text: "Let me look.".into(),
                },
                ContentBlock::ToolUse {
                    id: "tool_1".into(),
                    name: "LS".into(),
                    input: json!({"path": "."}),
                },
            ]),
            Message {
                role: Role::User,
                content: vec![ContentBlock::tool_result("tool_1", "README.md\nsrc", false)],
            },
        ]),
        tools: std::sync::Arc::new(vec![ToolSpec {
            name: "LS".into(),
            description: "List a directory".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }]),
        max_tokens: 2048,
        thinking_budget: None,
        wire_cache: None,
    }
}

/// Everything a stream yields.
pub async fn collect(stream: ModelStream) -> Vec<Result<ModelEvent, ModelError>> {
    stream.collect().await
}

/// The deltas' text by kind, and the final response; panics on a stream error.
pub async fn complete(stream: ModelStream) -> (String, String, ModelResponse) {
    summarize(collect(stream).await)
}

/// `complete` for events already collected.
pub fn summarize(events: Vec<Result<ModelEvent, ModelError>>) -> (String, String, ModelResponse) {
    let mut text = String::new();
    let mut thinking = String::new();
    let mut done = None;
    for event in events {
        match event.expect("no stream error") {
            ModelEvent::TextDelta { text: t, .. } => text.push_str(&t),
            ModelEvent::ThinkingDelta { text: t, .. } => thinking.push_str(&t),
            ModelEvent::Completed(response) => {
                assert!(done.is_none(), "one Completed");
                done = Some(response);
            }
        }
    }
    (text, thinking, done.expect("a Completed event"))
}

/// The text and tool-call reply most tests use; the tool input is long enough
/// to be streamed in several pieces.
pub fn tool_turn_script() -> Script {
    script(json!({"replies": [{
        "content": [
            {"type": "thinking", "thinking": "The user wants the README summarised."},
            {"type": "text", "text": "I will read the README file now, then summarise it for you."},
            {"type": "tool_use", "name": "Read",
             "input": {"file_path": "README.md", "offset": 10, "limit": 200,
                       "note": "a long-ish value so the JSON is split into several deltas"}},
        ],
        "usage": {"input_tokens": 120, "output_tokens": 45,
                  "cache_read_tokens": 30, "cache_write_tokens": 0},
    }]}))
}

pub fn tool_turn_input() -> Value {
    json!({"file_path": "README.md", "offset": 10, "limit": 200,
           "note": "a long-ish value so the JSON is split into several deltas"})
}

/// A port nothing listens on.
pub fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}
