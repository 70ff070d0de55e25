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
    NoTurnRunning,
    AlreadyAnswered,
    NotWaiting,
}

impl Conflict {
    pub const ALL: [Conflict; 4] = [
        Conflict::TurnRunning,
        Conflict::NoTurnRunning,
        Conflict::AlreadyAnswered,
        Conflict::NotWaiting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Conflict::TurnRunning => "turn_running",
            Conflict::NoTurnRunning => "no_turn_running",
            Conflict::AlreadyAnswered => "already_answered",
            Conflict::NotWaiting => "not_waiting",
        }
    }
}

/// One error code of the API, as docs/api.md's error table lists it.
#[derive(Debug, Clone, Copy)]
pub struct ErrorCode {
    pub code: &'static str,
    pub status: StatusCode,
    pub meaning: &'static str,
}

const fn code(code: &'static str, status: StatusCode, meaning: &'static str) -> ErrorCode {
    ErrorCode {
        code,
        status,
        meaning,
    }
}

impl ApiError {
    /// Every code the API answers with. A new variant (or [`Conflict`]) goes
    /// here too: the tests check both ways and that docs/api.md's table is
    /// rendered from this list (`AGENTD_UPDATE_DOCS=1` rewrites it).
    pub const CODES: &[ErrorCode] = &[
        code(
            "invalid_request",
            StatusCode::BAD_REQUEST,
            "Malformed JSON, a wrong type, a missing or unknown field (named in the message), \
             a value out of range, a bad path or query parameter, a bad `Last-Event-ID`.",
        ),
        code(
            "unauthorized",
            StatusCode::UNAUTHORIZED,
            "No valid credentials; the same answer whatever was wrong, with `WWW-Authenticate: Bearer`.",
        ),
        code(
            "forbidden",
            StatusCode::FORBIDDEN,
            "A path outside the session's workspace.",
        ),
        code(
            "bad_origin",
            StatusCode::FORBIDDEN,
            "A browser write (or sign-in) without this server's own `Origin`; see Web UI and sign-in.",
        ),
        code(
            "not_granted",
            StatusCode::FORBIDDEN,
            "A profile or model the caller may not choose (admin-only, outside `[access]`, or a grant taken back).",
        ),
        code(
            "admin_only",
            StatusCode::FORBIDDEN,
            "An admin route (`/v1/admin/*`) asked by a user who is not an admin.",
        ),
        code(
            "quota_exceeded",
            StatusCode::FORBIDDEN,
            "Spend per day or month, stored sessions or workspace bytes at the caller's quota (named in the message).",
        ),
        code(
            "bad_host",
            StatusCode::MISDIRECTED_REQUEST,
            "With `auth = \"none\"`: a `Host` that is not a loopback address, `localhost` or in `[server] allowed_hosts`.",
        ),
        code(
            "not_found",
            StatusCode::NOT_FOUND,
            "No such session of yours (someone else's looks the same), request, checkpoint, message or file.",
        ),
        code("route_not_found", StatusCode::NOT_FOUND, "No such route."),
        code(
            "method_not_allowed",
            StatusCode::METHOD_NOT_ALLOWED,
            "The route does not take this method (`Allow` lists those it takes).",
        ),
        code(
            "turn_running",
            StatusCode::CONFLICT,
            "A turn is running or queued in the session: send with `queue: true`, or interrupt first.",
        ),
        code(
            "no_turn_running",
            StatusCode::CONFLICT,
            "Interrupt with no turn running.",
        ),
        code(
            "already_answered",
            StatusCode::CONFLICT,
            "The permission request or question was answered before.",
        ),
        code(
            "not_waiting",
            StatusCode::CONFLICT,
            "No turn waits for this request any more.",
        ),
        code(
            "too_large",
            StatusCode::PAYLOAD_TOO_LARGE,
            "A request body over 1 MiB, or a file over 10 MiB from `files/content`.",
        ),
        code(
            "unsupported_media_type",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "A body without `Content-Type: application/json`.",
        ),
        code(
            "rate_limited",
            StatusCode::TOO_MANY_REQUESTS,
            "Turns at once (`max_running_turns`) or per hour (`turns_per_hour`) at the caller's limit; `Retry-After` says when to try again.",
        ),
        code(
            "too_many_streams",
            StatusCode::TOO_MANY_REQUESTS,
            "The caller has `[server] max_streams_per_user` event streams open; `Retry-After: 5`.",
        ),
        code(
            "internal",
            StatusCode::INTERNAL_SERVER_ERROR,
            "A bug or a broken installation; details only in the server's log.",
        ),
        code(
            "shutting_down",
            StatusCode::SERVICE_UNAVAILABLE,
            "The server is stopping and starts no more turns.",
        ),
        code(
            "store_unavailable",
            StatusCode::SERVICE_UNAVAILABLE,
            "The database is down or failing: try again shortly; details only in the server's log.",
        ),
    ];

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Forbidden(_)
            | ApiError::BadOrigin
            | ApiError::NotGranted(_)
            | ApiError::AdminOnly
            | ApiError::QuotaExceeded(_) => StatusCode::FORBIDDEN,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::BadHost => StatusCode::MISDIRECTED_REQUEST,
            ApiError::NotFound(_) | ApiError::RouteNotFound => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::TooManyStreams(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::ShuttingDown | ApiError::StoreUnavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
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
        let axum::Json(value) = axum::Json::<serde_json::Value>::from_request(req, state).await?;
        // serde would take a struct's fields from an array too.
        if !value.is_object() {
            return Err(ApiError::BadRequest(
                "the body must be a JSON object".into(),
            ));
        }
        // The error names the field (`content: invalid type …`).
        serde_path_to_error::deserialize(value)
            .map(ApiJson)
            .map_err(|err| {
                ApiError::BadRequest(format!(
                    "Failed to deserialize the JSON body into the target type: {err}"
                ))
            })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One error of each kind. The matches have no wildcard: a new variant
    /// or conflict code does not compile until it is listed here.
    fn one_of_each() -> Vec<ApiError> {
        let mut all = vec![
            ApiError::Unauthorized,
            ApiError::BadRequest(String::new()),
            ApiError::Forbidden(String::new()),
            ApiError::BadOrigin,
            ApiError::NotGranted(String::new()),
            ApiError::AdminOnly,
            ApiError::QuotaExceeded(String::new()),
            ApiError::RateLimited {
                message: String::new(),
                retry_after_s: 1,
            },
            ApiError::BadHost,
            ApiError::TooManyStreams(1),
            ApiError::NotFound(String::new()),
            ApiError::RouteNotFound,
            ApiError::MethodNotAllowed,
            ApiError::TooLarge(String::new()),
            ApiError::UnsupportedMediaType(String::new()),
            ApiError::ShuttingDown,
            ApiError::StoreUnavailable(String::new()),
            ApiError::Internal(String::new()),
        ];
        for conflict in Conflict::ALL {
            match conflict {
                Conflict::TurnRunning
                | Conflict::NoTurnRunning
                | Conflict::AlreadyAnswered
                | Conflict::NotWaiting => {}
            }
            all.push(ApiError::Conflict {
                code: conflict,
                message: String::new(),
            });
        }
        for error in &all {
            match error {
                ApiError::Unauthorized
                | ApiError::BadRequest(_)
                | ApiError::Forbidden(_)
                | ApiError::BadOrigin
                | ApiError::NotGranted(_)
                | ApiError::AdminOnly
                | ApiError::QuotaExceeded(_)
                | ApiError::RateLimited { .. }
                | ApiError::BadHost
                | ApiError::TooManyStreams(_)
                | ApiError::NotFound(_)
                | ApiError::RouteNotFound
                | ApiError::MethodNotAllowed
                | ApiError::Conflict { .. }
                | ApiError::TooLarge(_)
                | ApiError::UnsupportedMediaType(_)
                | ApiError::ShuttingDown
                | ApiError::StoreUnavailable(_)
                | ApiError::Internal(_) => {}
            }
        }
        all
    }

    #[test]
    fn every_error_the_api_answers_with_is_in_the_code_list_and_nothing_else_is() {
        let errors = one_of_each();
        for error in &errors {
            let listed = ApiError::CODES.iter().find(|c| c.code == error.code());
            let listed =
                listed.unwrap_or_else(|| panic!("{} is not in ApiError::CODES", error.code()));
            assert_eq!(listed.status, error.status(), "{}", error.code());
        }
        for listed in ApiError::CODES {
            assert!(
                errors.iter().any(|e| e.code() == listed.code),
                "ApiError::CODES lists {}, which no error has",
                listed.code
            );
        }
        let mut codes: Vec<_> = ApiError::CODES.iter().map(|c| c.code).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), ApiError::CODES.len(), "a code is listed twice");
    }
}
