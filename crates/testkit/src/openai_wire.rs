//! The OpenAI Chat Completions wire format: request views, chunks, completions, errors.

use agentd_model::StopReason;
use agentd_model::scripted::{RequestView, json_chunks, text_chunks};
use bytes::Bytes;
use serde_json::{Value, json};

use crate::reply::{Block, Plan, append, content_text, push_text};

/// The matcher's view of a request body, and how many tool calls its history holds.
pub(crate) fn request_view(body: &Value) -> (RequestView, usize) {
    let mut view = RequestView::default();
    let messages: &[Value] = body
        .get("messages")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let mut tools: Vec<(String, String)> = Vec::new();
    for message in messages {
        if let Some(content) = message.get("content") {
            push_text(&mut view.all_text, &content_text(content));
        }
        for call in message
            .get("tool_calls")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
        {
            let function = call.get("function").unwrap_or(&Value::Null);
            push_text(&mut view.all_text, str_field(function, "arguments"));
            tools.push((
                str_field(call, "id").to_string(),
                str_field(function, "name").to_string(),
            ));
        }
    }
    // Trailing system/developer messages are instructions, not the conversation's last turn.
    let end = messages
        .iter()
        .rposition(|m| !matches!(str_field(m, "role"), "system" | "developer"))
        .map_or(0, |i| i + 1);
    let messages = &messages[..end];
    match messages.last().map(|m| str_field(m, "role")) {
        Some("user") => {
            if let Some(last) = messages.last() {
                let text = last.get("content").map(content_text).unwrap_or_default();
                view.last_user_text = Some(text);
            }
        }
        Some("tool") => {
            // Results of one assistant message are consecutive `tool` messages.
            let first = messages
                .iter()
                .rposition(|m| str_field(m, "role") != "tool")
                .map_or(0, |i| i + 1);
            for message in &messages[first..] {
                let text = message.get("content").map(content_text).unwrap_or_default();
                append(&mut view.last_tool_result, &text);
                let id = str_field(message, "tool_call_id");
                if let Some((_, name)) = tools.iter().rev().find(|(t, _)| t == id) {
                    view.last_tool_names.push(name.clone());
                }
            }
        }
        _ => {}
    }
    let tool_count = tools.len();
    (view, tool_count)
}

fn str_field<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn | StopReason::StopSequence | StopReason::Other => "stop",
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
        StopReason::Refusal => "content_filter",
    }
}

fn usage(plan: &Plan) -> Value {
    let prompt = plan.usage.input_tokens + plan.usage.cache_read_tokens;
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": plan.usage.output_tokens,
        "total_tokens": prompt + plan.usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": plan.usage.cache_read_tokens},
    })
}

/// The `data:` chunks of a streamed reply, ending with `[DONE]`.
pub(crate) fn stream_chunks(plan: &Plan, model: &str, id: &str, created: u64) -> Vec<Bytes> {
    let chunk = |choices: Value, usage: Value| {
        let object = json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": null, "choices": choices, "usage": usage,
        });
        Bytes::from(format!("data: {object}\n\n"))
    };
    let delta = |delta: Value| {
        chunk(
            json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]),
            Value::Null,
        )
    };
    let mut chunks = vec![delta(json!({"role": "assistant", "content": ""}))];
    let mut tool_index = 0;
    for block in &plan.blocks {
        match block {
            Block::Text(text) => chunks.extend(
                text_chunks(text)
                    .into_iter()
                    .map(|t| delta(json!({"content": t}))),
            ),
            Block::Thinking(text) => chunks.extend(
                text_chunks(text)
                    .into_iter()
                    .map(|t| delta(json!({"reasoning_content": t}))),
            ),
            Block::Tool {
                id,
                name,
                input_json,
            } => {
                chunks.push(delta(json!({"tool_calls": [{
                    "index": tool_index, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""},
                }]})));
                chunks.extend(json_chunks(input_json).into_iter().map(|piece| {
                    delta(json!({"tool_calls": [{
                        "index": tool_index, "function": {"arguments": piece},
                    }]}))
                }));
                tool_index += 1;
            }
        }
    }
    chunks.push(chunk(
        json!([{"index": 0, "delta": {}, "logprobs": null,
                "finish_reason": finish_reason(plan.stop_reason)}]),
        Value::Null,
    ));
    chunks.push(chunk(json!([]), usage(plan)));
    chunks.push(Bytes::from_static(b"data: [DONE]\n\n"));
    chunks
}

/// The whole reply as one non-streamed `chat.completion`.
pub(crate) fn completion(plan: &Plan, model: &str, id: &str, created: u64) -> Value {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    for block in &plan.blocks {
        match block {
            Block::Text(t) => text.push_str(t),
            Block::Thinking(t) => reasoning.push_str(t),
            Block::Tool {
                id,
                name,
                input_json,
            } => calls.push(json!({
                "id": id, "type": "function",
                "function": {"name": name, "arguments": input_json},
            })),
        }
    }
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::String(text) },
        "refusal": null,
    });
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    if !reasoning.is_empty() {
        message["reasoning_content"] = Value::String(reasoning);
    }
    json!({
        "id": id, "object": "chat.completion", "created": created, "model": model,
        "system_fingerprint": null,
        "choices": [{"index": 0, "message": message, "logprobs": null,
                     "finish_reason": finish_reason(plan.stop_reason)}],
        "usage": usage(plan),
    })
}

/// The error body OpenAI sends with a non-2xx status.
pub(crate) fn error_body(status: u16, message: &str) -> Value {
    let (kind, code) = match status {
        400 | 422 => ("invalid_request_error", Value::Null),
        401 => ("invalid_request_error", json!("invalid_api_key")),
        403 => ("permission_error", Value::Null),
        404 => ("invalid_request_error", json!("not_found")),
        429 => ("rate_limit_error", json!("rate_limit_exceeded")),
        503 | 529 => ("server_error", json!("overloaded")),
        _ => ("server_error", Value::Null),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}
