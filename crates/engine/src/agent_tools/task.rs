//! `Task`: a subagent with its own context, prompt and tool subset, run inside
//! the parent's turn. It shares the workspace, sandbox, permission rules,
//! hooks and approver; its events carry `parent_call_id`; its final text is the
//! tool result; it is capped per turn and by depth, and interrupts reach it
//! through the turn's cancellation token.

use agentd_protocol::{Event, Message, TurnStatus};
use agentd_tools::ToolResult;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::string;
use super::subagent::Subagents;
use crate::context::TurnContext;
use crate::sink::{SinkError, TurnSink};
use crate::turn::TurnRun;

pub(super) fn description(subagents: Option<&Subagents>) -> String {
    let listing = subagents.map(Subagents::listing).unwrap_or_default();
    format!(
        "Start a subagent to do a self-contained task on its own: searching a large codebase, \
         researching a question, or a multi-step change that does not need the conversation so \
         far. The subagent starts with an empty context, so the prompt must say everything it \
         needs. Several Task calls in one message run in parallel. Its final report comes back \
         as the result; the user does not see it unless you relay it.\n\nAvailable subagent \
         types:\n{listing}"
    )
}

pub(super) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "description": string("A short (3-5 word) description of the task"),
            "prompt": string("The task for the subagent to perform"),
            "subagent_type": string("The type of subagent to use for this task")
        },
        "required": ["description", "prompt", "subagent_type"],
        "additionalProperties": false
    })
}

#[derive(Deserialize)]
struct Input {
    #[allow(dead_code)] // shown to the user through tool.started
    description: String,
    prompt: String,
    subagent_type: String,
}

/// Passes a subagent's events to the turn's sink marked with the `Task`
/// call's id, and keeps its messages out of the session transcript (the
/// events hold them; the parent's context gets only the report).
struct SubagentSink<'a> {
    inner: &'a dyn TurnSink,
    parent_call_id: &'a str,
}

#[async_trait]
impl TurnSink for SubagentSink<'_> {
    async fn emit(&self, mut event: Event) -> Result<(), SinkError> {
        event.set_parent_call_id(self.parent_call_id);
        self.inner.emit(event).await
    }

    async fn flush(&self) -> Result<(), SinkError> {
        self.inner.flush().await
    }

    async fn append_message(&self, _turn_id: &str, _message: &Message) -> Result<(), SinkError> {
        Ok(())
    }
}

impl TurnContext<'_> {
    pub(crate) async fn run_task(&self, call_id: &str, input: &Value) -> ToolResult {
        let input: Input = match serde_json::from_value(input.clone()) {
            Ok(input) => input,
            Err(err) => return ToolResult::error(format!("Invalid Task input: {err}")),
        };
        let Some(subagents) = self.agent.subagents.as_deref() else {
            return ToolResult::error("This agent cannot start subagents.");
        };
        let Some(def) = subagents.get(&input.subagent_type) else {
            let known: Vec<&str> = subagents.iter().map(|d| d.name.as_str()).collect();
            return ToolResult::error(format!(
                "There is no subagent type {:?}. Available: {}.",
                input.subagent_type,
                known.join(", ")
            ));
        };
        if self.agent.depth >= subagents.max_depth {
            return ToolResult::error(format!(
                "Subagents may nest only {} level(s) deep; do this task yourself.",
                subagents.max_depth
            ));
        }
        if !self.shared.claim_subagent(subagents.max_per_turn) {
            return ToolResult::error(format!(
                "This turn already started {} subagents (max_subagents); do the rest yourself.",
                subagents.max_per_turn
            ));
        }
        let agent = self.agent.subagent(def);
        let sink = SubagentSink {
            inner: self.sink,
            parent_call_id: call_id,
        };
        let mut run = TurnRun::new(
            &agent,
            &sink,
            self.turn_id.to_string(),
            Vec::new(),
            // A transcript of its own, serialised apart from the session's.
            std::sync::Arc::default(),
            self.cancel.clone(),
            self.shared.clone(),
        );
        let looped = async {
            run.record(Message::user_text(input.prompt)).await?;
            run.run_loop().await
        };
        let (Ok(exit) | Err(exit)) = Box::pin(looped).await;
        self.shared.add_subagent_spend(&run.usage, run.cost_usd);
        let report = run.result.take();
        match (exit.status, report) {
            (TurnStatus::Completed, Some(report)) => ToolResult::ok(report),
            (TurnStatus::Completed, None) => {
                ToolResult::ok("(the subagent finished without a report)")
            }
            (TurnStatus::Interrupted, _) => ToolResult::error(crate::history::NOT_RUN),
            (status, report) => {
                let why = exit.error.map(|e| e.message).unwrap_or_default();
                let mut text = format!("The subagent stopped ({}): {why}", status.as_str());
                if let Some(report) = report {
                    text.push_str(&format!("\nIts last message: {report}"));
                }
                ToolResult::error(text)
            }
        }
    }
}
