//! The loopback `/v1/messages` the `claude` CLI of a `claude-code` model
//! with `backend = "<model>"` talks to: Anthropic's Messages API in front of
//! the backend's client (OpenAI-compatible or Anthropic), so the CLI runs on
//! any configured model.
//!
//! Owned by the runtime and started with the first such turn, on
//! 127.0.0.1:0, for `agentd run` and `agentd serve` alike (a server's own
//! listener may be TLS-fronted, on a public address or a socket the CLI
//! cannot reach). Its key is random per process and only the CLIs it starts
//! are given it. It serves just the backends turns registered, and records
//! no spend: the turn records what the CLI reports.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use agentd_model::ModelClient;
use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::http::anthropic::API_KEY_HEADER;
use crate::http::anthropic::error::{AnthropicError, AnthropicJson};
use crate::http::anthropic::reply::{Call, answer};
use crate::http::anthropic::request::MessagesRequest;

/// A configured model the endpoint serves under its config name.
#[derive(Clone)]
pub struct Backend {
    pub client: Arc<dyn ModelClient>,
    /// The provider's model name, sent in requests.
    pub model_name: String,
}

/// Where a CLI reaches the endpoint.
pub struct Endpoint {
    pub base_url: String,
    pub api_key: String,
}

#[derive(Default)]
pub struct ModelGateway {
    listening: Mutex<Option<Listening>>,
    shared: Arc<Shared>,
}

struct Shared {
    key: String,
    backends: RwLock<HashMap<String, Backend>>,
}

impl Default for Shared {
    fn default() -> Self {
        let bytes: [u8; 32] = rand::random();
        let key: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Self {
            key: format!("agentd-loopback-{key}"),
            backends: RwLock::default(),
        }
    }
}

struct Listening {
    url: String,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ModelGateway {
    /// Serve `backend` as `name`, listening first if not yet; where the CLI
    /// finds it.
    pub async fn endpoint(&self, name: &str, backend: Backend) -> std::io::Result<Endpoint> {
        self.shared
            .backends
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), backend);
        let mut listening = self.listening.lock().await;
        let url = match listening.as_ref() {
            Some(listening) => listening.url.clone(),
            None => {
                let started = listen(self.shared.clone()).await?;
                let url = started.url.clone();
                *listening = Some(started);
                url
            }
        };
        Ok(Endpoint {
            base_url: url,
            api_key: self.shared.key.clone(),
        })
    }

    /// Stop listening (at shutdown, once the CLIs are stopped).
    pub async fn shutdown(&self) {
        let Some(mut listening) = self.listening.lock().await.take() else {
            return;
        };
        listening.stop.cancel();
        if tokio::time::timeout(Duration::from_secs(2), &mut listening.task)
            .await
            .is_err()
        {
            tracing::warn!("the loopback model endpoint did not stop in time");
        }
    }
}

async fn listen(shared: Arc<Shared>) -> std::io::Result<Listening> {
    let listener =
        tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
    let url = format!("http://{}", listener.local_addr()?);
    let app = Router::new()
        .route("/v1/messages", post(messages))
        // The CLI's connectivity probe (`HEAD /`).
        .route("/", get(|| async { StatusCode::OK }))
        .layer(DefaultBodyLimit::max(crate::http::anthropic::BODY_LIMIT))
        .with_state(shared);
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    let task = tokio::spawn(async move {
        let serve = axum::serve(listener, app).with_graceful_shutdown(stopped.cancelled_owned());
        if let Err(err) = serve.await {
            tracing::warn!(%err, "the loopback model endpoint stopped");
        }
    });
    tracing::info!(%url, "loopback model endpoint for claude-code backends");
    Ok(Listening { url, stop, task })
}

async fn messages(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Result<AnthropicJson<MessagesRequest>, AnthropicError>,
) -> Response {
    if !authorized(&shared.key, &headers) {
        let err = AnthropicError::new(StatusCode::UNAUTHORIZED, "invalid x-api-key");
        return err.into_response();
    }
    let AnthropicJson(body) = match body {
        Ok(body) => body,
        Err(err) => return err.into_response(),
    };
    let name = body.conversation.model.clone();
    let backend = shared
        .backends
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&name)
        .cloned();
    let Some(backend) = backend else {
        let message = format!("model: {name:?} is not served here");
        return AnthropicError::new(StatusCode::NOT_FOUND, message).into_response();
    };
    let stream = body.stream.unwrap_or(false);
    let request = match body.into_model_request(&backend.model_name) {
        Ok(request) => request,
        Err(err) => return err.into_response(),
    };
    let call = Call {
        client: backend.client,
        request,
        model: name,
        stream,
    };
    answer(call, Box::new(|_| {})).await
}

/// The key in `x-api-key` or as a Bearer token, compared in constant time.
fn authorized(key: &str, headers: &HeaderMap) -> bool {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let given = headers
        .get(API_KEY_HEADER)
        .and_then(|v| v.to_str().ok())
        .or(bearer);
    given.is_some_and(|given| {
        // Hashing first makes the comparison independent of length.
        let given = Sha256::digest(given.as_bytes());
        let expected = Sha256::digest(key.as_bytes());
        bool::from(given.ct_eq(&expected))
    })
}
