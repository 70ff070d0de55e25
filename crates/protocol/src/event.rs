//! The event vocabulary: what a session streams to its clients.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{Message, Usage};
use crate::{Decision, ErrorCode, Resolver};

/// How a turn ended. Every turn ends with exactly one of these.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeltaKind {
    Text,
    Thinking,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputStream {
    Stdout,
    Stderr,
}

/// Which limit stopped live output (see [`Event::OutputTruncated`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OutputLimit {
    /// The call's own limit: its later output is not streamed.
    ToolCall,
    /// The turn's limit: no more deltas or tool output for the rest of the turn.
    Turn,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionTrigger {
    Auto,
    Manual,
}

/// What went wrong, in a form a client can show and act on.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default)]
    pub retryable: bool,
}

/// One thing that happened in a session. Serialized with its `type` tag; the
/// stored and streamed form wraps it in an [`EventEnvelope`].
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
        /// Set when a subagent (`Task` call `parent_call_id`) produced it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_call_id: Option<String>,
    },
    #[serde(rename = "message.completed")]
    MessageCompleted {
        turn_id: String,
        message: Message,
        /// Set when a subagent (`Task` call `parent_call_id`) produced it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_call_id: Option<String>,
    },
    #[serde(rename = "tool.started")]
    ToolStarted {
        turn_id: String,
        call_id: String,
        name: String,
        input: Value,
        /// Set when a subagent (`Task` call `parent_call_id`) produced it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_call_id: Option<String>,
    },
    #[serde(rename = "tool.output")]
    ToolOutput {
        call_id: String,
        stream: OutputStream,
        text: String,
    },
    /// The session's network allowlist proxy refused a connection made
    /// during the call (`call_id`), e.g. by `pip install` in `Bash`.
    #[serde(rename = "network.refused")]
    NetworkRefused {
        turn_id: String,
        call_id: String,
        host: String,
        port: u16,
        reason: String,
    },
    /// Live output stops here (sent once per call, or once per turn for
    /// the turn's limit); `tool.finished` and `message.completed` still
    /// carry the (capped) results.
    #[serde(rename = "output.truncated")]
    OutputTruncated {
        turn_id: String,
        /// The call whose output was cut; absent when model text was.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        limit: OutputLimit,
        /// The limit that was reached, in bytes of event text.
        limit_bytes: u64,
        /// Set when a subagent (`Task` call `parent_call_id`) produced it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_call_id: Option<String>,
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
        /// Set when a subagent (`Task` call `parent_call_id`) produced it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_call_id: Option<String>,
    },
    #[serde(rename = "permission.resolved")]
    PermissionResolved {
        request_id: String,
        decision: Decision,
        by: Resolver,
    },
    #[serde(rename = "question.asked")]
    QuestionAsked {
        request_id: String,
        call_id: String,
        questions: Value,
        /// Set when a subagent (`Task` call `parent_call_id`) asked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_call_id: Option<String>,
    },
    /// `answers` maps each question's text to the chosen label(s) or free
    /// text; `null` when nobody answered (`by` says why: `timeout`,
    /// `interrupted`, `restart`, …).
    #[serde(rename = "question.answered")]
    QuestionAnswered {
        request_id: String,
        answers: Value,
        #[serde(default)]
        by: Resolver,
    },
    /// The agent's plan, as last written by `TodoWrite`.
    #[serde(rename = "todo.updated")]
    TodoUpdated {
        call_id: String,
        todos: Vec<Todo>,
        /// Set when a subagent (`Task` call `parent_call_id`) wrote it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_call_id: Option<String>,
    },
    #[serde(rename = "usage")]
    Usage {
        #[serde(flatten)]
        usage: Usage,
        cost_usd: f64,
        context_tokens: u64,
        /// Set when a subagent (`Task` call `parent_call_id`) made the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_call_id: Option<String>,
    },
    #[serde(rename = "compaction")]
    Compaction {
        trigger: CompactionTrigger,
        tokens_before: u64,
        tokens_after: u64,
        /// What the model wrote about the conversation it no longer sees.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    #[serde(rename = "checkpoint.created")]
    CheckpointCreated {
        checkpoint_id: String,
        files: Vec<String>,
    },
    /// A user ran one of the session's commands (`POST …/commands/{name}`),
    /// outside any turn; the model reads it in the next turn's context.
    #[serde(rename = "command.ran")]
    CommandRan {
        /// The run's id; the transcript message the model reads carries it
        /// as its `turn_id`.
        run_id: String,
        command: String,
        /// The arguments as given, checked against the command's schema.
        arguments: Value,
        /// Exactly what ran.
        argv: Vec<String>,
        /// Who ran it: `user:<name>`.
        by: String,
        /// Absent when it was killed (timeout or signal).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(default)]
        timed_out: bool,
        duration_ms: u64,
        /// Capped (the start of stdout, the end of stderr).
        stdout: String,
        stderr: String,
        #[serde(default)]
        truncated: bool,
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

/// One item of the agent's plan (Claude Code's `TodoWrite` shape).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    pub content: String,
    pub status: TodoStatus,
    /// The present-continuous form shown while it is in progress.
    #[serde(
        rename = "activeForm",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub active_form: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

/// The one event every turn ends with.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// The agent's own verdict, from a final `status: complete|partial|failed`
    /// line in its last message, when it wrote one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_status: Option<AgentStatus>,
}

impl TurnFinished {
    /// The end of a turn that never ran (or whose run was lost): no model
    /// call, no cost, and the reason in `error`.
    pub fn never_ran(turn_id: &str, status: TurnStatus, error: ErrorInfo) -> Self {
        TurnFinished {
            turn_id: turn_id.to_string(),
            status,
            result: None,
            usage: Usage::default(),
            cost_usd: 0.0,
            num_model_calls: 0,
            duration_ms: 0,
            error: Some(error),
            agent_status: None,
        }
    }
}

/// How the agent itself judged its work.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    Complete,
    Partial,
    Failed,
}

impl Event {
    /// Every event type: its wire name and what it says, for docs/api.md's
    /// event table (the server's tests check it against the schema, so a new
    /// variant must be listed here).
    pub const TYPES: &[(&str, &str)] = &[
        ("turn.started", "A turn began, with the user's message."),
        (
            "message.delta",
            "A piece of the assistant's text or thinking, as the model streams it.",
        ),
        ("message.completed", "An assistant message, whole."),
        (
            "tool.started",
            "The agent calls a tool; a `permission.requested` may come before it runs.",
        ),
        ("tool.output", "Output of a running tool, as it comes."),
        (
            "output.truncated",
            "Live output reached a limit (`tool_call` or `turn`): the rest is neither stored nor sent.",
        ),
        (
            "network.refused",
            "The profile's network allowlist refused a connection a tool call made (`host`, `port`, `reason`).",
        ),
        ("tool.finished", "A tool call ended with this result."),
        (
            "permission.requested",
            "A tool call waits for a permission: answer with `POST …/permissions/{request_id}`. \
             For an operator command `reason` ends with `; it runs: <argv>`, the whole argument \
             list (elements that are not plain words in single quotes).",
        ),
        (
            "permission.resolved",
            "A permission request was answered (`by` a user, or `timeout`, `interrupted`, `restart`, …).",
        ),
        (
            "question.asked",
            "The agent asks the user (`AskUserQuestion`): answer with `POST …/questions/{request_id}`.",
        ),
        (
            "question.answered",
            "A question was answered; `answers` is `null` when nobody did (`by` says why).",
        ),
        (
            "todo.updated",
            "The agent's plan (`TodoWrite`), the whole list each time.",
        ),
        (
            "usage",
            "Tokens and cost of one model call; `context_tokens` is the context it read.",
        ),
        (
            "compaction",
            "The context was compacted (`auto` or `manual`): tokens before and after.",
        ),
        (
            "checkpoint.created",
            "The workspace was saved before the turn's first file-changing tool call.",
        ),
        (
            "command.ran",
            "A user ran a session command (`POST …/commands/{name}`) outside any turn: its argv, exit code and capped output.",
        ),
        (
            "turn.finished",
            "The turn ended: its status, result, usage and cost; `error` when it did not complete.",
        ),
        ("session.updated", "The session's title or status changed."),
        (
            "error",
            "Something failed (`code`, `message`, `retryable`); `turn.finished` follows when it ends the turn.",
        ),
    ];

    /// Marks the event as produced inside the subagent run by `Task` call
    /// `call_id`, unless a deeper subagent already marked it.
    pub fn set_parent_call_id(&mut self, call_id: &str) {
        let slot = match self {
            Event::MessageDelta { parent_call_id, .. }
            | Event::MessageCompleted { parent_call_id, .. }
            | Event::ToolStarted { parent_call_id, .. }
            | Event::PermissionRequested { parent_call_id, .. }
            | Event::QuestionAsked { parent_call_id, .. }
            | Event::TodoUpdated { parent_call_id, .. }
            | Event::Usage { parent_call_id, .. }
            | Event::OutputTruncated { parent_call_id, .. } => parent_call_id,
            _ => return,
        };
        if slot.is_none() {
            *slot = Some(call_id.to_string());
        }
    }

    /// The wire name of this event's type, as in the SSE `event:` line.
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::TurnStarted { .. } => "turn.started",
            Event::MessageDelta { .. } => "message.delta",
            Event::MessageCompleted { .. } => "message.completed",
            Event::ToolStarted { .. } => "tool.started",
            Event::ToolOutput { .. } => "tool.output",
            Event::OutputTruncated { .. } => "output.truncated",
            Event::NetworkRefused { .. } => "network.refused",
            Event::ToolFinished { .. } => "tool.finished",
            Event::PermissionRequested { .. } => "permission.requested",
            Event::PermissionResolved { .. } => "permission.resolved",
            Event::QuestionAsked { .. } => "question.asked",
            Event::QuestionAnswered { .. } => "question.answered",
            Event::TodoUpdated { .. } => "todo.updated",
            Event::Usage { .. } => "usage",
            Event::Compaction { .. } => "compaction",
            Event::CheckpointCreated { .. } => "checkpoint.created",
            Event::CommandRan { .. } => "command.ran",
            Event::TurnFinished(_) => "turn.finished",
            Event::SessionUpdated { .. } => "session.updated",
            Event::Error(_) => "error",
        }
    }
}

/// An event as stored and streamed: `{"seq", "session_id", "type", "at", …fields}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventEnvelope {
    pub seq: u64,
    pub session_id: String,
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub event: Event,
}
