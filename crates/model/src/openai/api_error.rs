//! OpenAI-style error bodies (`{"error":{"message","type","code"}}`), from an
//! HTTP error response or an error chunk mid-stream, → [`ModelError`].

use std::time::Duration;

use serde_json::Value;

use crate::ModelError;
use crate::retry::{ErrorHint, error_for_status, fallback_message, looks_like_context_overflow};

fn hint(error: &Value, message: &str) -> ErrorHint {
    let code = error["code"].as_str().unwrap_or_default();
    let kind = error["type"].as_str().unwrap_or_default();
    if code == "context_length_exceeded" || looks_like_context_overflow(message) {
        ErrorHint::ContextOverflow
    } else if code == "insufficient_quota" || kind == "insufficient_quota" {
        ErrorHint::QuotaExhausted
    } else {
        ErrorHint::None
    }
}

/// The `error` object's message; some servers send `error` as a plain string.
fn message(error: &Value) -> Option<String> {
    error["message"]
        .as_str()
        .or(error.as_str())
        .map(str::to_string)
}

/// An HTTP error response.
pub(crate) fn from_response(status: u16, retry_after: Option<Duration>, body: &str) -> ModelError {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let error = &parsed["error"];
    let message = message(error).unwrap_or_else(|| fallback_message(status, body));
    error_for_status(status, message.clone(), hint(error, &message), retry_after)
}

/// An error chunk in a stream that had started with 200 (OpenRouter, vLLM).
pub(crate) fn from_stream_error(chunk: &Value) -> ModelError {
    let error = &chunk["error"];
    let message = message(error).unwrap_or_else(|| error.to_string());
    // OpenRouter puts an HTTP status in `code`; otherwise assume a server fault.
    let status = error["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c))
        .unwrap_or(500);
    error_for_status(status, message.clone(), hint(error, &message), None)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn body(message: &str, kind: &str, code: Value) -> String {
        json!({"error": {"message": message, "type": kind, "code": code}}).to_string()
    }

    #[test]
    fn http_errors_by_status_and_code() {
        let err = from_response(
            401,
            None,
            &body(
                "Incorrect API key",
                "invalid_request_error",
                json!("invalid_api_key"),
            ),
        );
        assert!(
            matches!(err, ModelError::Auth { status: 401, ref message } if message == "Incorrect API key")
        );
        let err = from_response(
            400,
            None,
            &body(
                "too long",
                "invalid_request_error",
                json!("context_length_exceeded"),
            ),
        );
        assert!(matches!(err, ModelError::ContextOverflow { .. }));
        let err = from_response(
            400,
            None,
            &body(
                "This model's maximum context length is 4096 tokens",
                "BadRequestError",
                Value::Null,
            ),
        );
        assert!(matches!(err, ModelError::ContextOverflow { .. }));
        let after = Some(Duration::from_secs(1));
        let err = from_response(
            429,
            after,
            &body(
                "Rate limit reached",
                "requests",
                json!("rate_limit_exceeded"),
            ),
        );
        assert!(matches!(err, ModelError::RateLimited { .. }));
        assert_eq!(err.retry_after(), after);
        let err = from_response(
            429,
            None,
            &body(
                "You exceeded your current quota",
                "insufficient_quota",
                json!("insufficient_quota"),
            ),
        );
        assert!(!err.is_retryable());
        let err = from_response(500, None, &body("oops", "server_error", Value::Null));
        assert!(matches!(err, ModelError::Server { status: 500, .. }));
        let err = from_response(404, None, "{\"error\": \"model 'x' not found\"}");
        assert!(
            matches!(err, ModelError::BadRequest { status: 404, ref message } if message == "model 'x' not found")
        );
    }

    #[test]
    fn stream_errors() {
        let err =
            from_stream_error(&json!({"error": {"message": "upstream overloaded", "code": 529}}));
        assert!(matches!(err, ModelError::Overloaded { .. }));
        let err = from_stream_error(&json!({"error": {"message": "boom", "code": "internal"}}));
        assert!(matches!(err, ModelError::Server { status: 500, .. }));
    }
}
