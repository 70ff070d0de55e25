//! agentd's own HTTP API, called in this process: every MCP tool is one or
//! a few API calls made with the MCP caller's credentials, so the checks,
//! grants, quotas, audit and confinement are exactly the API's (a session
//! made here is made by `POST /v1/sessions`, a file read by
//! `GET …/files/content`), and the adapter keeps no state of its own.

use axum::Router;
use axum::body::Body;
use axum::http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HOST, TRANSFER_ENCODING};
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

/// The API as one caller sees it.
#[derive(Clone)]
pub struct Api {
    /// The API's routes (without `/mcp`), state attached.
    router: Router,
    /// What authenticates the caller: the MCP request's own headers over
    /// HTTP; none on stdio, where the API runs as `auth = "none"`.
    headers: HeaderMap,
}

/// A call the API refused or that failed: its error message as the API
/// worded it.
#[derive(Debug)]
pub struct Refused {
    pub status: StatusCode,
    pub message: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.status.as_u16())
    }
}

pub type ApiResult<T> = Result<T, Refused>;

impl Api {
    pub fn new(router: Router, request_headers: &HeaderMap) -> Self {
        let mut headers = request_headers.clone();
        // The MCP request's body headers are not the API call's.
        for name in [CONTENT_LENGTH, CONTENT_TYPE, ACCEPT, TRANSFER_ENCODING] {
            headers.remove(name);
        }
        headers
            .entry(HOST)
            .or_insert(HeaderValue::from_static("localhost"));
        Api { router, headers }
    }

    async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> ApiResult<Body> {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(headers) = request.headers_mut() {
            headers.extend(self.headers.clone());
            if body.is_some() {
                headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            }
        }
        let body = match body {
            Some(value) => Body::from(value.to_string()),
            None => Body::empty(),
        };
        let request = request
            .body(body)
            .map_err(|err| internal(err.to_string()))?;
        let response = match self.router.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response.into_body());
        }
        let bytes = collect(response.into_body()).await.unwrap_or_default();
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let message = value["error"]["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
        Err(Refused { status, message })
    }

    /// A JSON call; its JSON answer.
    pub async fn json(&self, method: Method, path: &str, body: Option<Value>) -> ApiResult<Value> {
        let body = self.send(method, path, body.as_ref()).await?;
        let bytes = collect(body).await?;
        serde_json::from_slice(&bytes).map_err(|err| internal(format!("the API's answer: {err}")))
    }

    pub async fn get(&self, path: &str) -> ApiResult<Value> {
        self.json(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> ApiResult<Value> {
        self.json(Method::POST, path, Some(body)).await
    }

    /// A GET answered with bytes (a workspace file).
    pub async fn bytes(&self, path: &str) -> ApiResult<Bytes> {
        let body = self.send(Method::GET, path, None).await?;
        collect(body).await
    }

    /// The session's events after `after`, stored then live, as JSON.
    pub async fn events(
        &self,
        session_id: &str,
        after: u64,
    ) -> ApiResult<impl Stream<Item = Value> + Send + use<>> {
        let path = format!("/v1/sessions/{}/events?after={after}", segment(session_id));
        let body = self.send(Method::GET, &path, None).await?;
        let events = sse_stream::SseStream::new(body)
            // A broken stream ends the wait: the caller reports it.
            .take_while(|item| std::future::ready(item.is_ok()))
            .filter_map(|item| {
                let data = item.ok().and_then(|sse| sse.data);
                std::future::ready(data.and_then(|data| serde_json::from_str(&data).ok()))
            });
        Ok(events)
    }
}

async fn collect(body: Body) -> ApiResult<Bytes> {
    let collected = body
        .collect()
        .await
        .map_err(|err| internal(format!("reading the API's answer: {err}")))?;
    Ok(collected.to_bytes())
}

fn internal(message: String) -> Refused {
    Refused {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message,
    }
}

/// `text` as one path segment (session ids are checked by the API; this
/// only keeps a `/` or `?` in one from naming another route).
pub fn segment(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
