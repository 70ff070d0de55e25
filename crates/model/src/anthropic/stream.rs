//! Messages API stream events → [`ModelEvent`]s.
//!
//! Content blocks are assembled by the stream's `index`; each kept block gets
//! its position in the final content as its delta `index` (blocks we have no
//! type for, like `redacted_thinking` or server tool results, are skipped).

use std::borrow::Cow;
use std::collections::HashMap;

use agentd_protocol::{ContentBlock, Usage};
use serde::Deserialize;
use serde_json::Value;

use super::api_error;
use crate::sse::{EventParser, SseEvent, Step};
use crate::{ModelError, ModelEvent, ModelResponse, StopReason};

#[derive(Debug)]
enum Block {
    Text(String),
    Thinking {
        thinking: String,
        signature: Option<String>,
    },
    ToolUse {
        id: String,
        name: String,
        /// The `input` of `content_block_start`, used when no deltas follow.
        start_input: Value,
        json: String,
    },
}

#[derive(Debug, Default)]
pub(crate) struct Parser {
    blocks: Vec<Block>,
    /// Stream index → position in `blocks`.
    positions: HashMap<u64, usize>,
    usage: Usage,
    stop_reason: Option<StopReason>,
    started: bool,
}

#[derive(Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

impl Parser {
    pub fn new() -> Self {
        Self::default()
    }

    fn apply_usage(&mut self, usage: Option<&Value>) {
        let Some(usage) = usage.and_then(|u| WireUsage::deserialize(u).ok()) else {
            return;
        };
        // message_delta counts are cumulative, so later values replace earlier ones.
        let u = &mut self.usage;
        u.input_tokens = usage.input_tokens.unwrap_or(u.input_tokens);
        u.output_tokens = usage.output_tokens.unwrap_or(u.output_tokens);
        u.cache_write_tokens = usage
            .cache_creation_input_tokens
            .unwrap_or(u.cache_write_tokens);
        u.cache_read_tokens = usage.cache_read_input_tokens.unwrap_or(u.cache_read_tokens);
    }

    fn block_start(&mut self, data: &Value, out: &mut Vec<ModelEvent>) {
        let Some(index) = data.get("index").and_then(Value::as_u64) else {
            return;
        };
        let start = &data["content_block"];
        let text = |key: &str| start[key].as_str().unwrap_or_default().to_string();
        let block = match start["type"].as_str() {
            Some("text") => Block::Text(text("text")),
            Some("thinking") => Block::Thinking {
                thinking: text("thinking"),
                signature: start["signature"].as_str().map(str::to_string),
            },
            Some("tool_use") => Block::ToolUse {
                id: text("id"),
                name: text("name"),
                start_input: start.get("input").cloned().unwrap_or(Value::Null),
                json: String::new(),
            },
            _ => return,
        };
        let position = self.blocks.len();
        let index_u32 = position_index(position);
        match &block {
            Block::Text(text) if !text.is_empty() => out.push(ModelEvent::TextDelta {
                index: index_u32,
                text: text.clone(),
            }),
            Block::Thinking { thinking, .. } if !thinking.is_empty() => {
                out.push(ModelEvent::ThinkingDelta {
                    index: index_u32,
                    text: thinking.clone(),
                })
            }
            _ => {}
        }
        self.blocks.push(block);
        self.positions.insert(index, position);
    }

    fn block_delta(&mut self, data: &Value, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let delta = &data["delta"];
        let piece = |key: &str| delta[key].as_str().unwrap_or_default();
        let wire = WireDelta {
            event: None,
            index: data.get("index").and_then(Value::as_u64),
            delta: DeltaBody {
                kind: delta["type"].as_str(),
                text: Cow::Borrowed(piece("text")),
                thinking: Cow::Borrowed(piece("thinking")),
                signature: Cow::Borrowed(piece("signature")),
                partial_json: Cow::Borrowed(piece("partial_json")),
            },
        };
        self.apply_delta(wire, out)
    }

    fn apply_delta(
        &mut self,
        wire: WireDelta<'_>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ModelError> {
        let Some(&position) = wire.index.and_then(|i| self.positions.get(&i)) else {
            // A delta for a block we skipped (or never saw start): nothing to keep.
            return Ok(());
        };
        let delta = wire.delta;
        let index = position_index(position);
        match (delta.kind, &mut self.blocks[position]) {
            (Some("text_delta"), Block::Text(text)) => {
                text.push_str(&delta.text);
                out.push(ModelEvent::TextDelta {
                    index,
                    text: delta.text.into_owned(),
                });
            }
            (Some("thinking_delta"), Block::Thinking { thinking, .. }) => {
                thinking.push_str(&delta.thinking);
                out.push(ModelEvent::ThinkingDelta {
                    index,
                    text: delta.thinking.into_owned(),
                });
            }
            (Some("signature_delta"), Block::Thinking { signature, .. }) => {
                signature
                    .get_or_insert_with(String::new)
                    .push_str(&delta.signature);
            }
            (Some("input_json_delta"), Block::ToolUse { json, .. }) => {
                json.push_str(&delta.partial_json);
            }
            (
                Some(
                    kind @ ("text_delta" | "thinking_delta" | "signature_delta"
                    | "input_json_delta"),
                ),
                block,
            ) => {
                return Err(ModelError::Protocol(format!(
                    "{kind} for a block of another type: {block:?}"
                )));
            }
            // citations_delta and delta types added later carry nothing we keep.
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self) -> ModelResponse {
        let blocks = std::mem::take(&mut self.blocks);
        let has_tool_use = blocks.iter().any(|b| matches!(b, Block::ToolUse { .. }));
        let content = blocks
            .into_iter()
            .map(|block| match block {
                Block::Text(text) => ContentBlock::Text { text },
                Block::Thinking {
                    thinking,
                    signature,
                } => ContentBlock::Thinking {
                    thinking,
                    signature,
                },
                Block::ToolUse {
                    id,
                    name,
                    start_input,
                    json,
                } => ContentBlock::ToolUse {
                    id,
                    name,
                    input: tool_input(start_input, json),
                },
            })
            .collect();
        let stop_reason = self.stop_reason.unwrap_or(if has_tool_use {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        });
        ModelResponse {
            content,
            stop_reason,
            usage: self.usage,
        }
    }
}

/// The final input of a tool call: the streamed JSON parsed, or the raw text as
/// a JSON string when it does not parse.
fn tool_input(start_input: Value, json: String) -> Value {
    if json.trim().is_empty() {
        return match start_input {
            Value::Null => Value::Object(Default::default()),
            input => input,
        };
    }
    serde_json::from_str(&json).unwrap_or(Value::String(json))
}

fn position_index(position: usize) -> u32 {
    u32::try_from(position).unwrap_or(u32::MAX)
}

pub(crate) fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::Refusal,
        _ => StopReason::Other,
    }
}

/// A `content_block_delta`, read without building a JSON tree: most of a
/// stream is these.
#[derive(Deserialize)]
struct WireDelta<'a> {
    /// The data's `type` (`None` when taken from a parsed tree). Borrowed:
    /// a type with escapes fails here and takes the tree.
    #[serde(rename = "type", borrow)]
    event: Option<&'a str>,
    index: Option<u64>,
    #[serde(borrow)]
    delta: DeltaBody<'a>,
}

#[derive(Deserialize)]
struct DeltaBody<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<&'a str>,
    #[serde(borrow, default)]
    text: Cow<'a, str>,
    #[serde(borrow, default)]
    thinking: Cow<'a, str>,
    #[serde(borrow, default)]
    signature: Cow<'a, str>,
    #[serde(borrow, default)]
    partial_json: Cow<'a, str>,
}

/// The event's data when it is a well-formed `content_block_delta`.
fn fast_delta(data: &str) -> Option<WireDelta<'_>> {
    let delta: WireDelta<'_> = serde_json::from_str(data).ok()?;
    (delta.event == Some("content_block_delta")).then_some(delta)
}

/// Whether the event is a well-formed `content_block_stop` or `ping`, whose
/// data carries nothing the parser uses: read without building a `Value`
/// (a reply of many blocks has one per block).
fn carries_nothing(event: Option<&str>, data: &str) -> bool {
    #[derive(Deserialize)]
    struct Typed<'a> {
        #[serde(rename = "type", borrow)]
        kind: Option<&'a str>,
    }
    matches!(event, Some("content_block_stop" | "ping"))
        && serde_json::from_str::<Typed<'_>>(data).is_ok_and(|typed| typed.kind == event)
}

impl EventParser for Parser {
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<Step, ModelError> {
        if self.started
            && event.event.as_deref() == Some("content_block_delta")
            && let Some(delta) = fast_delta(&event.data)
        {
            self.apply_delta(delta, out)?;
            return Ok(Step::Continue);
        }
        if self.started && carries_nothing(event.event.as_deref(), &event.data) {
            return Ok(Step::Continue);
        }
        let data: Value = serde_json::from_str(&event.data).map_err(|err| {
            ModelError::Protocol(format!("event data is not JSON ({err}): {:?}", event.data))
        })?;
        // The `type` in the data is authoritative; the `event:` line repeats it.
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or_default();
        if kind != "ping" && kind != "error" && kind != "message_start" && !self.started {
            return Err(ModelError::Protocol(format!(
                "{kind:?} before message_start"
            )));
        }
        match kind {
            "message_start" => {
                self.started = true;
                self.apply_usage(data["message"].get("usage"));
            }
            "content_block_start" => self.block_start(&data, out),
            "content_block_delta" => self.block_delta(&data, out)?,
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(stop_reason(reason));
                }
                self.apply_usage(data.get("usage"));
            }
            "message_stop" => {
                out.push(ModelEvent::Completed(self.finish()));
                return Ok(Step::Done);
            }
            "error" => return Err(api_error::from_stream_error(&data)),
            // ping, content_block_stop, and types added later.
            _ => {}
        }
        Ok(Step::Continue)
    }

    fn on_eof(&mut self) -> Result<ModelEvent, ModelError> {
        Err(ModelError::Stream(if self.started {
            "the connection closed before message_stop".into()
        } else {
            "the connection closed before the message started".into()
        }))
    }
}

#[cfg(test)]
mod tests;
