//! agentd's events as the `claude` CLI's stream-json messages: `system`
//! init, `assistant` messages with content blocks, `user` messages with tool
//! results, `stream_event` partials (`--include-partial-messages`) and a
//! `result` per turn.

use std::collections::{BTreeMap, HashMap};

use agentd_model::StopReason;
use agentd_model::anthropic::wire::{self, Delta};
use agentd_protocol::{
    ContentBlock, Decision, DeltaKind, Event, Message, TurnFinished, TurnStatus, Usage,
};
use serde_json::{Value, json};

/// The messages of one process's turns, in one session.
pub struct Wire {
    pub session_id: String,
    pub model: String,
    partial: bool,
    /// Which subagent call (if any) a tool call belongs to.
    parents: HashMap<String, Option<String>>,
    /// The main agent's message being streamed: its blocks' kinds by index.
    streaming: Option<BTreeMap<u32, DeltaKind>>,
    /// The last model call's usage, for the message it produced.
    usage: Option<Usage>,
    /// Calls waiting for a permission: request id → the call.
    asked: HashMap<String, Value>,
    denials: Vec<Value>,
    /// Cost of this process's turns, as the CLI reports it.
    total_cost_usd: f64,
}

impl Wire {
    pub fn new(session_id: String, model: String, partial: bool) -> Self {
        Self {
            session_id,
            model,
            partial,
            parents: HashMap::new(),
            streaming: None,
            usage: None,
            asked: HashMap::new(),
            denials: Vec::new(),
            total_cost_usd: 0.0,
        }
    }

    fn uuid() -> String {
        uuid::Uuid::new_v4().to_string()
    }

    /// The messages `event` makes.
    pub fn event(&mut self, event: &Event) -> Vec<Value> {
        match event {
            Event::TurnStarted { .. } => {
                // Nothing of an interrupted message carries over.
                self.denials.clear();
                self.streaming = None;
                self.usage = None;
                Vec::new()
            }
            Event::MessageDelta {
                parent_call_id: None,
                index,
                kind,
                text,
                ..
            } if self.partial => self.delta(*index, *kind, text),
            Event::Usage {
                usage,
                parent_call_id: None,
                ..
            } => {
                self.usage = Some(*usage);
                Vec::new()
            }
            Event::MessageCompleted {
                message,
                parent_call_id,
                ..
            } => self.completed(message, parent_call_id.as_deref()),
            Event::ToolStarted {
                call_id,
                parent_call_id,
                ..
            } => {
                self.parents.insert(call_id.clone(), parent_call_id.clone());
                Vec::new()
            }
            Event::ToolFinished {
                call_id,
                is_error,
                output,
                ..
            } => vec![self.tool_result(call_id, *is_error, output)],
            Event::PermissionRequested {
                request_id,
                call_id,
                tool,
                input,
                ..
            } => {
                let call = json!({"tool_name": tool, "tool_use_id": call_id, "tool_input": input});
                self.asked.insert(request_id.clone(), call);
                Vec::new()
            }
            Event::PermissionResolved {
                request_id,
                decision,
                ..
            } => {
                let call = self.asked.remove(request_id);
                if let (Some(call), Decision::Deny) = (call, decision) {
                    self.denials.push(call);
                }
                Vec::new()
            }
            Event::Compaction {
                trigger,
                tokens_before,
                ..
            } => vec![json!({
                "type": "system",
                "subtype": "compact_boundary",
                "session_id": self.session_id,
                "uuid": Self::uuid(),
                "compact_metadata": {"trigger": trigger, "pre_tokens": tokens_before},
            })],
            Event::TurnFinished(finished) => self.finished(finished),
            _ => Vec::new(),
        }
    }

    fn stream_event(&self, event: Value) -> Value {
        json!({
            "type": "stream_event",
            "uuid": Self::uuid(),
            "session_id": self.session_id,
            "event": event,
            "parent_tool_use_id": null,
        })
    }

    fn delta(&mut self, index: u32, kind: DeltaKind, text: &str) -> Vec<Value> {
        let mut out = Vec::new();
        if self.streaming.is_none() {
            out.push(self.message_start());
        }
        let blocks = self.streaming.get_or_insert_with(BTreeMap::new);
        let index = index as usize;
        if blocks.insert(index as u32, kind).is_none() {
            let block = match kind {
                DeltaKind::Text => ContentBlock::Text {
                    text: String::new(),
                },
                DeltaKind::Thinking => ContentBlock::Thinking {
                    thinking: String::new(),
                    signature: None,
                },
            };
            out.push(self.stream_event(wire::content_block_start_data(index, &block)));
        }
        let delta = match kind {
            DeltaKind::Text => Delta::Text(text),
            DeltaKind::Thinking => Delta::Thinking(text),
        };
        out.push(self.stream_event(wire::content_block_delta_data(index, delta)));
        out
    }

    /// The end of a streamed message: its tool calls (which stream no
    /// text), the open blocks closed, and the stop.
    fn end_stream(&mut self, message: &Message, stop: StopReason) -> Vec<Value> {
        let streamed = self.streaming.take().unwrap_or_default();
        let mut out = Vec::new();
        if streamed.is_empty() {
            out.push(self.message_start());
        }
        for (index, block) in message.content.iter().enumerate() {
            if let ContentBlock::ToolUse { input, .. } = block {
                let input = wire::tool_input(input).to_string();
                out.push(self.stream_event(wire::content_block_start_data(index, block)));
                let delta = wire::content_block_delta_data(index, Delta::InputJson(&input));
                out.push(self.stream_event(delta));
            } else if !streamed.contains_key(&(index as u32)) {
                continue;
            }
            out.push(self.stream_event(wire::content_block_stop_data(index)));
        }
        let used = self.usage.unwrap_or_default();
        for end in wire::message_end_data(stop, &used) {
            out.push(self.stream_event(end));
        }
        out
    }

    fn message_start(&self) -> Value {
        let start = wire::message_start_data(&message_id(), &self.model, &Usage::default());
        self.stream_event(start)
    }

    fn completed(&mut self, message: &Message, parent: Option<&str>) -> Vec<Value> {
        let stop = if message.tool_uses().next().is_some() {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        };
        let mut out = Vec::new();
        if self.partial && parent.is_none() {
            out.extend(self.end_stream(message, stop));
        }
        let content: Vec<Value> = message.content.iter().map(wire::block).collect();
        let usage = match (parent, self.usage.take()) {
            (None, Some(usage)) => wire::usage(&usage),
            _ => wire::usage(&Usage::default()),
        };
        out.push(json!({
            "type": "assistant",
            "message": {
                "id": message_id(),
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": content,
                "stop_reason": wire::stop_reason(stop),
                "stop_sequence": null,
                "usage": usage,
            },
            "parent_tool_use_id": parent,
            "session_id": self.session_id,
            "uuid": Self::uuid(),
        }));
        out
    }

    fn tool_result(&self, call_id: &str, is_error: bool, output: &str) -> Value {
        let parent = self.parents.get(call_id).cloned().flatten();
        json!({
            "type": "user",
            "message": {
                "role": "user",
                "content": [{
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": output,
                    "is_error": is_error,
                }],
            },
            "parent_tool_use_id": parent,
            "session_id": self.session_id,
            "uuid": Self::uuid(),
            "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        })
    }

    fn finished(&mut self, finished: &TurnFinished) -> Vec<Value> {
        self.total_cost_usd += finished.cost_usd;
        let mut out = Vec::new();
        if finished.status == TurnStatus::Interrupted {
            out.push(json!({
                "type": "user",
                "message": {"role": "user", "content": [
                    {"type": "text", "text": "[Request interrupted by user]"},
                ]},
                "parent_tool_use_id": null,
                "session_id": self.session_id,
                "uuid": Self::uuid(),
            }));
        }
        out.push(self.result(finished));
        out
    }

    /// The `result` message of a turn.
    pub fn result(&self, finished: &TurnFinished) -> Value {
        let subtype = match finished.status {
            TurnStatus::Completed => "success",
            TurnStatus::MaxTurns => "error_max_turns",
            TurnStatus::BudgetExceeded => "error_max_budget_usd",
            _ => "error_during_execution",
        };
        let is_error = finished.status != TurnStatus::Completed;
        let error = finished.error.as_ref().map(|error| error.message.clone());
        let usage = &finished.usage;
        let mut result = json!({
            "type": "result",
            "subtype": subtype,
            "is_error": is_error,
            "duration_ms": finished.duration_ms,
            "duration_api_ms": finished.duration_ms,
            "num_turns": finished.num_model_calls,
            "result": finished.result.clone().or_else(|| error.clone()).unwrap_or_default(),
            "stop_reason": if is_error { Value::Null } else { json!("end_turn") },
            "session_id": self.session_id,
            "total_cost_usd": self.total_cost_usd,
            "usage": wire::usage(usage),
            "modelUsage": {
                self.model.clone(): {
                    "inputTokens": usage.input_tokens,
                    "outputTokens": usage.output_tokens,
                    "cacheReadInputTokens": usage.cache_read_tokens,
                    "cacheCreationInputTokens": usage.cache_write_tokens,
                    "costUSD": finished.cost_usd,
                },
            },
            "permission_denials": self.denials,
            "terminal_reason": finished.status.as_str(),
            "uuid": Self::uuid(),
        });
        if let Some(error) = error {
            result["errors"] = json!([error]);
        }
        result
    }
}

fn message_id() -> String {
    format!("msg_agentd_{}", uuid::Uuid::now_v7().simple())
}
