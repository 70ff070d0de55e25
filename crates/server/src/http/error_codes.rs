//! The list of every code the API answers with, its status and its meaning:
//! what docs/api.md's error table and the OpenAPI document's shared error
//! answers are rendered from (see `doc_tables` and `doc`).

use axum::http::StatusCode;

use super::error::ApiError;

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
    /// Every code the API answers with. A new variant (or
    /// [`Conflict`](super::error::Conflict)) goes
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
            "A path outside the session's workspace, or a `workspace` to create a session on that is not a directory inside one of the caller's workspace roots (or holds or lies in agentd's data dir), or a mount whose `host` is not inside one of the caller's mountable roots.",
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
            "command_running",
            StatusCode::CONFLICT,
            "A command the user started (`POST …/commands/{name}`) runs in the session: a message, another command, a rewind or a delete is refused until it ends.",
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::error::Conflict;

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
                | Conflict::CommandRunning
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
            assert!(
                listed.is_some(),
                "{} is not in ApiError::CODES",
                error.code()
            );
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
