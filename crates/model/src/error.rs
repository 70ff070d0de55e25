use std::time::Duration;

use agentd_protocol::ErrorCode;

/// Why a model call failed, typed so callers can tell the user what to do.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelError {
    #[error("authentication failed ({status}): {message}")]
    Auth { status: u16, message: String },
    #[error("bad request ({status}): {message}")]
    BadRequest { status: u16, message: String },
    #[error("the conversation is too long for the model's context window: {message}")]
    ContextOverflow { message: String },
    #[error("rate limited: {message}")]
    RateLimited {
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("the model is overloaded: {message}")]
    Overloaded {
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("model server error ({status}): {message}")]
    Server {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("could not reach the model: {0}")]
    Transport(String),
    #[error("the model's response stream broke: {0}")]
    Stream(String),
    #[error("the model sent something unreadable: {0}")]
    Protocol(String),
    #[error("the call was cancelled")]
    Cancelled,
}

impl ModelError {
    /// A stable machine-readable code for `error` events and API errors.
    pub fn code(&self) -> ErrorCode {
        match self {
            ModelError::Auth { .. } => ErrorCode::ModelAuth,
            ModelError::BadRequest { .. } => ErrorCode::ModelBadRequest,
            ModelError::ContextOverflow { .. } => ErrorCode::ContextOverflow,
            ModelError::RateLimited { .. } => ErrorCode::ModelRateLimited,
            ModelError::Overloaded { .. } => ErrorCode::ModelOverloaded,
            ModelError::Server { .. } => ErrorCode::ModelServerError,
            ModelError::Transport(_) => ErrorCode::ModelUnreachable,
            ModelError::Stream(_) => ErrorCode::ModelStreamBroken,
            ModelError::Protocol(_) => ErrorCode::ModelProtocolError,
            ModelError::Cancelled => ErrorCode::Cancelled,
        }
    }

    /// Whether the same request may succeed if sent again.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ModelError::RateLimited { .. }
                | ModelError::Overloaded { .. }
                | ModelError::Server { .. }
                | ModelError::Transport(_)
        )
    }

    /// The server's `retry-after`, when it gave one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::RateLimited { retry_after, .. }
            | ModelError::Overloaded { retry_after, .. }
            | ModelError::Server { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}
