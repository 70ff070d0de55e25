//! Chat Completions chunks → [`ModelEvent`]s.
//!
//! Blocks are kept in order of first appearance: a run of text deltas is one
//! text block, a run of reasoning deltas one thinking block, and each tool call
//! (keyed by its `index`) one tool_use block. The usage chunk comes after the
//! `finish_reason` chunk, so the response completes at `[DONE]` (or at the end
//! of the body, if a finish reason was seen: some servers omit `[DONE]`).

use std::collections::HashMap;

use agentd_protocol::{ContentBlock, Usage};
use serde_json::Value;

use super::api_error;
use crate::sse::{EventParser, SseEvent, Step};
use crate::{ModelError, ModelEvent, ModelResponse, StopReason};

#[derive(Debug)]
enum Block {
    Text(String),
    Thinking(String),
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
}

#[derive(Debug, Default)]
pub(crate) struct Parser {
    blocks: Vec<Block>,
    /// Tool call `index` → position in `blocks`.
    tool_positions: HashMap<u64, usize>,
    usage: Usage,
    finish_reason: Option<String>,
}

impl Parser {
    pub fn new() -> Self {
        Self::default()
    }

    fn chunk(&mut self, chunk: &Value, out: &mut Vec<ModelEvent>) {
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            let count = |v: &Value| v.as_u64().unwrap_or(0);
            let cached = count(&usage["prompt_tokens_details"]["cached_tokens"]);
            // prompt_tokens includes cached ones; ours counts them apart.
            self.usage.input_tokens = count(&usage["prompt_tokens"]).saturating_sub(cached);
            self.usage.cache_read_tokens = cached;
            self.usage.output_tokens = count(&usage["completion_tokens"]);
        }
        // One choice is requested (n = 1); others would be alternatives.
        let Some(choice) = chunk["choices"].as_array().and_then(|choices| {
            choices
                .iter()
                .find(|c| c["index"].as_u64().unwrap_or(0) == 0)
        }) else {
            return;
        };
        let delta = &choice["delta"];
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta[key].as_str().filter(|t| !t.is_empty()) {
                self.push_text(text, true, out);
            }
        }
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            self.push_text(text, false, out);
        }
        if let Some(calls) = delta["tool_calls"].as_array() {
            for (i, call) in calls.iter().enumerate() {
                self.tool_call(i, call);
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish_reason = Some(reason.to_string());
        }
    }

    fn push_text(&mut self, text: &str, thinking: bool, out: &mut Vec<ModelEvent>) {
        let extend = match self.blocks.last_mut() {
            Some(Block::Thinking(existing)) if thinking => Some(existing),
            Some(Block::Text(existing)) if !thinking => Some(existing),
            _ => None,
        };
        match extend {
            Some(existing) => existing.push_str(text),
            None if thinking => self.blocks.push(Block::Thinking(text.to_string())),
            None => self.blocks.push(Block::Text(text.to_string())),
        }
        let index = u32::try_from(self.blocks.len() - 1).unwrap_or(u32::MAX);
        let text = text.to_string();
        out.push(if thinking {
            ModelEvent::ThinkingDelta { index, text }
        } else {
            ModelEvent::TextDelta { index, text }
        });
    }

    fn tool_call(&mut self, position_in_chunk: usize, call: &Value) {
        // Some servers leave out `index`; the position in the array stands in.
        let key = call["index"]
            .as_u64()
            .unwrap_or(u64::try_from(position_in_chunk).unwrap_or(u64::MAX));
        let position = *self.tool_positions.entry(key).or_insert_with(|| {
            self.blocks.push(Block::ToolCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
            self.blocks.len() - 1
        });
        let Some(Block::ToolCall {
            id,
            name,
            arguments,
        }) = self.blocks.get_mut(position)
        else {
            return;
        };
        if let Some(new_id) = call["id"].as_str().filter(|s| !s.is_empty()) {
            *id = new_id.to_string();
        }
        let function = &call["function"];
        // The name comes once; some servers repeat it in every chunk.
        if let Some(new_name) = function["name"].as_str().filter(|_| name.is_empty()) {
            *name = new_name.to_string();
        }
        match &function["arguments"] {
            Value::String(piece) => arguments.push_str(piece),
            // Non-standard, but seen: the arguments as an object.
            object @ Value::Object(_) => arguments.push_str(&object.to_string()),
            _ => {}
        }
    }

    fn finish(&mut self) -> ModelEvent {
        let blocks = std::mem::take(&mut self.blocks);
        let mut has_tool_call = false;
        let content: Vec<ContentBlock> = blocks
            .into_iter()
            .enumerate()
            .map(|(i, block)| match block {
                Block::Text(text) => ContentBlock::Text { text },
                Block::Thinking(thinking) => ContentBlock::Thinking {
                    thinking,
                    signature: None,
                },
                Block::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    has_tool_call = true;
                    ContentBlock::ToolUse {
                        // Local servers sometimes send no id; the engine needs one.
                        id: if id.is_empty() {
                            format!("call_{i}")
                        } else {
                            id
                        },
                        name,
                        input: tool_input(arguments),
                    }
                }
            })
            .collect();
        let stop_reason = match self.finish_reason.as_deref() {
            // Some servers say "stop" even when they called tools.
            _ if has_tool_call => StopReason::ToolUse,
            Some("stop") | None => StopReason::EndTurn,
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            Some("length") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            Some(_) => StopReason::Other,
        };
        ModelEvent::Completed(ModelResponse {
            content,
            stop_reason,
            usage: self.usage,
        })
    }
}

/// The parsed arguments; no arguments mean `{}`; invalid JSON stays raw.
fn tool_input(arguments: String) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(&arguments).unwrap_or(Value::String(arguments))
}

impl EventParser for Parser {
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<Step, ModelError> {
        if event.data.trim() == "[DONE]" {
            out.push(self.finish());
            return Ok(Step::Done);
        }
        let chunk: Value = serde_json::from_str(&event.data).map_err(|err| {
            ModelError::Protocol(format!("chunk is not JSON ({err}): {:?}", event.data))
        })?;
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            return Err(api_error::from_stream_error(&chunk));
        }
        if !chunk.is_object() {
            return Err(ModelError::Protocol(format!(
                "chunk is not an object: {:?}",
                event.data
            )));
        }
        self.chunk(&chunk, out);
        Ok(Step::Continue)
    }

    fn on_eof(&mut self) -> Result<ModelEvent, ModelError> {
        if self.finish_reason.is_some() {
            return Ok(self.finish());
        }
        Err(ModelError::Stream(
            "the connection closed before the response finished".into(),
        ))
    }
}

#[cfg(test)]
mod tests;
