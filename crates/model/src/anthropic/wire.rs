//! The Messages API as a *server* writes it: message objects, SSE events and
//! error bodies. agentd's own `/v1/messages` endpoint answers with these, and
//! so does the testkit's fake Anthropic server, so both speak one format.

use agentd_protocol::{ContentBlock, Usage};
use bytes::Bytes;
use serde_json::{Value, json};

use crate::StopReason;

/// The `stop_reason` string of a reply.
pub fn stop_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn | StopReason::Other => "end_turn",
        StopReason::ToolUse => "tool_use",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::Refusal => "refusal",
    }
}

/// A `usage` object, cache counts included.
pub fn usage(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
    })
}

/// The error `type` Anthropic sends with an HTTP status.
pub fn error_type(status: u16) -> &'static str {
    match status {
        400 | 415 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        504 => "timeout_error",
        _ => "api_error",
    }
}

/// The error body Anthropic sends with a non-2xx status, and as the data of
/// an `error` event mid-stream.
pub fn error_body(status: u16, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type(status), "message": message}})
}

/// One SSE event.
pub fn event(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// A tool call's input as a client may parse it: an object. Input the
/// model sent as invalid JSON (kept as its raw text) goes as `{}`, as
/// Anthropic's own API never sends anything but an object.
pub fn tool_input(input: &Value) -> Value {
    if input.is_object() {
        input.clone()
    } else {
        json!({})
    }
}

/// A content block of a reply as the Messages API writes it.
pub fn block(block: &ContentBlock) -> Value {
    match block {
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::Thinking {
            thinking,
            signature,
        } => json!({"type": "thinking", "thinking": thinking,
                    "signature": signature.as_deref().unwrap_or("")}),
        ContentBlock::ToolUse { id, name, input } => {
            json!({"type": "tool_use", "id": id, "name": name, "input": tool_input(input)})
        }
        other => serde_json::to_value(other).unwrap_or(Value::Null),
    }
}

/// The non-streamed reply.
pub fn message(
    id: &str,
    model: &str,
    content: &[ContentBlock],
    stop: StopReason,
    used: &Usage,
) -> Value {
    json!({
        "id": id, "type": "message", "role": "assistant", "model": model,
        "content": content.iter().map(block).collect::<Vec<_>>(),
        "stop_reason": stop_reason(stop), "stop_sequence": null, "usage": usage(used),
    })
}

/// `message_start`: the reply with no content yet.
pub fn message_start(id: &str, model: &str, used: &Usage) -> Bytes {
    event("message_start", &message_start_data(id, model, used))
}

/// The data of a `message_start` event (also what the `claude` CLI's
/// `stream_event`s carry).
pub fn message_start_data(id: &str, model: &str, used: &Usage) -> Value {
    json!({"type": "message_start", "message": {
        "id": id, "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage(used),
    }})
}

pub fn ping() -> Bytes {
    event("ping", &json!({"type": "ping"}))
}

/// `content_block_start` for `block`: text and thinking start empty, a tool
/// call with `input: {}` (its input follows as `input_json_delta`s).
pub fn content_block_start(index: usize, block: &ContentBlock) -> Bytes {
    event(
        "content_block_start",
        &content_block_start_data(index, block),
    )
}

pub fn content_block_start_data(index: usize, block: &ContentBlock) -> Value {
    let start = match block {
        ContentBlock::Thinking { .. } => json!({"type": "thinking", "thinking": ""}),
        ContentBlock::ToolUse { id, name, .. } => {
            json!({"type": "tool_use", "id": id, "name": name, "input": {}})
        }
        _ => json!({"type": "text", "text": ""}),
    };
    json!({"type": "content_block_start", "index": index, "content_block": start})
}

/// A delta of a block being streamed.
pub enum Delta<'a> {
    Text(&'a str),
    Thinking(&'a str),
    Signature(&'a str),
    InputJson(&'a str),
}

pub fn content_block_delta(index: usize, delta: Delta<'_>) -> Bytes {
    event(
        "content_block_delta",
        &content_block_delta_data(index, delta),
    )
}

pub fn content_block_delta_data(index: usize, delta: Delta<'_>) -> Value {
    let delta = match delta {
        Delta::Text(text) => json!({"type": "text_delta", "text": text}),
        Delta::Thinking(text) => json!({"type": "thinking_delta", "thinking": text}),
        Delta::Signature(signature) => {
            json!({"type": "signature_delta", "signature": signature})
        }
        Delta::InputJson(partial) => json!({"type": "input_json_delta", "partial_json": partial}),
    };
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

pub fn content_block_stop(index: usize) -> Bytes {
    event("content_block_stop", &content_block_stop_data(index))
}

pub fn content_block_stop_data(index: usize) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

/// `message_delta` then `message_stop`: how the reply ended and what it used.
pub fn message_end(stop: StopReason, used: &Usage) -> [Bytes; 2] {
    let [delta, stop] = message_end_data(stop, used);
    [event("message_delta", &delta), event("message_stop", &stop)]
}

pub fn message_end_data(stop: StopReason, used: &Usage) -> [Value; 2] {
    [
        json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason(stop), "stop_sequence": null},
            "usage": usage(used)}),
        json!({"type": "message_stop"}),
    ]
}

/// An `error` event: a failure after the stream had started.
pub fn error_event(status: u16, message: &str) -> Bytes {
    event("error", &error_body(status, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_framed_as_sse() {
        let frame = content_block_delta(2, Delta::Text("hi"));
        let text = std::str::from_utf8(&frame).unwrap();
        assert!(
            text.starts_with("event: content_block_delta\ndata: {"),
            "{text}"
        );
        assert!(text.ends_with("}\n\n"), "{text}");
        let data: Value =
            serde_json::from_str(text.lines().nth(1).unwrap().strip_prefix("data: ").unwrap())
                .unwrap();
        assert_eq!(data["index"], 2);
        assert_eq!(data["delta"], json!({"type": "text_delta", "text": "hi"}));
    }

    #[test]
    fn error_types_follow_the_status() {
        assert_eq!(
            error_body(401, "x")["error"]["type"],
            "authentication_error"
        );
        assert_eq!(error_type(404), "not_found_error");
        assert_eq!(error_type(429), "rate_limit_error");
        assert_eq!(error_type(529), "overloaded_error");
        assert_eq!(error_type(500), "api_error");
    }

    #[test]
    fn a_message_carries_blocks_stop_reason_and_usage() {
        let content = [
            ContentBlock::Text { text: "a".into() },
            ContentBlock::ToolUse {
                id: "t1".into(),
                name: "Bash".into(),
                input: json!({"command": "ls"}),
            },
        ];
        let used = Usage {
            input_tokens: 5,
            output_tokens: 7,
            cache_read_tokens: 2,
            cache_write_tokens: 1,
        };
        let m = message("msg_1", "m", &content, StopReason::ToolUse, &used);
        assert_eq!(m["stop_reason"], "tool_use");
        assert_eq!(m["content"][1]["input"]["command"], "ls");
        assert_eq!(m["usage"]["cache_read_input_tokens"], 2);
        assert_eq!(m["usage"]["cache_creation_input_tokens"], 1);
        let broken = ContentBlock::ToolUse {
            id: "t2".into(),
            name: "Bash".into(),
            input: json!("{\"command\": \"ls"),
        };
        assert_eq!(block(&broken)["input"], json!({}));
    }
}
