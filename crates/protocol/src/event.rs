//! The event vocabulary (DESIGN §8): what a session streams to its clients.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{Message, Usage};

/// How a turn ended. Every turn ends with exactly one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Completed,
    Interrupted,
    Failed,
    MaxTurns,
    Timeout,
    BudgetExceeded,
    CircuitBreaker,
}

impl TurnStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Completed => "completed",
            TurnStatus::Interrupted => "interrupted",
            TurnStatus::Failed => "failed",
            TurnStatus::MaxTurns => "max_turns",
            TurnStatus::Timeout => "timeout",
            TurnStatus::BudgetExceeded => "budget_exceeded",
            TurnStatus::CircuitBreaker => "circuit_breaker",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "completed" => TurnStatus::Completed,
            "interrupted" => TurnStatus::Interrupted,
            "failed" => TurnStatus::Failed,
            "max_turns" => TurnStatus::MaxTurns,
            "timeout" => TurnStatus::Timeout,
            "budget_exceeded" => TurnStatus::BudgetExceeded,
            "circuit_breaker" => TurnStatus::CircuitBreaker,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeltaKind {
    Text,
    Thinking,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputStream {
    Stdout,
    Stderr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionTrigger {
    Auto,
    Manual,
}

/// What went wrong, in a form a client can show and act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    pub code: String,
    pub message: String,
    #[serde(default)]
    pub retryable: bool,
}

/// One thing that happened in a session. Serialized with its `type` tag; the
/// stored and streamed form wraps it in an [`EventEnvelope`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    #[serde(rename = "turn.started")]
    TurnStarted { turn_id: String, message: Message },
    #[serde(rename = "message.delta")]
    MessageDelta {
        turn_id: String,
        index: u32,
        kind: DeltaKind,
        text: String,
    },
    #[serde(rename = "message.completed")]
    MessageCompleted { turn_id: String, message: Message },
    #[serde(rename = "tool.started")]
    ToolStarted {
        turn_id: String,
        call_id: String,
        name: String,
        input: Value,
    },
    #[serde(rename = "tool.output")]
    ToolOutput {
        call_id: String,
        stream: OutputStream,
        text: String,
    },
    #[serde(rename = "tool.finished")]
    ToolFinished {
        call_id: String,
        is_error: bool,
        output: String,
        duration_ms: u64,
    },
    #[serde(rename = "permission.requested")]
    PermissionRequested {
        request_id: String,
        call_id: String,
        tool: String,
        input: Value,
        reason: String,
    },
    #[serde(rename = "permission.resolved")]
    PermissionResolved {
        request_id: String,
        decision: String,
        by: String,
    },
    #[serde(rename = "question.asked")]
    QuestionAsked {
        request_id: String,
        questions: Value,
    },
    #[serde(rename = "question.answered")]
    QuestionAnswered { request_id: String, answers: Value },
    #[serde(rename = "usage")]
    Usage {
        #[serde(flatten)]
        usage: Usage,
        cost_usd: f64,
        context_tokens: u64,
    },
    #[serde(rename = "compaction")]
    Compaction {
        trigger: CompactionTrigger,
        tokens_before: u64,
        tokens_after: u64,
    },
    #[serde(rename = "checkpoint.created")]
    CheckpointCreated {
        checkpoint_id: String,
        files: Vec<String>,
    },
    #[serde(rename = "turn.finished")]
    TurnFinished(TurnFinished),
    #[serde(rename = "session.updated")]
    SessionUpdated {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        status: String,
    },
    #[serde(rename = "error")]
    Error(ErrorInfo),
}

/// The one event every turn ends with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnFinished {
    pub turn_id: String,
    pub status: TurnStatus,
    /// The final assistant text, if any.
    #[serde(default)]
    pub result: Option<String>,
    pub usage: Usage,
    pub cost_usd: f64,
    pub num_model_calls: u32,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
}

impl Event {
    /// The wire name of this event's type, as in the SSE `event:` line.
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::TurnStarted { .. } => "turn.started",
            Event::MessageDelta { .. } => "message.delta",
            Event::MessageCompleted { .. } => "message.completed",
            Event::ToolStarted { .. } => "tool.started",
            Event::ToolOutput { .. } => "tool.output",
            Event::ToolFinished { .. } => "tool.finished",
            Event::PermissionRequested { .. } => "permission.requested",
            Event::PermissionResolved { .. } => "permission.resolved",
            Event::QuestionAsked { .. } => "question.asked",
            Event::QuestionAnswered { .. } => "question.answered",
            Event::Usage { .. } => "usage",
            Event::Compaction { .. } => "compaction",
            Event::CheckpointCreated { .. } => "checkpoint.created",
            Event::TurnFinished(_) => "turn.finished",
            Event::SessionUpdated { .. } => "session.updated",
            Event::Error(_) => "error",
        }
    }
}

/// An event as stored and streamed: `{"seq", "session_id", "type", "at", …fields}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventEnvelope {
    pub seq: u64,
    pub session_id: String,
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub event: Event,
}
