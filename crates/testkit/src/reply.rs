//! A script reply resolved for one request: tool ids assigned, usage settled.
//! The wire modules render it.

use agentd_model::StopReason;
use agentd_model::scripted::{ScriptBlock, ScriptReply};
use agentd_protocol::Usage;
use serde_json::Value;

pub(crate) enum Block {
    Text(String),
    Thinking(String),
    /// `input_json` is sent verbatim (it may be invalid JSON for `raw_tool_use`).
    Tool {
        id: String,
        name: String,
        input_json: String,
    },
}

pub(crate) struct Plan {
    pub blocks: Vec<Block>,
    pub stop_reason: StopReason,
    pub usage: Usage,
}

impl Plan {
    /// `first_tool_id` numbers generated ids after the tool calls already in the
    /// conversation, so they are unique within it and deterministic.
    pub fn new(
        reply: &ScriptReply,
        request_chars: usize,
        first_tool_id: usize,
        id_prefix: &str,
    ) -> Plan {
        let mut next_id = first_tool_id;
        let mut tool_id = |id: &Option<String>| {
            id.clone().unwrap_or_else(|| {
                let id = format!("{id_prefix}{next_id}");
                next_id += 1;
                id
            })
        };
        let blocks = reply
            .content
            .iter()
            .map(|block| match block {
                ScriptBlock::Text { text } => Block::Text(text.clone()),
                ScriptBlock::Thinking { thinking } => Block::Thinking(thinking.clone()),
                ScriptBlock::ToolUse { id, name, input } => Block::Tool {
                    id: tool_id(id),
                    name: name.clone(),
                    input_json: input.to_string(),
                },
                ScriptBlock::RawToolUse {
                    id,
                    name,
                    raw_input,
                } => Block::Tool {
                    id: tool_id(id),
                    name: name.clone(),
                    input_json: raw_input.clone(),
                },
            })
            .collect();
        Plan {
            blocks,
            stop_reason: reply.effective_stop_reason(),
            usage: reply.effective_usage(request_chars),
        }
    }
}

/// Tool input for a non-streamed message: the JSON value, or the raw text as a
/// string when it is not valid JSON.
pub(crate) fn input_value(input_json: &str) -> Value {
    serde_json::from_str(input_json).unwrap_or_else(|_| Value::String(input_json.to_string()))
}

/// Text of a message `content` that is either a string or a list of blocks with `text`.
pub(crate) fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let texts: Vec<String> = parts
                .iter()
                .filter_map(|part| match part.get("text") {
                    Some(Value::String(s)) => Some(s.clone()),
                    _ => part.get("content").map(content_text),
                })
                .collect();
            texts.join("\n")
        }
        _ => String::new(),
    }
}

pub(crate) fn push_text(all: &mut String, text: &str) {
    if text.is_empty() {
        return;
    }
    if !all.is_empty() {
        all.push('\n');
    }
    all.push_str(text);
}

pub(crate) fn append(slot: &mut Option<String>, text: &str) {
    match slot {
        Some(s) => push_text(s, text),
        None => *slot = Some(text.to_string()),
    }
}
