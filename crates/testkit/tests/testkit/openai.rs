//! The OpenAI Chat Completions wire format over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use agentd_testkit::ModelServer;
use serde_json::{Value, json};
use support::{openai_request, parse_sse, post, script};

fn tool_script() -> agentd_testkit::Script {
    script(json!({"replies": [{
        "content": [
            {"type": "thinking", "thinking": "Reading the file will tell."},
            {"type": "text", "text": "I will read the file for you now."},
            {"type": "tool_use", "name": "Read", "input": {"path": "README.md", "limit": 20}},
            {"type": "tool_use", "id": "call_custom", "name": "LS", "input": {"path": "."}}
        ],
        "usage": {"input_tokens": 30, "output_tokens": 12}
    }]}))
}

#[tokio::test]
async fn streams_chunks_with_split_tool_arguments_and_usage() {
    let server = ModelServer::start(tool_script()).await.unwrap();
    let response = post(
        &format!("{}/chat/completions", server.openai_base_url()),
        &openai_request("read it", true),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let events = parse_sse(&response.text().await.unwrap());
    assert!(events.iter().all(|e| e.event.is_none()));
    assert_eq!(events.last().unwrap().data, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| e.json())
        .collect();
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["model"], "gpt-test");
        assert!(c["id"].as_str().unwrap().starts_with("chatcmpl-"));
    }
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");

    let mut content = String::new();
    let mut reasoning = String::new();
    let mut content_chunks = 0;
    // (id, name, arguments, argument chunks) per tool call index.
    let mut calls: Vec<(String, String, String, usize)> = Vec::new();
    let mut finish = None;
    let mut usage = None;
    for c in &chunks {
        if !c["usage"].is_null() {
            assert_eq!(c["choices"], json!([]));
            usage = Some(c["usage"].clone());
            continue;
        }
        let choice = &c["choices"][0];
        assert!(finish.is_none(), "nothing but usage after finish_reason");
        if let Some(f) = choice["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
        let delta = &choice["delta"];
        if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            content.push_str(t);
            content_chunks += 1;
        }
        if let Some(t) = delta["reasoning_content"].as_str() {
            reasoning.push_str(t);
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().unwrap() as usize;
            if index == calls.len() {
                assert_eq!(call["type"], "function");
                calls.push((
                    call["id"].as_str().unwrap().to_string(),
                    call["function"]["name"].as_str().unwrap().to_string(),
                    String::new(),
                    0,
                ));
            }
            if let Some(args) = call["function"]["arguments"]
                .as_str()
                .filter(|a| !a.is_empty())
            {
                calls[index].2.push_str(args);
                calls[index].3 += 1;
            }
        }
    }
    assert_eq!(content, "I will read the file for you now.");
    assert!(content_chunks > 1);
    assert_eq!(reasoning, "Reading the file will tell.");
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].0.as_str(), calls[0].1.as_str()),
        ("call_1", "Read")
    );
    assert!(calls[0].3 > 1, "arguments should be split across chunks");
    let args: Value = serde_json::from_str(&calls[0].2).unwrap();
    assert_eq!(args, json!({"path": "README.md", "limit": 20}));
    assert_eq!(
        (calls[1].0.as_str(), calls[1].1.as_str()),
        ("call_custom", "LS")
    );
    assert_eq!(finish.as_deref(), Some("tool_calls"));
    let usage = usage.expect("usage chunk");
    assert_eq!(usage["prompt_tokens"], 30);
    assert_eq!(usage["completion_tokens"], 12);
}

#[tokio::test]
async fn non_streaming_completion() {
    let server = ModelServer::start(script(json!({"replies": [
        {"content": [{"type": "text", "text": "Plain answer."}], "stop_reason": "max_tokens"}
    ]})))
    .await
    .unwrap();
    let response = post(
        &format!("{}/chat/completions", server.openai_base_url()),
        &openai_request("hi", false),
    )
    .await;
    let completion: Value = response.json().await.unwrap();
    assert_eq!(completion["object"], "chat.completion");
    assert_eq!(completion["choices"][0]["message"]["role"], "assistant");
    assert_eq!(
        completion["choices"][0]["message"]["content"],
        "Plain answer."
    );
    assert_eq!(completion["choices"][0]["finish_reason"], "length");
    assert!(completion["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn tool_messages_are_seen_as_tool_results() {
    let server = ModelServer::start(script(json!({"replies": [
        {"when": {"last_tool_result_contains": "Cargo.toml", "last_tool_name": "LS"},
         "content": [{"type": "text", "text": "A Rust project."}]},
        {"content": [{"type": "text", "text": "fallback"}]}
    ]})))
    .await
    .unwrap();
    let body = json!({
        "model": "m", "stream": false,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "what is this?"}]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "LS", "arguments": "{}"}},
                {"id": "call_2", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "Cargo.toml src"},
            {"role": "tool", "tool_call_id": "call_2", "content": "[package]"}
        ]
    });
    let completion: Value = post(
        &format!("{}/chat/completions", server.openai_base_url()),
        &body,
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        completion["choices"][0]["message"]["content"],
        "A Rust project."
    );
}
