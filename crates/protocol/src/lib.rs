//! agentd's wire vocabulary: conversation [`Message`]s and their [`ContentBlock`]s,
//! token [`Usage`], and the session [`Event`]s of docs/api.md with their stored and
//! streamed form, [`EventEnvelope`], with the vocabularies their fields use
//! ([`ErrorCode`], [`Decision`], [`Resolver`], [`PendingKind`]). Serde types only: no I/O, no runtime.

#[macro_use]
mod wire_enum;

mod error_code;
mod event;
mod image;
mod message;
mod vocab;

pub use error_code::ErrorCode;
pub use event::{
    AgentStatus, CompactionTrigger, DeltaKind, ErrorInfo, Event, EventEnvelope, OutputLimit,
    OutputStream, Todo, TodoStatus, TurnFinished, TurnStatus,
};
pub use image::{
    IMAGE_MEDIA_TYPES, ImageError, MAX_IMAGE_BYTES, base64_image_block, base64_image_source,
    decode_base64, image_block, sniff_image, sniffed_image_source,
};
pub use message::{ContentBlock, Message, Role, ToolUse, Usage};
pub use vocab::{Decision, PendingKind, Resolver};

#[cfg(test)]
mod tests;
