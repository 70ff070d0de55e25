//! The Anthropic Messages API wire format: request views, SSE events, messages, errors.

use std::borrow::Cow;

use agentd_model::anthropic::wire::{self, Delta};
use agentd_model::scripted::{RequestView, json_chunks, text_chunks};
use agentd_protocol::{ContentBlock, Usage};
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
        for block in blocks(message).iter() {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => push_text(&mut view.all_text, str_field(block, "text")),
                Some("tool_result") => {
                    let text = block.get("content").map(content_text).unwrap_or_default();
                    push_text(&mut view.all_text, &text);
                }
                Some("tool_use") => {
                    let input = block.get("input").map(Value::to_string).unwrap_or_default();
                    push_text(&mut view.all_text, &input);
                    tools.push((
                        str_field(block, "id").to_string(),
                        str_field(block, "name").to_string(),
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
        for block in blocks(last).iter() {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => append(&mut view.last_user_text, str_field(block, "text")),
                Some("tool_result") => {
                    let text = block.get("content").map(content_text).unwrap_or_default();
                    append(&mut view.last_tool_result, &text);
                    let id = str_field(block, "tool_use_id");
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

/// A message's content as blocks; a plain string is one text block. Borrowed:
/// a long history's blocks are read on every request, never copied.
fn blocks(message: &Value) -> Cow<'_, [Value]> {
    match message.get("content") {
        Some(Value::String(text)) => Cow::Owned(vec![json!({"type": "text", "text": text})]),
        Some(Value::Array(blocks)) => Cow::Borrowed(blocks.as_slice()),
        _ => Cow::Borrowed(&[]),
    }
}

fn str_field<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A fake but well-formed thinking signature.
fn signature(index: usize) -> String {
    format!("c2NyaXB0ZWQtdGhpbmtpbmctc2lnbmF0dXJl{index}")
}

/// The plan's blocks as content blocks (a tool's input parsed, or its raw
/// text as a string when it is not JSON).
fn content(plan: &Plan) -> Vec<ContentBlock> {
    plan.blocks
        .iter()
        .enumerate()
        .map(|(index, block)| match block {
            Block::Text(text) => ContentBlock::Text { text: text.clone() },
            Block::Thinking(text) => ContentBlock::Thinking {
                thinking: text.clone(),
                signature: Some(signature(index)),
            },
            Block::Tool {
                id,
                name,
                input_json,
            } => ContentBlock::ToolUse {
                id: id.clone(),
                name: name.clone(),
                input: input_value(input_json),
            },
        })
        .collect()
}

/// The SSE events of a streamed reply, each a separate chunk.
pub(crate) fn stream_events(plan: &Plan, model: &str, message_id: &str) -> Vec<Bytes> {
    let started = Usage {
        output_tokens: 1,
        ..plan.usage
    };
    let mut events = vec![
        wire::message_start(message_id, model, &started),
        wire::ping(),
    ];
    for (index, (block, planned)) in content(plan).iter().zip(&plan.blocks).enumerate() {
        events.push(wire::content_block_start(index, block));
        match planned {
            Block::Text(text) => events.extend(
                text_chunks(text)
                    .iter()
                    .map(|t| wire::content_block_delta(index, Delta::Text(t))),
            ),
            Block::Thinking(text) => {
                events.extend(
                    text_chunks(text)
                        .iter()
                        .map(|t| wire::content_block_delta(index, Delta::Thinking(t))),
                );
                let signature = signature(index);
                events.push(wire::content_block_delta(
                    index,
                    Delta::Signature(&signature),
                ));
            }
            // Sent verbatim, so that invalid JSON reaches the client as it is.
            Block::Tool { input_json, .. } => events.extend(
                json_chunks(input_json)
                    .iter()
                    .map(|p| wire::content_block_delta(index, Delta::InputJson(p))),
            ),
        }
        events.push(wire::content_block_stop(index));
    }
    events.extend(wire::message_end(plan.stop_reason, &plan.usage));
    events
}

/// The whole reply as one non-streamed message object.
pub(crate) fn message(plan: &Plan, model: &str, message_id: &str) -> Value {
    wire::message(
        message_id,
        model,
        &content(plan),
        plan.stop_reason,
        &plan.usage,
    )
}
