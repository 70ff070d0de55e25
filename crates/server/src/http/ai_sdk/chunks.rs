//! agentd's events of one turn as the AI SDK's UI message chunks: the turn
//! is one assistant `UIMessage` (its id the turn's), each model call a step
//! (`start-step` … `finish-step`), text and thinking streamed as they come,
//! each tool call an input, an optional approval, and an output.
//!
//! Model calls are not announced: a call begins with its first delta,
//! `usage` or `message.completed`, and a step ends when the next call
//! begins or the turn ends. Subagents' events (`parent_call_id`) stay out:
//! the message is the top-level agent's, as agentd's transcript is.

use std::collections::{BTreeMap, HashMap, HashSet};

use agentd_protocol::{ContentBlock, Decision, DeltaKind, Event, Role, TurnFinished, TurnStatus};
use serde_json::{Value, json};

/// A text or reasoning part being streamed.
struct OpenBlock {
    id: String,
    kind: DeltaKind,
}

/// The chunks of one turn, from its events in order. Holds only what the
/// events already said in this stream.
pub struct Encoder {
    message_id: String,
    step: u32,
    step_open: bool,
    /// The open step's model reply is complete: what comes next is a new call.
    step_replied: bool,
    /// Parts of the current reply streamed so far, by content block index.
    streamed: BTreeMap<u32, OpenBlock>,
    /// Tool calls of the top-level agent (subagents' are not in the message).
    calls: HashSet<String>,
    /// Permission request id → its tool call.
    approvals: HashMap<String, String>,
    denied: HashSet<String>,
}

impl Encoder {
    pub fn new(turn_id: &str) -> Self {
        Self {
            message_id: turn_id.to_string(),
            step: 0,
            step_open: false,
            step_replied: false,
            streamed: BTreeMap::new(),
            calls: HashSet::new(),
            approvals: HashMap::new(),
            denied: HashSet::new(),
        }
    }

    /// The message's first chunk.
    pub fn start(&self) -> Value {
        json!({"type": "start", "messageId": self.message_id})
    }

    /// The chunks `event` makes, in order.
    pub fn event(&mut self, event: &Event) -> Vec<Value> {
        let mut out = Vec::new();
        match event {
            Event::MessageDelta {
                parent_call_id: None,
                index,
                kind,
                text,
                ..
            } => {
                self.model_call(&mut out);
                self.delta(*index, *kind, text, &mut out);
            }
            Event::Usage {
                parent_call_id: None,
                ..
            } => self.model_call(&mut out),
            Event::MessageCompleted {
                parent_call_id: None,
                message,
                ..
            } if message.role == Role::Assistant => {
                self.model_call(&mut out);
                self.reply(&message.content, &mut out);
            }
            Event::PermissionRequested {
                parent_call_id: None,
                request_id,
                call_id,
                reason,
                ..
            } if self.calls.contains(call_id) => {
                self.approvals.insert(request_id.clone(), call_id.clone());
                out.push(
                    json!({"type": "tool-approval-request", "approvalId": request_id,
                    "toolCallId": call_id, "reason": reason}),
                );
            }
            Event::PermissionResolved {
                request_id,
                decision,
                ..
            } => {
                if let Some(call_id) = self.approvals.get(request_id) {
                    let approved = !matches!(decision, Decision::Deny);
                    if !approved {
                        self.denied.insert(call_id.clone());
                    }
                    out.push(
                        json!({"type": "tool-approval-response", "approvalId": request_id,
                        "approved": approved}),
                    );
                }
            }
            Event::ToolFinished {
                call_id,
                is_error,
                output,
                ..
            } if self.calls.contains(call_id) => {
                out.push(if self.denied.contains(call_id) {
                    json!({"type": "tool-output-denied", "toolCallId": call_id})
                } else if *is_error {
                    json!({"type": "tool-output-error", "toolCallId": call_id, "errorText": output})
                } else {
                    json!({"type": "tool-output-available", "toolCallId": call_id, "output": output})
                });
            }
            Event::Error(error) => {
                out.push(json!({"type": "error", "errorText": error.message}));
            }
            Event::TurnFinished(finished) => self.finished(finished, &mut out),
            _ => {}
        }
        out
    }

    /// The chunks that end the stream while the turn waits for an approval:
    /// the reply so far is complete, as the AI SDK's own server ends a
    /// stream at a tool approval request.
    pub fn pause(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        self.end_step(&mut out);
        out.push(json!({"type": "finish", "finishReason": "tool-calls"}));
        out
    }

    /// Opens a step for a model call's event: the first of the turn, or the
    /// first after the previous call's reply.
    fn model_call(&mut self, out: &mut Vec<Value>) {
        if self.step_open && !self.step_replied {
            return;
        }
        self.end_step(out);
        self.step += 1;
        self.step_open = true;
        self.step_replied = false;
        out.push(json!({"type": "start-step"}));
    }

    fn end_step(&mut self, out: &mut Vec<Value>) {
        for (_, block) in std::mem::take(&mut self.streamed) {
            out.push(end(&block));
        }
        if self.step_open {
            out.push(json!({"type": "finish-step"}));
            self.step_open = false;
        }
    }

    fn delta(&mut self, index: u32, kind: DeltaKind, text: &str, out: &mut Vec<Value>) {
        let fresh = self
            .streamed
            .get(&index)
            .is_none_or(|open| open.kind != kind);
        if fresh {
            if let Some(other) = self.streamed.remove(&index) {
                out.push(end(&other));
            }
            let block = OpenBlock {
                id: format!("{}-{}-{index}", self.message_id, self.step),
                kind,
            };
            out.push(json!({"type": start_type(kind), "id": block.id}));
            self.streamed.insert(index, block);
        }
        if let Some(open) = self.streamed.get(&index) {
            out.push(json!({"type": delta_type(kind), "id": open.id, "delta": text}));
        }
    }

    /// The model's complete reply: streamed parts end, parts that were not
    /// streamed are sent whole, and tool calls are announced.
    fn reply(&mut self, content: &[ContentBlock], out: &mut Vec<Value>) {
        for (index, block) in content.iter().enumerate() {
            let index = index as u32;
            let (kind, text) = match block {
                ContentBlock::Text { text } => (DeltaKind::Text, text),
                ContentBlock::Thinking { thinking, .. } => (DeltaKind::Thinking, thinking),
                ContentBlock::ToolUse { id, name, input } => {
                    self.calls.insert(id.clone());
                    out.push(
                        json!({"type": "tool-input-start", "toolCallId": id, "toolName": name}),
                    );
                    out.push(json!({"type": "tool-input-available", "toolCallId": id,
                        "toolName": name, "input": input}));
                    continue;
                }
                _ => continue,
            };
            match self.streamed.remove(&index) {
                Some(open) if open.kind == kind => out.push(end(&open)),
                other => {
                    if let Some(other) = other {
                        out.push(end(&other));
                    }
                    if !text.is_empty() {
                        let open = OpenBlock {
                            id: format!("{}-{}-{index}", self.message_id, self.step),
                            kind,
                        };
                        out.push(json!({"type": start_type(kind), "id": open.id}));
                        out.push(json!({"type": delta_type(kind), "id": open.id, "delta": text}));
                        out.push(end(&open));
                    }
                }
            }
        }
        for (_, open) in std::mem::take(&mut self.streamed) {
            out.push(end(&open));
        }
        self.step_replied = true;
    }

    fn finished(&mut self, finished: &TurnFinished, out: &mut Vec<Value>) {
        self.end_step(out);
        if let Some(error) = &finished.error {
            out.push(json!({"type": "error", "errorText": error.message}));
        }
        out.push(json!({"type": "finish", "finishReason": finish_reason(finished.status)}));
    }
}

fn start_type(kind: DeltaKind) -> &'static str {
    match kind {
        DeltaKind::Text => "text-start",
        DeltaKind::Thinking => "reasoning-start",
    }
}

fn delta_type(kind: DeltaKind) -> &'static str {
    match kind {
        DeltaKind::Text => "text-delta",
        DeltaKind::Thinking => "reasoning-delta",
    }
}

fn end(block: &OpenBlock) -> Value {
    let kind = match block.kind {
        DeltaKind::Text => "text-end",
        DeltaKind::Thinking => "reasoning-end",
    };
    json!({"type": kind, "id": block.id})
}

/// The AI SDK's finish reasons: `stop`, `length`, `error`, `interrupted`, `other`.
fn finish_reason(status: TurnStatus) -> &'static str {
    match status {
        TurnStatus::Completed => "stop",
        TurnStatus::Interrupted => "interrupted",
        TurnStatus::Failed => "error",
        TurnStatus::MaxTurns | TurnStatus::BudgetExceeded | TurnStatus::Timeout => "length",
        TurnStatus::CircuitBreaker => "other",
    }
}
