//! Anthropic error bodies (`{"type":"error","error":{"type","message"}}`), from
//! an HTTP error response or an `error` event mid-stream, → [`ModelError`].

use std::time::Duration;

use serde_json::Value;

use crate::ModelError;
use crate::retry::{ErrorHint, error_for_status, fallback_message, looks_like_context_overflow};

/// `(type, message)` of an error body, if it has that shape.
fn parts(body: &Value) -> (Option<&str>, Option<&str>) {
    let error = &body["error"];
    (error["type"].as_str(), error["message"].as_str())
}

fn hint(message: &str) -> ErrorHint {
    if looks_like_context_overflow(message) {
        ErrorHint::ContextOverflow
    } else {
        ErrorHint::None
    }
}

/// An HTTP error response.
pub(crate) fn from_response(status: u16, retry_after: Option<Duration>, body: &str) -> ModelError {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let (_, message) = parts(&parsed);
    let message = match message {
        Some(message) => message.to_string(),
        None => fallback_message(status, body),
    };
    error_for_status(status, message.clone(), hint(&message), retry_after)
}

/// An `error` event in a stream that had started with 200.
pub(crate) fn from_stream_error(data: &Value) -> ModelError {
    let (kind, message) = parts(data);
    let message = message.unwrap_or("(no message)").to_string();
    let status = match kind.unwrap_or_default() {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "overloaded_error" => 529,
        "timeout_error" => 504,
        _ => 500,
    };
    error_for_status(status, message.clone(), hint(&message), None)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn http_errors_by_status_and_body() {
        let body = |kind: &str, message: &str| {
            json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
        };
        let err = from_response(
            401,
            None,
            &body("authentication_error", "invalid x-api-key"),
        );
        assert!(matches!(err, ModelError::Auth { status: 401, ref message }
            if message == "invalid x-api-key"));
        let err = from_response(
            400,
            None,
            &body(
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum",
            ),
        );
        assert!(matches!(err, ModelError::ContextOverflow { .. }));
        let err = from_response(400, None, &body("invalid_request_error", "max_tokens: bad"));
        assert!(matches!(err, ModelError::BadRequest { status: 400, .. }));
        let after = Some(Duration::from_secs(2));
        let err = from_response(429, after, &body("rate_limit_error", "slow down"));
        assert_eq!(err.retry_after(), after);
        assert!(matches!(err, ModelError::RateLimited { .. }));
        let err = from_response(529, None, &body("overloaded_error", "Overloaded"));
        assert!(matches!(err, ModelError::Overloaded { .. }));
        let err = from_response(502, None, "<html>Bad Gateway</html>");
        assert!(
            matches!(err, ModelError::Server { status: 502, ref message, .. }
            if message == "<html>Bad Gateway</html>")
        );
        let err = from_response(503, None, "");
        assert!(matches!(err, ModelError::Server { ref message, .. }
            if message == "HTTP 503 Service Unavailable"));
    }

    #[test]
    fn stream_errors_by_type() {
        let event = |kind: &str| json!({"type": "error", "error": {"type": kind, "message": "m"}});
        assert!(matches!(
            from_stream_error(&event("overloaded_error")),
            ModelError::Overloaded { .. }
        ));
        assert!(matches!(
            from_stream_error(&event("api_error")),
            ModelError::Server { status: 500, .. }
        ));
        assert!(matches!(
            from_stream_error(&event("rate_limit_error")),
            ModelError::RateLimited { .. }
        ));
        assert!(matches!(
            from_stream_error(&event("invalid_request_error")),
            ModelError::BadRequest { status: 400, .. }
        ));
        assert!(matches!(
            from_stream_error(&json!({"type": "error"})),
            ModelError::Server { .. }
        ));
    }
}
