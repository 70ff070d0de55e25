//! agentd's wire vocabulary: conversation [`Message`]s and their [`ContentBlock`]s,
//! token [`Usage`], and the session [`Event`]s of docs/api.md with their stored and
//! streamed form, [`EventEnvelope`]. Serde types only: no I/O, no runtime.

mod event;
mod message;

pub use event::{
    AgentStatus, CompactionTrigger, DeltaKind, ErrorInfo, Event, EventEnvelope, OutputLimit,
    OutputStream, Todo, TodoStatus, TurnFinished, TurnStatus,
};
pub use message::{ContentBlock, Message, Role, ToolUse, Usage};

#[cfg(test)]
mod tests;
