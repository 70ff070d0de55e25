//! How the session service's errors answer over HTTP.

use super::error::{ApiError, Conflict};
use crate::session::SessionError;

impl From<SessionError> for ApiError {
    fn from(err: SessionError) -> Self {
        match err {
            SessionError::NotFound => ApiError::session_not_found(),
            SessionError::Missing(message) => ApiError::NotFound(message),
            SessionError::Invalid(message) => ApiError::BadRequest(message),
            SessionError::Forbidden(message) => ApiError::Forbidden(message),
            SessionError::TurnRunning(message) => ApiError::Conflict {
                code: Conflict::TurnRunning,
                message,
            },
            SessionError::CommandRunning(message) => ApiError::Conflict {
                code: Conflict::CommandRunning,
                message,
            },
            SessionError::NoTurnRunning => ApiError::Conflict {
                code: Conflict::NoTurnRunning,
                message: err.to_string(),
            },
            SessionError::AlreadyAnswered(message) => ApiError::Conflict {
                code: Conflict::AlreadyAnswered,
                message,
            },
            SessionError::NotWaiting(message) => ApiError::Conflict {
                code: Conflict::NotWaiting,
                message,
            },
            SessionError::Stopping => ApiError::ShuttingDown,
            SessionError::Store(err) => err.into(),
            SessionError::Internal(detail) => ApiError::Internal(detail),
        }
    }
}
