//! Retrying transient model failures with exponential backoff and jitter,
//! honouring the server's `retry-after`; and the HTTP status → [`ModelError`]
//! mapping the providers share.

use std::future::Future;
use std::time::{Duration, SystemTime};

use rand::Rng;
use reqwest::header::{HeaderMap, RETRY_AFTER};

use crate::ModelError;

/// How often and how patiently to retry a model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt; 0 disables retrying.
    pub max_retries: u32,
    /// The first backoff; doubles with every retry.
    pub base_delay: Duration,
    /// Cap on the computed backoff.
    pub max_delay: Duration,
    /// Cap on a server-given `retry-after`, so a huge value cannot stall a turn.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// Never retry.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// The wait before retry number `retry` (0-based) after `error`: the
    /// server's `retry-after` when given (capped), else exponential backoff with
    /// "equal jitter" (half fixed, half random) so clients spread out.
    pub fn delay(&self, retry: u32, error: &ModelError) -> Duration {
        if let Some(after) = error.retry_after() {
            return after.min(self.max_retry_after);
        }
        let exp = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry.min(31)))
            .min(self.max_delay);
        let half = exp / 2;
        let jitter_ms = u64::try_from(half.as_millis()).unwrap_or(u64::MAX);
        half + Duration::from_millis(rand::rng().random_range(0..=jitter_ms))
    }
}

/// Runs `op` until it succeeds, fails with a non-retryable error, or the
/// policy's retries are used up; the last error is returned.
pub async fn with_retries<F, Fut, T>(policy: &RetryPolicy, mut op: F) -> Result<T, ModelError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ModelError>>,
{
    let mut retry = 0;
    loop {
        match op().await {
            Ok(value) => return Ok(value),
            Err(err) if err.is_retryable() && retry < policy.max_retries => {
                let delay = policy.delay(retry, &err);
                retry += 1;
                tracing::warn!(
                    retry,
                    max_retries = policy.max_retries,
                    delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    error = %err,
                    "model call failed, retrying"
                );
                tokio::time::sleep(delay).await;
            }
            Err(err) => return Err(err),
        }
    }
}

/// Sends the request `build` makes, retrying per `policy` until response
/// headers with a success status arrive. Error responses become typed errors
/// through `map_error(status, retry_after, body)`.
pub(crate) async fn send_with_retries<B, M>(
    policy: &RetryPolicy,
    build: B,
    map_error: M,
) -> Result<reqwest::Response, ModelError>
where
    B: Fn() -> reqwest::RequestBuilder,
    M: Fn(u16, Option<Duration>, &str) -> ModelError,
{
    with_retries(policy, || async {
        let response = build().send().await.map_err(|err| transport_error(&err))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = parse_retry_after(response.headers());
        let body = read_capped(response).await;
        Err(map_error(status.as_u16(), retry_after, &body))
    })
    .await
}

/// An error response's body, cut at 64 KiB; a read failure yields what was read.
async fn read_capped(mut response: reqwest::Response) -> String {
    const CAP: usize = 64 * 1024;
    let mut body = Vec::new();
    while body.len() < CAP {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(CAP);
    String::from_utf8_lossy(&body).into_owned()
}

/// Parses `retry-after` as delta-seconds or an HTTP date (a date in the past
/// means "now").
pub(crate) fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// What kind of failure a provider's error body described, beyond its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ErrorHint {
    #[default]
    None,
    ContextOverflow,
    /// Out of credit: 429 but retrying will not help.
    QuotaExhausted,
}

/// Maps an HTTP error status (plus what the body said) to a typed error.
pub(crate) fn error_for_status(
    status: u16,
    message: String,
    hint: ErrorHint,
    retry_after: Option<Duration>,
) -> ModelError {
    match (status, hint) {
        (_, ErrorHint::ContextOverflow) if status < 500 => ModelError::ContextOverflow { message },
        (_, ErrorHint::QuotaExhausted) => ModelError::BadRequest { status, message },
        (401 | 403, _) => ModelError::Auth { status, message },
        (429, _) => ModelError::RateLimited {
            message,
            retry_after,
        },
        (529, _) => ModelError::Overloaded {
            message,
            retry_after,
        },
        // Request timeout and conflict are transient for these APIs.
        (408 | 409, _) | (500..=599, _) => ModelError::Server {
            status,
            message,
            retry_after,
        },
        (400..=499, _) => ModelError::BadRequest { status, message },
        _ => ModelError::Protocol(format!("unexpected HTTP status {status}: {message}")),
    }
}

/// A message for an error body that is not the documented JSON (e.g. an HTML
/// page from a proxy).
pub(crate) fn fallback_message(status: u16, body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        let reason = reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("error");
        return format!("HTTP {status} {reason}");
    }
    let mut cut: String = body.chars().take(300).collect();
    if cut.len() < body.len() {
        cut.push('…');
    }
    cut
}

/// A configuration value as a header value.
pub(crate) fn header_value(value: &str) -> Result<reqwest::header::HeaderValue, ModelError> {
    reqwest::header::HeaderValue::from_str(value).map_err(|_| {
        invalid_config("a key or header value has characters not allowed in HTTP headers".into())
    })
}

/// A client configuration that cannot work; reported as a bad request.
pub(crate) fn invalid_config(message: String) -> ModelError {
    ModelError::BadRequest {
        status: 0,
        message: format!("invalid model configuration: {message}"),
    }
}

/// Whether an error message says the prompt does not fit the context window.
/// Providers phrase it differently; these cover Anthropic, OpenAI, vLLM,
/// llama.cpp and Ollama.
pub(crate) fn looks_like_context_overflow(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "prompt is too long",
        "context limit",
        "context window",
        "context length",
        "context_length_exceeded",
        "maximum context",
        "too many tokens",
        "exceeds the context",
    ]
    .iter()
    .any(|needle| m.contains(needle))
}

/// Maps a reqwest failure before any response to a typed error.
pub(crate) fn transport_error(err: &reqwest::Error) -> ModelError {
    // Include the source chain: reqwest's top-level message is often just
    // "error sending request".
    let mut message = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(inner) = source {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        source = inner.source();
    }
    ModelError::Transport(message)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use reqwest::header::HeaderValue;

    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(60),
        }
    }

    fn server_error() -> ModelError {
        ModelError::Server {
            status: 500,
            message: "boom".into(),
            retry_after: None,
        }
    }

    #[test]
    fn backoff_grows_with_jitter_and_caps() {
        let p = policy();
        for _ in 0..50 {
            let d0 = p.delay(0, &server_error());
            assert!(d0 >= Duration::from_millis(50) && d0 <= Duration::from_millis(100));
            let d2 = p.delay(2, &server_error());
            assert!(d2 >= Duration::from_millis(200) && d2 <= Duration::from_millis(400));
            let d9 = p.delay(9, &server_error());
            assert!(d9 >= Duration::from_millis(500) && d9 <= Duration::from_secs(1));
            assert!(p.delay(u32::MAX, &server_error()) <= Duration::from_secs(1));
        }
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let p = policy();
        let err = |secs| ModelError::RateLimited {
            message: String::new(),
            retry_after: Some(Duration::from_secs(secs)),
        };
        assert_eq!(p.delay(0, &err(7)), Duration::from_secs(7));
        assert_eq!(p.delay(3, &err(3600)), Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn retries_transient_errors_until_success() {
        let calls = Arc::new(AtomicU32::new(0));
        let start = tokio::time::Instant::now();
        let result = with_retries(&policy(), || {
            let calls = calls.clone();
            async move {
                match calls.fetch_add(1, Ordering::SeqCst) {
                    0 => Err(ModelError::Overloaded {
                        message: "busy".into(),
                        retry_after: Some(Duration::from_secs(2)),
                    }),
                    1 => Err(ModelError::Transport("refused".into())),
                    _ => Ok("ok"),
                }
            }
        })
        .await;
        assert_eq!(result.ok(), Some("ok"));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        // 2 s from retry-after, then the second retry's 100–200 ms of backoff.
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(2100) && waited <= Duration::from_millis(2200));
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_retries_with_last_error() {
        let calls = Arc::new(AtomicU32::new(0));
        let result: Result<(), _> = with_retries(&policy(), || {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(server_error())
            }
        })
        .await;
        assert!(matches!(
            result,
            Err(ModelError::Server { status: 500, .. })
        ));
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn does_not_retry_permanent_errors() {
        let calls = Arc::new(AtomicU32::new(0));
        let result: Result<(), _> = with_retries(&policy(), || {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(ModelError::Auth {
                    status: 401,
                    message: "bad key".into(),
                })
            }
        })
        .await;
        assert!(matches!(result, Err(ModelError::Auth { .. })));
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let none = with_retries(&RetryPolicy::none(), || async {
            Err::<(), _>(server_error())
        })
        .await;
        assert!(none.is_err());
    }

    #[test]
    fn parses_retry_after_forms() {
        let mut headers = HeaderMap::new();
        assert_eq!(parse_retry_after(&headers), None);
        headers.insert(RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(parse_retry_after(&headers), Some(Duration::from_secs(3)));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("0.5"));
        assert_eq!(
            parse_retry_after(&headers),
            Some(Duration::from_millis(500))
        );
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(parse_retry_after(&headers), Some(Duration::ZERO));
        let future = SystemTime::now() + Duration::from_secs(120);
        let value = HeaderValue::from_str(&httpdate::fmt_http_date(future)).ok();
        headers.insert(RETRY_AFTER, value.unwrap_or(HeaderValue::from_static("")));
        let got = parse_retry_after(&headers).unwrap_or_default();
        assert!(got > Duration::from_secs(115) && got <= Duration::from_secs(120));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(parse_retry_after(&headers), None);
        headers.insert(RETRY_AFTER, HeaderValue::from_static("-1"));
        assert_eq!(parse_retry_after(&headers), None);
    }

    #[test]
    fn maps_statuses() {
        let map = |status, hint| error_for_status(status, "m".into(), hint, None);
        assert!(matches!(
            map(401, ErrorHint::None),
            ModelError::Auth { status: 401, .. }
        ));
        assert!(matches!(
            map(403, ErrorHint::None),
            ModelError::Auth { status: 403, .. }
        ));
        assert!(matches!(
            map(400, ErrorHint::None),
            ModelError::BadRequest { .. }
        ));
        assert!(matches!(
            map(400, ErrorHint::ContextOverflow),
            ModelError::ContextOverflow { .. }
        ));
        assert!(matches!(
            map(429, ErrorHint::None),
            ModelError::RateLimited { .. }
        ));
        assert!(matches!(
            map(429, ErrorHint::QuotaExhausted),
            ModelError::BadRequest { status: 429, .. }
        ));
        assert!(matches!(
            map(529, ErrorHint::None),
            ModelError::Overloaded { .. }
        ));
        assert!(matches!(
            map(503, ErrorHint::None),
            ModelError::Server { status: 503, .. }
        ));
        assert!(matches!(
            map(404, ErrorHint::None),
            ModelError::BadRequest { .. }
        ));
        assert!(matches!(map(302, ErrorHint::None), ModelError::Protocol(_)));
    }

    #[test]
    fn recognises_context_overflow_messages() {
        assert!(looks_like_context_overflow(
            "prompt is too long: 208310 tokens > 200000 maximum"
        ));
        assert!(looks_like_context_overflow(
            "This model's maximum context length is 8192 tokens."
        ));
        assert!(looks_like_context_overflow(
            "input length and `max_tokens` exceed context limit: 190000 + 32000 > 200000"
        ));
        assert!(!looks_like_context_overflow("max_tokens: must be positive"));
    }
}
