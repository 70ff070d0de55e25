//! The native agent loop.
//!
//! [`Agent::run_turn`] takes a session's history and a user message, calls the
//! model, runs the tools it asks for, and loops until the model stops asking or a
//! limit ends the turn. Everything that happens goes out through a [`TurnSink`] as
//! `protocol::Event`s and transcript messages; every exit path ends with exactly
//! one `turn.finished`. The engine knows no HTTP and no SQL: the sink decides
//! where events and messages go.
//!
//! Every engine (this loop, its compaction, the `claude-code` engine) is a
//! [`TurnEngine`] run inside the one frame of [`run_framed`].

mod agent;
mod agent_tools;
pub mod approval;
mod coalesce;
mod compact;
mod context;
mod external;
mod frame;
mod gate;
mod guardrails;
mod history;
mod live_budget;
mod offered;
pub mod prompt;
mod secret_mask;
mod sink;
mod tool_exec;
mod turn;

pub use agent::{Agent, AgentConfig, SpendCap, TurnLimits};
pub use agent_tools::{AgentToolSet, SubagentDef, SubagentModel, Subagents, validate_answers};
pub use approval::{
    Answer, ApprovalRequest, Approver, Decision, FixedApprover, QuestionAnswer, QuestionRequest,
};
pub use external::{ExternalResult, ExternalTurn};
pub use frame::{TurnBody, TurnEngine, TurnOutcome, run_framed};
pub use guardrails::budget_reached;
pub use live_budget::{DEFAULT_TOOL_OUTPUT_STREAM_BYTES, DEFAULT_TURN_STREAM_BYTES};
pub use prompt::{PromptContext, PromptError, default_system_prompt};
pub use sink::{Checkpointer, Compaction, SinkError, TurnSink};
pub use turn::TurnInput;
