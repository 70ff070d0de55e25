//! agentd's wire vocabulary: conversation [`Message`]s and their [`ContentBlock`]s,
//! token [`Usage`], and the session [`Event`]s of docs/api.md with their stored and
//! streamed form, [`EventEnvelope`], with the vocabularies their fields use
//! ([`ErrorCode`], [`Decision`], [`Resolver`], [`PendingKind`]). Serde types only: no I/O, no runtime.

#[macro_use]
mod wire_enum;

mod error_code;
mod event;
mod message;
mod vocab;

pub use error_code::ErrorCode;
pub use event::{
    AgentStatus, CompactionTrigger, DeltaKind, ErrorInfo, Event, EventEnvelope, OutputLimit,
    OutputStream, Todo, TodoStatus, TurnFinished, TurnStatus,
};
pub use message::{
    ContentBlock, IMAGE_MEDIA_TYPES, MAX_IMAGE_BYTES, Message, Role, ToolUse, Usage,
    base64_image_source, sniff_image,
};
pub use vocab::{Decision, PendingKind, Resolver};

#[cfg(test)]
mod tests;
