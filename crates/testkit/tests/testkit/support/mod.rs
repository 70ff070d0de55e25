//! Helpers shared by the wire tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use agentd_testkit::{Script, ScriptReply};
use serde_json::Value;

pub fn script(value: Value) -> Script {
    serde_json::from_value(value).unwrap()
}

pub fn reply(value: Value) -> ScriptReply {
    serde_json::from_value(value).unwrap()
}

/// One server-sent event: its `event:` name (if any) and parsed `data:`.
#[derive(Debug, Clone)]
pub struct Sse {
    pub event: Option<String>,
    pub data: String,
}

impl Sse {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("bad data {:?}: {e}", self.data))
    }
}

pub fn parse_sse(text: &str) -> Vec<Sse> {
    let mut events = Vec::new();
    for frame in text.split("\n\n").filter(|f| !f.trim().is_empty()) {
        let mut event = None;
        let mut data = Vec::new();
        for line in frame.lines() {
            if let Some(name) = line.strip_prefix("event: ") {
                event = Some(name.to_string());
            } else if let Some(d) = line.strip_prefix("data: ") {
                data.push(d);
            } else {
                panic!("unexpected SSE line {line:?}");
            }
        }
        events.push(Sse {
            event,
            data: data.join("\n"),
        });
    }
    assert!(text.ends_with("\n\n"), "stream ends mid-frame: {text:?}");
    events
}

pub fn anthropic_request(text: &str, stream: bool) -> Value {
    serde_json::json!({
        "model": "claude-test",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are a test."}],
        "messages": [{"role": "user", "content": text}],
        "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
        "stream": stream,
    })
}

pub fn openai_request(text: &str, stream: bool) -> Value {
    serde_json::json!({
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You are a test."},
            {"role": "user", "content": text}
        ],
        "stream": stream,
        "stream_options": {"include_usage": true},
    })
}

pub async fn post(url: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .header("x-api-key", "test")
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap()
}
