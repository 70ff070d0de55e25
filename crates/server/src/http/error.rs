//! The API's one error type and its JSON form `{"error":{"code","message"}}`,
//! and extractors whose rejections use it (axum's own answer in plain text).

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use utoipa::ToSchema;

pub use super::error_codes::ErrorCode;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Every authentication failure looks the same: no hint what was wrong.
    #[error("authentication required")]
    Unauthorized,
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Forbidden(String),
    /// A browser write signed in by the session cookie without this
    /// server's own `Origin`: possibly forged by another site.
    #[error("this request must come from the web UI's own origin")]
    BadOrigin,
    /// Also for other users' sessions, which must look like missing ones.
    #[error("{0}")]
    NotFound(String),
    #[error("no such route")]
    RouteNotFound,
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("{message}")]
    Conflict { code: Conflict, message: String },
    /// A profile or model the caller has no grant for.
    #[error("{0}")]
    NotGranted(String),
    /// An admin-only route.
    #[error("this needs an admin; ask one to run it or to make you one")]
    AdminOnly,
    /// Spend, stored sessions or workspace bytes at the caller's quota.
    #[error("{0}")]
    QuotaExceeded(String),
    /// Too many turns at once or in the hour: try again after `retry_after_s`.
    #[error("{message}")]
    RateLimited { message: String, retry_after_s: u64 },
    /// `auth = "none"` and a `Host` that is not this machine's: possibly a
    /// page elsewhere that rebound its name to us.
    #[error(
        "this server answers only to localhost and loopback addresses (and [server] allowed_hosts)"
    )]
    BadHost,
    #[error("{0}")]
    TooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("the server is shutting down")]
    ShuttingDown,
    /// The user has `max_streams_per_user` event streams open here.
    #[error("too many open event streams ({0} per user); close one or retry later")]
    TooManyStreams(usize),
    /// The store failed (database down, disk full): worth retrying later.
    /// The detail is logged, not sent.
    #[error("the database is unavailable; try again shortly")]
    StoreUnavailable(String),
    /// The detail is logged, not sent.
    #[error("internal error")]
    Internal(String),
}

/// The codes of `409 Conflict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    TurnRunning,
    CommandRunning,
    NoTurnRunning,
    AlreadyAnswered,
    NotWaiting,
}

impl Conflict {
    pub const ALL: [Conflict; 5] = [
        Conflict::TurnRunning,
        Conflict::CommandRunning,
        Conflict::NoTurnRunning,
        Conflict::AlreadyAnswered,
        Conflict::NotWaiting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Conflict::TurnRunning => "turn_running",
            Conflict::CommandRunning => "command_running",
            Conflict::NoTurnRunning => "no_turn_running",
            Conflict::AlreadyAnswered => "already_answered",
            Conflict::NotWaiting => "not_waiting",
        }
    }
}

impl ApiError {
    /// The status listed with its code in [`ApiError::CODES`], the one
    /// place a code's status is written.
    pub fn status(&self) -> StatusCode {
        let code = self.code();
        Self::CODES
            .iter()
            .find(|listed| listed.code == code)
            .map_or(StatusCode::INTERNAL_SERVER_ERROR, |listed| listed.status)
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Unauthorized => "unauthorized",
            ApiError::BadRequest(_) => "invalid_request",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::BadOrigin => "bad_origin",
            ApiError::NotGranted(_) => "not_granted",
            ApiError::AdminOnly => "admin_only",
            ApiError::QuotaExceeded(_) => "quota_exceeded",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::BadHost => "bad_host",
            ApiError::NotFound(_) => "not_found",
            ApiError::RouteNotFound => "route_not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::Conflict { code, .. } => code.as_str(),
            ApiError::TooLarge(_) => "too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::ShuttingDown => "shutting_down",
            ApiError::TooManyStreams(_) => "too_many_streams",
            ApiError::StoreUnavailable(_) => "store_unavailable",
            ApiError::Internal(_) => "internal",
        }
    }

    pub fn session_not_found() -> Self {
        ApiError::NotFound("no session with this id".into())
    }
}

/// `Retry-After` of a refused event stream (seconds).
const STREAMS_RETRY_AFTER_S: u64 = 5;

/// The error body, for the OpenAPI document.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: one of the codes of docs/api.md's error
    /// table (`unauthorized`, `invalid_request`, `not_found`, …).
    pub code: String,
    pub message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let retry_after = match &self {
            ApiError::RateLimited { retry_after_s, .. } => Some(*retry_after_s),
            ApiError::TooManyStreams(_) => Some(STREAMS_RETRY_AFTER_S),
            _ => None,
        };
        if let ApiError::Internal(detail) = &self {
            tracing::error!(%detail, "request failed");
        }
        if let ApiError::StoreUnavailable(detail) = &self {
            tracing::warn!(%detail, "request failed: store unavailable");
        }
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code().to_string(),
                message: self.to_string(),
            },
        };
        let mut response = (status, axum::Json(body)).into_response();
        let headers = response.headers_mut();
        if status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(seconds) = retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        }
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            // The rest of the body is never read, so the connection cannot be
            // reused: say so, or a client's next request on it fails.
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

impl From<agentd_store::StoreError> for ApiError {
    fn from(err: agentd_store::StoreError) -> Self {
        match err {
            agentd_store::StoreError::Database(detail) => ApiError::StoreUnavailable(detail),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::TooLarge("the request body is too large".into())
            }
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::UnsupportedMediaType(
                "send the body as JSON with `Content-Type: application/json`".into(),
            ),
            _ => ApiError::BadRequest(rejection.body_text()),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::BadRequest(rejection.body_text())
    }
}

/// `axum::Json` with [`ApiError`] rejections.
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        json_object(req, state).await.map(ApiJson)
    }
}

/// A JSON object body as `T`; a rejection names the field at fault.
pub(super) async fn json_object<T, S>(req: Request, state: &S) -> Result<T, ApiError>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    let axum::Json(value) = axum::Json::<serde_json::Value>::from_request(req, state).await?;
    // serde would take a struct's fields from an array too.
    if !value.is_object() {
        return Err(ApiError::BadRequest(
            "the body must be a JSON object".into(),
        ));
    }
    // The error names the field (`content: invalid type …`).
    serde_path_to_error::deserialize(value).map_err(|err| {
        ApiError::BadRequest(format!(
            "Failed to deserialize the JSON body into the target type: {err}"
        ))
    })
}

/// `axum::extract::Query` with [`ApiError`] rejections.
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Query(value) =
            axum::extract::Query::<T>::from_request_parts(parts, state).await?;
        Ok(ApiQuery(value))
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::BadRequest(rejection.body_text())
    }
}

/// `axum::extract::Path` with [`ApiError`] rejections.
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Path(value) =
            axum::extract::Path::<T>::from_request_parts(parts, state).await?;
        Ok(ApiPath(value))
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
