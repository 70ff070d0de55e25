//! The loopback `/v1/messages` the `claude` CLI of a `claude-code` model
//! with `backend = "<model>"` talks to: Anthropic's Messages API in front of
//! the backend's client (OpenAI-compatible or Anthropic), so the CLI runs on
//! any configured model.
//!
//! Owned by the runtime and started with the first such turn, on
//! 127.0.0.1:0, for `agentd run` and `agentd serve` alike (a server's own
//! listener may be TLS-fronted, on a public address or a socket the CLI
//! cannot reach). Each session's CLI gets a key of its own, which maps to
//! its session and backend and, while a turn runs, to that turn's
//! [`meter::TurnMeter`]: every call is metered, and refused once the
//! turn's budget or its owner's spend quota is reached. The endpoint
//! builds each backend's client itself, from the configuration, once.

mod meter;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex as SyncMutex, RwLock};
use std::time::Duration;

use agentd_claude_code::BackendMeter;
use agentd_engine::Agent;
use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::http::anthropic::API_KEY_HEADER;
use crate::http::anthropic::error::{AnthropicError, AnthropicJson};
use crate::http::anthropic::reply::{Call, answer};
use crate::http::anthropic::request::{MessagesRequest, Target};
use crate::models::{EnvLookup, ResolvedModel, resolve_served};
use meter::TurnMeter;

/// A turn's way to the endpoint, and its meter. Dropped when the turn is
/// over: the session's key then serves no call until its next turn.
pub struct GatewayTurn {
    pub base_url: String,
    pub api_key: String,
    meter: Arc<TurnMeter>,
    slot: Arc<Slot>,
}

impl GatewayTurn {
    /// What the turn records as spent (see [`BackendMeter`]).
    pub fn meter(&self) -> Arc<dyn BackendMeter> {
        self.meter.clone()
    }
}

impl Drop for GatewayTurn {
    fn drop(&mut self) {
        let mut turn = self.slot.turn.lock().unwrap_or_else(|e| e.into_inner());
        if turn.as_ref().is_some_and(|t| Arc::ptr_eq(t, &self.meter)) {
            *turn = None;
        }
    }
}

#[derive(Default)]
pub struct ModelGateway {
    listening: Mutex<Lifecycle>,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Lifecycle {
    listening: Option<Listening>,
    /// Shut down: a turn racing the shutdown does not start it again.
    closed: bool,
}

#[derive(Default)]
struct Shared {
    /// By the SHA-256 of its key: one session's CLI on one backend.
    slots: RwLock<HashMap<[u8; 32], Arc<Slot>>>,
    /// `(session, backend)` → its key, stable so a warm CLI keeps it.
    keys: SyncMutex<HashMap<(String, String), String>>,
    /// Backends by config name, built on first use.
    backends: SyncMutex<HashMap<String, Arc<ResolvedModel>>>,
    /// Cancelled at shutdown: the listener stops, streamed replies end.
    stop: CancellationToken,
}

struct Slot {
    /// The config name the CLI asks for.
    backend_name: String,
    backend: Arc<ResolvedModel>,
    /// The running turn's meter; `None` between turns.
    turn: SyncMutex<Option<Arc<TurnMeter>>>,
}

struct Listening {
    url: String,
    task: JoinHandle<()>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn new_key() -> String {
    let bytes: [u8; 32] = rand::random();
    let key: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("agentd-loopback-{key}")
}

impl ModelGateway {
    /// A turn of `session` on `backend` (a configured model's name): the
    /// endpoint (listening first if not yet), the session's key, and the
    /// turn's meter, pricing and limiting by `agent`.
    pub async fn open_turn(
        &self,
        config: &Config,
        env: EnvLookup<'_>,
        session: &str,
        backend: &str,
        agent: Arc<Agent>,
    ) -> Result<GatewayTurn, String> {
        let served = self.shared.backend(config, env, backend)?;
        let mut lifecycle = self.listening.lock().await;
        if lifecycle.closed {
            return Err("agentd is shutting down".into());
        }
        let base_url = match &lifecycle.listening {
            Some(listening) => listening.url.clone(),
            None => {
                let started = listen(self.shared.clone())
                    .await
                    .map_err(|err| format!("cannot start the loopback endpoint: {err}"))?;
                let url = started.url.clone();
                lifecycle.listening = Some(started);
                url
            }
        };
        drop(lifecycle);
        let (api_key, slot) = self.shared.slot(session, backend, served);
        let meter = TurnMeter::new(agent);
        *slot.turn.lock().unwrap_or_else(|e| e.into_inner()) = Some(meter.clone());
        Ok(GatewayTurn {
            base_url,
            api_key,
            meter,
            slot,
        })
    }

    /// Stop listening (at shutdown, once the CLIs are stopped), for good.
    pub async fn shutdown(&self) {
        let mut lifecycle = self.listening.lock().await;
        lifecycle.closed = true;
        let Some(mut listening) = lifecycle.listening.take() else {
            return;
        };
        drop(lifecycle);
        self.shared.stop.cancel();
        if tokio::time::timeout(Duration::from_secs(2), &mut listening.task)
            .await
            .is_err()
        {
            tracing::warn!("the loopback model endpoint did not stop in time");
        }
    }
}

impl Shared {
    /// The backend `name`, built from its configuration once (never from
    /// what a turn resolved: a session's own model spec does not reach it).
    fn backend(
        &self,
        config: &Config,
        env: EnvLookup<'_>,
        name: &str,
    ) -> Result<Arc<ResolvedModel>, String> {
        let mut backends = self.backends.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(built) = backends.get(name) {
            return Ok(built.clone());
        }
        let built = Arc::new(
            resolve_served(config, name, env)
                .map_err(|err| format!("backend {name:?} is unusable: {err}"))?,
        );
        backends.insert(name.to_string(), built.clone());
        Ok(built)
    }

    /// The key and slot of `session` on `backend`, made on first use.
    fn slot(
        &self,
        session: &str,
        backend: &str,
        served: Arc<ResolvedModel>,
    ) -> (String, Arc<Slot>) {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let id = (session.to_string(), backend.to_string());
        let mut slots = self.slots.write().unwrap_or_else(|e| e.into_inner());
        if let Some(key) = keys.get(&id)
            && let Some(slot) = slots.get(&digest(key))
        {
            return (key.clone(), slot.clone());
        }
        let key = new_key();
        let slot = Arc::new(Slot {
            backend_name: backend.to_string(),
            backend: served,
            turn: SyncMutex::default(),
        });
        keys.insert(id, key.clone());
        slots.insert(digest(&key), slot.clone());
        (key, slot)
    }

    /// The slot of the key in `headers`, if any.
    fn slot_of(&self, headers: &HeaderMap) -> Option<Arc<Slot>> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let given = headers
            .get(API_KEY_HEADER)
            .and_then(|v| v.to_str().ok())
            .or(bearer)?;
        // Looked up by its hash: how long the lookup takes says nothing
        // about the key itself.
        self.slots
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&digest(given))
            .cloned()
    }
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
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
        .with_state(shared.clone());
    let stopped = shared.stop.clone();
    let task = tokio::spawn(async move {
        let serve = axum::serve(listener, app).with_graceful_shutdown(stopped.cancelled_owned());
        if let Err(err) = serve.await {
            tracing::warn!(%err, "the loopback model endpoint stopped");
        }
    });
    tracing::info!(%url, "loopback model endpoint for claude-code backends");
    Ok(Listening { url, task })
}

async fn messages(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    match serve(&shared, request).await {
        Ok(response) => response,
        Err(err) => err.into_response(),
    }
}

/// The key first, before the body is read; then the turn's budget.
async fn serve(shared: &Shared, request: Request) -> Result<Response, AnthropicError> {
    let slot = shared
        .slot_of(request.headers())
        .ok_or_else(|| AnthropicError::new(StatusCode::UNAUTHORIZED, "invalid x-api-key"))?;
    let AnthropicJson(body) = AnthropicJson::<MessagesRequest>::from_request(request, &()).await?;
    if body.conversation.model != slot.backend_name {
        return Err(AnthropicError::new(
            StatusCode::NOT_FOUND,
            format!(
                "model: {:?} is not served to this key",
                body.conversation.model
            ),
        ));
    }
    let meter = slot.turn.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let meter = meter.ok_or_else(|| {
        AnthropicError::new(
            StatusCode::FORBIDDEN,
            "no agentd turn is running for this key",
        )
    })?;
    let backend = &slot.backend;
    let target = Target::from(backend.as_ref());
    let stream = body.stream.unwrap_or(false);
    let name = body.conversation.model.clone();
    let request = body.into_model_request(&target)?;
    let on_usage = meter.admit()?;
    let call = Call {
        client: backend.client.clone(),
        request,
        model: name,
        stream,
        signs_thinking: target.thinking_on_top,
        stop: shared.stop.clone(),
    };
    Ok(answer(call, on_usage).await)
}
