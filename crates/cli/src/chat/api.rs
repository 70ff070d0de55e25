//! The client side of agentd's HTTP API that `agentd chat` speaks, locally
//! (over the embedded server's unix socket) and remotely alike.

use std::path::Path;
use std::time::Duration;

use agentd_protocol::EventEnvelope;
use futures::{Stream, StreamExt};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sse_stream::SseStream;

/// A failed call, as the user should read it: the server's error message
/// (its `{"error": {"code", "message"}}` body) or why it could not be reached.
#[derive(Debug)]
pub struct ApiError {
    pub status: Option<StatusCode>,
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(status) => write!(f, "{} ({status})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl ApiError {
    /// A failure seen by this client, not answered by the server.
    pub fn local(message: impl Into<String>) -> Self {
        Self {
            status: None,
            message: message.into(),
        }
    }

    fn transport(err: reqwest::Error) -> Self {
        Self {
            status: None,
            message: format!("cannot reach agentd: {err}"),
        }
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Api {
    /// A server at `url`, with a Bearer `token` when there is one.
    pub fn remote(url: &str, token: Option<String>) -> ApiResult<Self> {
        let http = builder().build().map_err(ApiError::transport)?;
        Ok(Self {
            http,
            base: url.trim_end_matches('/').to_string(),
            token,
        })
    }

    /// The embedded server listening on the unix socket at `socket`.
    pub fn unix(socket: &Path) -> ApiResult<Self> {
        let http = builder()
            .unix_socket(socket)
            .build()
            .map_err(ApiError::transport)?;
        // `localhost`: the name an `auth = "none"` server answers.
        Ok(Self {
            http,
            base: "http://localhost".into(),
            token: None,
        })
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let builder = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    /// Send; the JSON body of a 2xx answer, else the server's error.
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> ApiResult<Value> {
        let mut builder = self.request(method, path).timeout(CALL_TIMEOUT);
        if let Some(body) = body {
            builder = builder.json(&body);
        }
        let response = builder.send().await.map_err(ApiError::transport)?;
        let status = response.status();
        let text = response.text().await.map_err(ApiError::transport)?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(value);
        }
        let message = value["error"]["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("the server answered {status}"));
        Err(ApiError {
            status: Some(status),
            message,
        })
    }

    pub async fn get(&self, path: &str) -> ApiResult<Value> {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> ApiResult<Value> {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> ApiResult<Value> {
        self.call(Method::PATCH, path, Some(body)).await
    }

    /// A new session (`POST /v1/sessions`); its view.
    pub async fn create_session(&self, profile: &str, model: Option<&str>) -> ApiResult<Value> {
        let mut body = json!({"profile": profile});
        if let Some(model) = model {
            body["model"] = json!(model);
        }
        self.post("/v1/sessions", body).await
    }

    pub async fn session(&self, id: &str) -> ApiResult<Value> {
        self.get(&format!("/v1/sessions/{id}")).await
    }

    /// The session's events after `after`, replayed then live.
    pub async fn events(
        &self,
        session: &str,
        after: u64,
    ) -> ApiResult<impl Stream<Item = ApiResult<EventEnvelope>> + Send + Unpin + use<>> {
        let path = format!("/v1/sessions/{session}/events?after={after}");
        // No timeout on the stream itself: a turn may think for a long time
        // (the server sends a comment every 15 s).
        let response = self
            .request(Method::GET, &path)
            .send()
            .await
            .map_err(ApiError::transport)?;
        let status = response.status();
        if !status.is_success() {
            let value: Value = response.json().await.unwrap_or(Value::Null);
            return Err(ApiError {
                status: Some(status),
                message: value["error"]["message"]
                    .as_str()
                    .unwrap_or("cannot open the event stream")
                    .to_string(),
            });
        }
        let stream = SseStream::from_bytes_stream(response.bytes_stream()).filter_map(|item| {
            let envelope = match item {
                Err(err) => Some(Err(ApiError {
                    status: None,
                    message: format!("the event stream broke: {err}"),
                })),
                // Comments (heartbeats) carry no data.
                Ok(sse) => sse
                    .data
                    .and_then(|data| envelope(sse.event.as_deref(), &data)),
            };
            std::future::ready(envelope)
        });
        Ok(Box::pin(stream))
    }
}

/// The event in an SSE message's `data`. One this client cannot read (a
/// newer server's) is logged and skipped, but the end of a turn cannot be:
/// the chat would wait for it for ever.
fn envelope(kind: Option<&str>, data: &str) -> Option<ApiResult<EventEnvelope>> {
    match serde_json::from_str::<EventEnvelope>(data) {
        Ok(envelope) => Some(Ok(envelope)),
        Err(err) if kind == Some("turn.finished") => Some(Err(ApiError::local(format!(
            "cannot read the end of the turn: {err}"
        )))),
        Err(err) => {
            tracing::warn!(event = kind.unwrap_or("?"), %err, "skipped an event this client cannot read");
            None
        }
    }
}

/// Each call but the event stream gives up after this long.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().connect_timeout(Duration::from_secs(10))
}
