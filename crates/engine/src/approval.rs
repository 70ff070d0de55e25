//! Asking someone whether a tool call may run.
//!
//! The engine decides with rules and hooks first; only a call that still needs
//! asking reaches an [`Approver`]. The server answers from the API (waiting for a
//! person), `agentd run` from the terminal, and both fall back to the profile's
//! `on_no_answer` when nobody can or does answer.

pub use agentd_protocol::Decision;
use agentd_protocol::Resolver;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A call waiting for a decision; `request_id` is what clients answer to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    pub request_id: String,
    pub turn_id: String,
    pub call_id: String,
    pub tool: String,
    pub input: Value,
    pub reason: String,
    /// The rule "allow for this session" adds, e.g. `Bash(git status)`.
    pub session_rule: String,
}

/// A decision and who made it (`user`, `timeout`, `no_terminal`, …).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub decision: Decision,
    pub by: Resolver,
    /// An allow that runs the call with this input instead (an Agent SDK
    /// `canUseTool` callback may rewrite it). The rules judge it again: a
    /// deny rule still wins.
    pub updated_input: Option<Value>,
    /// A deny's reason, told to the model instead of the generic one.
    pub message: Option<String>,
}

impl Answer {
    pub fn new(decision: Decision, by: impl Into<Resolver>) -> Self {
        Self {
            decision,
            by: by.into(),
            updated_input: None,
            message: None,
        }
    }

    pub fn with_updated_input(mut self, input: Value) -> Self {
        self.updated_input = Some(input);
        self
    }

    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}

/// Questions the agent asks the user (`AskUserQuestion`); `request_id` is what
/// clients answer to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionRequest {
    pub request_id: String,
    pub turn_id: String,
    pub call_id: String,
    /// As the model sent them: `[{question, header, options: [{label,
    /// description}], multiSelect}]`.
    pub questions: Value,
}

/// The user's answers (question text → chosen label(s) or free text), or
/// `None` when nobody answered; `by` says who or why.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionAnswer {
    pub answers: Option<Value>,
    pub by: Resolver,
}

impl QuestionAnswer {
    pub fn unanswered(by: impl Into<Resolver>) -> Self {
        Self {
            answers: None,
            by: by.into(),
        }
    }
}

/// Whoever answers permission requests and questions for a session.
#[async_trait]
pub trait Approver: Send + Sync {
    /// Called before `permission.requested` is recorded, so that a client that
    /// reacts to the event at once finds the request ready to answer.
    async fn prepare(&self, _request: &ApprovalRequest) {}

    /// Called after `permission.requested` was recorded. Returns when someone
    /// answered, the approver gave up (its `on_no_answer` policy), or `cancel`
    /// fired — it must watch `cancel` and return promptly then (the answer is
    /// ignored and the call does not run).
    async fn decide(&self, request: &ApprovalRequest, cancel: &CancellationToken) -> Answer;

    /// Like `prepare`, for a question: called before `question.asked` is recorded.
    async fn prepare_question(&self, _request: &QuestionRequest) {}

    /// Waits for the answers to a question, like `decide`. The default answers
    /// nothing: approvers that cannot reach a person leave the agent to go on
    /// without an answer.
    async fn answer_question(
        &self,
        _request: &QuestionRequest,
        _cancel: &CancellationToken,
    ) -> QuestionAnswer {
        QuestionAnswer::unanswered(Resolver::NoApprover)
    }
}

/// Answers every request the same way, e.g. `deny` when nobody can be asked.
pub struct FixedApprover(pub Answer);

#[async_trait]
impl Approver for FixedApprover {
    async fn decide(&self, _request: &ApprovalRequest, _cancel: &CancellationToken) -> Answer {
        self.0.clone()
    }
}
