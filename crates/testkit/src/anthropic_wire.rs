//! The Anthropic Messages API wire format: request views, SSE events, messages, errors.

use agentd_model::StopReason;
use agentd_model::scripted::{RequestView, json_chunks, text_chunks};
use bytes::Bytes;
use serde_json::{Value, json};

use crate::reply::{Block, Plan, append, content_text, input_value, push_text};

/// The matcher's view of a request body, and how many tool calls its history holds.
pub(crate) fn request_view(body: &Value) -> (RequestView, usize) {
    let mut view = RequestView::default();
    if let Some(system) = body.get("system") {
        push_text(&mut view.all_text, &content_text(system));
    }
    let messages: &[Value] = body
        .get("messages")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let mut tools: Vec<(String, String)> = Vec::new();
    for message in messages {
        for block in blocks(message) {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => push_text(&mut view.all_text, str_field(&block, "text")),
                Some("tool_result") => {
                    let text = block.get("content").map(content_text).unwrap_or_default();
                    push_text(&mut view.all_text, &text);
                }
                Some("tool_use") => {
                    let input = block.get("input").map(Value::to_string).unwrap_or_default();
                    push_text(&mut view.all_text, &input);
                    tools.push((
                        str_field(&block, "id").to_string(),
                        str_field(&block, "name").to_string(),
                    ));
                }
                _ => {}
            }
        }
    }
    // Mid-conversation `system` messages (a beta the claude CLI uses) may follow
    // the user's message; matching looks at the last user or assistant message.
    let last = messages
        .iter()
        .rev()
        .find(|m| str_field(m, "role") != "system")
        .filter(|m| str_field(m, "role") == "user");
    if let Some(last) = last {
        for block in blocks(last) {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => append(&mut view.last_user_text, str_field(&block, "text")),
                Some("tool_result") => {
                    let text = block.get("content").map(content_text).unwrap_or_default();
                    append(&mut view.last_tool_result, &text);
                    let id = str_field(&block, "tool_use_id");
                    if let Some((_, name)) = tools.iter().rev().find(|(t, _)| t == id) {
                        view.last_tool_names.push(name.clone());
                    }
                }
                _ => {}
            }
        }
    }
    let tool_count = tools.len();
    (view, tool_count)
}

/// A message's content as blocks; a plain string is one text block.
fn blocks(message: &Value) -> Vec<Value> {
    match message.get("content") {
        Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
        Some(Value::Array(blocks)) => blocks.clone(),
        _ => Vec::new(),
    }
}

fn str_field<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn stop_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn | StopReason::Other => "end_turn",
        StopReason::ToolUse => "tool_use",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::Refusal => "refusal",
    }
}

fn usage(plan: &Plan, output_tokens: u64) -> Value {
    json!({
        "input_tokens": plan.usage.input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": plan.usage.cache_write_tokens,
        "cache_read_input_tokens": plan.usage.cache_read_tokens,
    })
}

/// A fake but well-formed thinking signature.
fn signature(index: usize) -> String {
    format!("c2NyaXB0ZWQtdGhpbmtpbmctc2lnbmF0dXJl{index}")
}

fn event(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// The SSE events of a streamed reply, each a separate chunk.
pub(crate) fn stream_events(plan: &Plan, model: &str, message_id: &str) -> Vec<Bytes> {
    let mut events = vec![
        event(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": message_id, "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": usage(plan, 1),
            }}),
        ),
        event("ping", &json!({"type": "ping"})),
    ];
    for (index, block) in plan.blocks.iter().enumerate() {
        let start = match block {
            Block::Text(_) => json!({"type": "text", "text": ""}),
            Block::Thinking(_) => json!({"type": "thinking", "thinking": ""}),
            Block::Tool { id, name, .. } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": {}})
            }
        };
        events.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        let deltas: Vec<Value> = match block {
            Block::Text(text) => text_chunks(text)
                .into_iter()
                .map(|t| json!({"type": "text_delta", "text": t}))
                .collect(),
            Block::Thinking(text) => text_chunks(text)
                .into_iter()
                .map(|t| json!({"type": "thinking_delta", "thinking": t}))
                .chain([json!({"type": "signature_delta", "signature": signature(index)})])
                .collect(),
            Block::Tool { input_json, .. } => json_chunks(input_json)
                .into_iter()
                .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                .collect(),
        };
        for delta in deltas {
            events.push(event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        events.push(event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push(event(
        "message_delta",
        &json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason(plan.stop_reason), "stop_sequence": null},
            "usage": {"output_tokens": plan.usage.output_tokens}}),
    ));
    events.push(event("message_stop", &json!({"type": "message_stop"})));
    events
}

/// The whole reply as one non-streamed message object.
pub(crate) fn message(plan: &Plan, model: &str, message_id: &str) -> Value {
    let content: Vec<Value> = plan
        .blocks
        .iter()
        .enumerate()
        .map(|(index, block)| match block {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::Thinking(text) => {
                json!({"type": "thinking", "thinking": text, "signature": signature(index)})
            }
            Block::Tool {
                id,
                name,
                input_json,
            } => json!({"type": "tool_use", "id": id, "name": name, "input": input_value(input_json)}),
        })
        .collect();
    json!({
        "id": message_id, "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason(plan.stop_reason),
        "stop_sequence": null, "usage": usage(plan, plan.usage.output_tokens),
    })
}

/// The error body Anthropic sends with a non-2xx status.
pub(crate) fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}
