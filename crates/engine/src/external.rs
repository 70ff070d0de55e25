//! Tool calls made by another agent loop (the `claude-code` engine's CLI):
//! the same checks, permission flow, checkpoint, hooks and caps as the native
//! loop's own calls, without a model call around them.

use std::sync::Arc;

use agentd_model::ToolSpec;
use agentd_protocol::{ContentBlock, Event};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::context::{TurnContext, TurnShared, truncated};
use crate::live_budget::LiveStream;
use crate::sink::{SinkError, TurnSink};

/// The per-turn state external calls share (the turn's checkpoint is taken once).
#[derive(Clone, Default)]
pub struct ExternalTurn {
    shared: Arc<TurnShared>,
}

impl ExternalTurn {
    /// The other loop's live model text against the turn's stream limit,
    /// which its tool calls' output shares: the part to stream, and the
    /// turn's one `output.truncated` when this text reached the limit.
    pub fn admit_text<'t>(
        &self,
        agent: &Agent,
        turn_id: &str,
        text: &'t str,
    ) -> (&'t str, Option<Event>) {
        let limit = agent.config.limits.max_turn_stream_bytes;
        let admitted = LiveStream::new(&self.shared.streamed, limit, None).admit(text);
        let notice = admitted
            .notice
            .map(|notice| truncated(turn_id, None, notice));
        (admitted.text, notice)
    }
}

/// What an external call answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalResult {
    pub content: String,
    pub is_error: bool,
    /// Images the tool gave back after its text (say, `Read` of a PNG),
    /// each an Anthropic base64 image `source`.
    pub images: Vec<Value>,
}

impl Agent {
    /// The tools this agent offers (built-ins, skills, MCP, and the engine's
    /// own `TodoWrite`/`AskUserQuestion`/`Task` when offered).
    pub fn offered_tools(&self) -> Vec<ToolSpec> {
        self.tool_specs().to_vec()
    }

    /// Run one tool call asked for elsewhere: precheck, `PreToolUse` hooks,
    /// permission rules and the approver (`permission.requested`/`resolved`
    /// with `call_id`), the turn's checkpoint, the tool (live `tool.output`),
    /// `PostToolUse` hooks and the result cap. `tool.started`/`tool.finished`
    /// are the caller's: it knows when the other loop started and ended the call.
    pub async fn run_external_call(
        &self,
        turn: &ExternalTurn,
        sink: &dyn TurnSink,
        turn_id: &str,
        call: (&str, &str, Value),
        cancel: CancellationToken,
    ) -> Result<ExternalResult, SinkError> {
        let (call_id, name, input) = call;
        let context = TurnContext {
            agent: self,
            sink,
            turn_id,
            cancel: &cancel,
            shared: &turn.shared,
        };
        let block = ContentBlock::ToolUse {
            id: call_id.to_string(),
            name: name.to_string(),
            input,
        };
        let result = context.run_one_call(block).await?;
        Ok(match result {
            ContentBlock::ToolResult {
                content,
                is_error,
                images,
                ..
            } => ExternalResult {
                content,
                is_error,
                images,
            },
            _ => ExternalResult {
                content: "the tool gave no result".into(),
                is_error: true,
                images: Vec::new(),
            },
        })
    }
}
