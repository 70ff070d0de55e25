//! Errors in Anthropic's shape, `{"type":"error","error":{"type","message"}}`,
//! so Anthropic clients (the SDKs, the `claude` CLI) read and retry them as
//! they would the real API's.

use std::time::Duration;

use agentd_model::ModelError;
use agentd_model::anthropic::wire;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use utoipa::ToSchema;

use crate::http::error::ApiError;

#[derive(Debug)]
pub struct AnthropicError {
    pub status: StatusCode,
    pub message: String,
    pub retry_after: Option<Duration>,
}

impl AnthropicError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
}

/// An error body, for the OpenAPI document.
#[derive(Serialize, ToSchema)]
pub struct AnthropicErrorBody {
    /// Always `error`.
    pub r#type: String,
    pub error: AnthropicErrorDetail,
}

#[derive(Serialize, ToSchema)]
pub struct AnthropicErrorDetail {
    /// `invalid_request_error` (400, 415), `authentication_error` (401),
    /// `permission_error` (403), `not_found_error` (404), `request_too_large`
    /// (413), `rate_limit_error` (429), `api_error` (500, 502),
    /// `overloaded_error` (503, 529).
    pub r#type: String,
    pub message: String,
}

impl IntoResponse for AnthropicError {
    fn into_response(self) -> Response {
        let body = wire::error_body(self.status.as_u16(), &self.message);
        let mut response = (self.status, axum::Json(body)).into_response();
        let headers = response.headers_mut();
        if let Some(wait) = self.retry_after {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(wait.as_secs().max(1)),
            );
        }
        if self.status == StatusCode::PAYLOAD_TOO_LARGE {
            // The rest of the body is never read: the connection cannot be reused.
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

/// agentd's own refusals (authentication, grants, quotas, the store) with
/// their status and message, in Anthropic's shape.
impl From<ApiError> for AnthropicError {
    fn from(err: ApiError) -> Self {
        let retry_after = match &err {
            ApiError::RateLimited { retry_after_s, .. } => {
                Some(Duration::from_secs(*retry_after_s))
            }
            _ => None,
        };
        if let ApiError::Internal(detail) | ApiError::StoreUnavailable(detail) = &err {
            tracing::warn!(%detail, "anthropic endpoint: request failed");
        }
        Self {
            status: err.status(),
            message: err.to_string(),
            retry_after,
        }
    }
}

/// A failed model call. The provider's refusal of agentd's own credentials
/// is agentd's problem, not the client's: 502, so that a client does not
/// take it for its own key being wrong.
impl From<ModelError> for AnthropicError {
    fn from(err: ModelError) -> Self {
        let retry_after = err.retry_after();
        let status = match &err {
            ModelError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ModelError::ContextOverflow { .. } => StatusCode::BAD_REQUEST,
            ModelError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ModelError::Overloaded { .. } => {
                StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
            }
            ModelError::Server { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            ModelError::Auth { .. }
            | ModelError::Transport(_)
            | ModelError::Stream(_)
            | ModelError::Protocol(_) => StatusCode::BAD_GATEWAY,
            ModelError::Cancelled => StatusCode::SERVICE_UNAVAILABLE,
        };
        let message = match &err {
            // Anthropic's wording, which clients (the `claude` CLI) look for
            // to compact the conversation.
            ModelError::ContextOverflow { message } => format!("prompt is too long: {message}"),
            ModelError::BadRequest { .. }
            | ModelError::RateLimited { .. }
            | ModelError::Overloaded { .. }
            | ModelError::Cancelled => err.to_string(),
            // The rest may name the provider's address, its view of
            // agentd's key, or agentd's internals: the operator's log has it.
            other => {
                tracing::warn!(err = %other, "anthropic endpoint: the model call failed");
                match other {
                    ModelError::Auth { .. } => {
                        "the model provider refused this server's credentials"
                    }
                    ModelError::Server { .. } => "the model provider failed",
                    ModelError::Transport(_) => "the model provider could not be reached",
                    _ => "the model provider's answer broke off or could not be read",
                }
                .to_string()
            }
        };
        Self {
            status,
            message,
            retry_after,
        }
    }
}

/// A JSON body whose rejections (not JSON, too large, a field of the wrong
/// type) are [`AnthropicError`]s naming the field.
pub struct AnthropicJson<T>(pub T);

impl<T, S> FromRequest<S> for AnthropicJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = AnthropicError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        crate::http::error::json_object(req, state)
            .await
            .map(AnthropicJson)
            .map_err(AnthropicError::from)
    }
}
