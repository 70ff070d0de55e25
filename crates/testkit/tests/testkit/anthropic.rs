//! The Anthropic Messages wire format over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use agentd_testkit::ModelServer;
use serde_json::{Value, json};
use support::{anthropic_request, parse_sse, post, script};

fn full_script() -> agentd_testkit::Script {
    script(json!({"replies": [{
        "content": [
            {"type": "thinking", "thinking": "I should list the files first."},
            {"type": "text", "text": "Let me look at the files in this directory."},
            {"type": "tool_use", "name": "Bash", "input": {"command": "ls -la", "description": "List files"}}
        ],
        "usage": {"input_tokens": 42, "output_tokens": 17, "cache_read_tokens": 5}
    }]}))
}

#[tokio::test]
async fn streams_events_in_order_with_split_json() {
    let server = ModelServer::start(full_script()).await.unwrap();
    let response = post(
        &format!("{}/v1/messages", server.url()),
        &anthropic_request("hi", true),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let events = parse_sse(&response.text().await.unwrap());

    // Every frame names its event and the data's `type` agrees.
    for e in &events {
        assert_eq!(e.event.as_deref(), e.json()["type"].as_str(), "{e:?}");
    }
    let names: Vec<&str> = events.iter().map(|e| e.event.as_deref().unwrap()).collect();
    assert_eq!(
        &names[..3],
        ["message_start", "ping", "content_block_start"]
    );
    assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);

    let start = events[0].json();
    let message = &start["message"];
    assert!(message["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["model"], "claude-test");
    assert_eq!(message["content"], json!([]));
    assert_eq!(message["stop_reason"], Value::Null);
    assert_eq!(message["usage"]["input_tokens"], 42);
    assert_eq!(message["usage"]["cache_read_input_tokens"], 5);
    assert!(message["usage"]["cache_creation_input_tokens"].is_number());

    // Rebuild each block from its start and deltas.
    let mut blocks: Vec<Value> = Vec::new();
    let mut partial_json: Vec<String> = Vec::new();
    let mut delta_counts: Vec<usize> = Vec::new();
    let mut open: Option<usize> = None;
    for e in &events[2..events.len() - 2] {
        let data = e.json();
        let index = data["index"].as_u64().unwrap() as usize;
        match e.event.as_deref().unwrap() {
            "content_block_start" => {
                assert_eq!(open, None);
                assert_eq!(index, blocks.len());
                open = Some(index);
                blocks.push(data["content_block"].clone());
                partial_json.push(String::new());
                delta_counts.push(0);
            }
            "content_block_delta" => {
                assert_eq!(open, Some(index));
                delta_counts[index] += 1;
                let delta = &data["delta"];
                let block = &mut blocks[index];
                match delta["type"].as_str().unwrap() {
                    "text_delta" => {
                        let t = format!(
                            "{}{}",
                            block["text"].as_str().unwrap(),
                            delta["text"].as_str().unwrap()
                        );
                        block["text"] = json!(t);
                    }
                    "thinking_delta" => {
                        let t = format!(
                            "{}{}",
                            block["thinking"].as_str().unwrap(),
                            delta["thinking"].as_str().unwrap()
                        );
                        block["thinking"] = json!(t);
                    }
                    "signature_delta" => block["signature"] = delta["signature"].clone(),
                    "input_json_delta" => {
                        partial_json[index].push_str(delta["partial_json"].as_str().unwrap())
                    }
                    other => panic!("unexpected delta {other}"),
                }
            }
            "content_block_stop" => {
                assert_eq!(open.take(), Some(index));
            }
            other => panic!("unexpected event {other}"),
        }
    }
    assert_eq!(blocks.len(), 3);
    assert_eq!(blocks[0]["type"], "thinking");
    assert_eq!(blocks[0]["thinking"], "I should list the files first.");
    assert!(
        blocks[0]["signature"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    assert_eq!(blocks[1]["type"], "text");
    assert_eq!(
        blocks[1]["text"],
        "Let me look at the files in this directory."
    );
    assert!(delta_counts[1] > 1, "text should arrive in several deltas");
    assert_eq!(blocks[2]["type"], "tool_use");
    assert_eq!(blocks[2]["id"], "toolu_1");
    assert_eq!(blocks[2]["name"], "Bash");
    assert_eq!(blocks[2]["input"], json!({}));
    assert!(delta_counts[2] > 1, "tool input should be split");
    let input: Value = serde_json::from_str(&partial_json[2]).unwrap();
    assert_eq!(
        input,
        json!({"command": "ls -la", "description": "List files"})
    );

    let delta = events[events.len() - 2].json();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 17);
    server.shutdown().await;
}

#[tokio::test]
async fn non_streaming_message_object() {
    let server = ModelServer::start(full_script()).await.unwrap();
    let response = post(
        &format!("{}/v1/messages", server.url()),
        &anthropic_request("hi", false),
    )
    .await;
    assert_eq!(response.status(), 200);
    let message: Value = response.json().await.unwrap();
    assert_eq!(message["type"], "message");
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(
        message["content"][1],
        json!({"type": "text", "text": "Let me look at the files in this directory."})
    );
    assert_eq!(message["content"][2]["input"]["command"], "ls -la");
    assert_eq!(message["usage"]["output_tokens"], 17);
}

#[tokio::test]
async fn estimates_usage_and_numbers_tools_after_history() {
    let server = ModelServer::start(script(json!({"replies": [
        {"content": [{"type": "raw_tool_use", "name": "Write", "raw_input": "{\"path\": \"a\", broken"}]}
    ]})))
    .await
    .unwrap();
    let body = json!({
        "model": "m", "max_tokens": 10, "stream": true,
        "messages": [
            {"role": "user", "content": "write it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}
        ]
    });
    let text = post(&format!("{}/v1/messages", server.url()), &body)
        .await
        .text()
        .await
        .unwrap();
    let events = parse_sse(&text);
    let start = events[0].json();
    assert!(start["message"]["usage"]["input_tokens"].as_u64().unwrap() > 10);
    let tool = events
        .iter()
        .find(|e| e.event.as_deref() == Some("content_block_start"))
        .unwrap()
        .json();
    assert_eq!(tool["content_block"]["id"], "toolu_2");
    let raw: String = events
        .iter()
        .filter(|e| e.event.as_deref() == Some("content_block_delta"))
        .map(|e| {
            e.json()["delta"]["partial_json"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(raw, "{\"path\": \"a\", broken");
}
