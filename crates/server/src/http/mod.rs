//! `agentd serve`: the HTTP API of docs/api.md (REST + SSE) in front of the
//! [`Registry`]. Routes and the OpenAPI document come from the same handler
//! annotations (utoipa-axum), so they cannot drift apart.

mod access_check;
mod accounts;
mod admin;
mod ai_sdk;
pub(crate) mod anthropic;
pub mod approvals;
mod attachments;
pub mod auth;
mod auth_methods;
mod commands;
mod conn_watch;
mod doc;
#[cfg(test)]
mod doc_tables;
pub mod error;
mod error_codes;
mod files;
mod first_request;
mod history;
mod jwks;
mod listen;
mod local_host;
mod messages;
mod meta;
mod oidc;
mod oidc_groups;
mod oidc_routes;
mod projects;
mod session_error;
mod session_list;
mod sessions;
mod shutdown;
pub mod sign_in;
mod sse;
mod stream_conn;
pub mod stream_limit;
mod tool_identity;
mod uploads;
mod web;
mod webhooks;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::metrics::Metrics;
use crate::registry::{Env, Registry};
use crate::runtime::Runtime;
use crate::session::SessionService;
use auth::Auth;
use error::ApiError;

pub use shutdown::Stopped;

/// Largest request body accepted (413 beyond).
pub const BODY_LIMIT: usize = 1024 * 1024;

/// What every handler gets.
#[derive(Clone)]
pub struct AppState {
    pub registry: Registry,
    /// Every operation on a session goes through it.
    pub sessions: SessionService,
    pub auth: Arc<Auth>,
    /// Cancelled at shutdown once turns are recorded: event streams end.
    pub streams: CancellationToken,
    /// The OpenAPI document, rendered once.
    pub openapi: Arc<String>,
    /// Open event streams per user (`[server] max_streams_per_user`).
    pub stream_limit: Arc<stream_limit::StreamLimit>,
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "agentd",
        description = "Run tool-using LLM agents in sandboxed, durable sessions. \
            Authenticate with `Authorization: Bearer <token>` (from `agentd tokens create`), \
            or in a browser with the `agentd_session` cookie from `POST /v1/auth/login`, \
            unless the server runs with `auth = \"none\"` or `\"header\"`. The web UI is \
            `/` and `/ui/*`."
    ),
    modifiers(&Security),
    tags(
        (name = "sessions", description = "Sessions, their messages and live events"),
        (name = "files", description = "Workspace browsing, and uploads"),
        (name = "auth", description = "Signing the web UI in and out"),
        (name = "admin", description = "Users, grants, usage, the audit log and the webhook delivery log (admins only)"),
        (name = "server", description = "What the server offers, health and metrics"),
        (name = "anthropic", description = "Anthropic's Messages API with any configured model")
    )
)]
struct ApiDoc;

struct Security;

impl utoipa::Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Every route, with its OpenAPI description.
fn api_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(
            sessions::create_session,
            session_list::list_sessions
        ))
        .routes(routes!(
            sessions::get_session,
            sessions::update_session,
            sessions::delete_session
        ))
        .merge(
            // Room for images in base64 (each is checked against its own cap).
            OpenApiRouter::new()
                .routes(routes!(messages::post_message, messages::list_messages))
                .routes(routes!(ai_sdk::post_chat))
                .layer(DefaultBodyLimit::max(messages::MESSAGE_BODY_LIMIT)),
        )
        .merge(
            OpenApiRouter::new()
                .routes(routes!(anthropic::post_messages))
                .routes(routes!(anthropic::count_tokens))
                .layer(DefaultBodyLimit::max(anthropic::BODY_LIMIT)),
        )
        .routes(routes!(messages::interrupt))
        .routes(routes!(sse::events))
        .routes(routes!(ai_sdk::resume_chat_stream))
        .routes(routes!(approvals::list_pending))
        .routes(routes!(approvals::answer_permission))
        .routes(routes!(approvals::answer_question))
        .routes(routes!(messages::compact))
        .routes(routes!(commands::list_commands))
        .routes(routes!(commands::run_command))
        .routes(routes!(history::list_checkpoints))
        .routes(routes!(history::rewind))
        .routes(routes!(history::fork))
        .routes(routes!(files::list_files, uploads::upload_file))
        .routes(routes!(files::file_content))
        .routes(routes!(meta::models))
        .routes(routes!(meta::profiles))
        .routes(routes!(projects::projects))
        .routes(routes!(admin::usage))
        .routes(routes!(admin::list_users))
        .routes(routes!(admin::get_user, admin::update_user))
        .routes(routes!(admin::add_grant))
        .routes(routes!(admin::remove_grant))
        .routes(routes!(admin::audit_log))
        .routes(routes!(admin::user_metrics))
        .routes(routes!(webhooks::deliveries))
        .routes(routes!(meta::healthz))
        .routes(routes!(meta::metrics))
        .routes(routes!(meta::openapi))
        .routes(routes!(tool_identity::jwks))
        .routes(routes!(sign_in::login))
        .routes(routes!(sign_in::logout))
        .routes(routes!(sign_in::me))
        .routes(routes!(oidc_routes::methods))
        .routes(routes!(oidc_routes::login))
        .routes(routes!(oidc_routes::callback))
        .routes(routes!(web::index))
        .route("/ui/{*path}", get(web::asset))
}

/// The OpenAPI document of this server.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut api = api_router().into_openapi();
    doc::finish(&mut api);
    api
}

/// The whole app, ready to serve.
pub fn app(registry: Registry, auth: Auth, streams: CancellationToken) -> Router {
    let (router, mut api) = api_router().split_for_parts();
    doc::finish(&mut api);
    let openapi = api.to_pretty_json().unwrap_or_else(|err| {
        tracing::error!(%err, "cannot render the OpenAPI document");
        "{}".into()
    });
    let max_streams = registry.runtime().config.server.max_streams_per_user();
    let state = AppState {
        stream_limit: stream_limit::StreamLimit::new(max_streams),
        sessions: SessionService::new(registry.clone()),
        registry,
        auth: Arc::new(auth),
        streams,
        openapi: Arc::new(openapi),
    };
    let api = router
        .fallback(|| async { ApiError::RouteNotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state.clone());
    // `/mcp` calls the API's routes in this process, with each caller's
    // credentials (see `crate::mcp_server`).
    let mcp = crate::mcp_server::http_service(api.clone(), McpAuth(state.clone()));
    api.route("/mcp", axum::routing::any(mcp))
        .layer(middleware::from_fn_with_state(state, common))
}

/// `/mcp` authenticates as every route does: a bare 401 otherwise.
#[derive(Clone)]
struct McpAuth(AppState);

impl crate::mcp_server::AsyncAuth for McpAuth {
    async fn check(&self, parts: &axum::http::request::Parts) -> Result<(), Response> {
        auth::authenticate(&self.0, &parts.method, &parts.headers)
            .await
            .map(|_| ())
            .map_err(IntoResponse::into_response)
    }
}

/// Per request: a tracing span, the request counter, and the headers every
/// response carries. No CORS headers: cross-origin browsers are refused.
async fn common(State(state): State<AppState>, request: Request, next: Next) -> Response {
    state
        .registry
        .metrics()
        .http_requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let span = tracing::info_span!(
        "http",
        method = %request.method(),
        path = %request.uri().path(),
    );
    let started = Instant::now();
    let foreign_host = match state.auth.as_ref() {
        Auth::None { allowed_hosts } => {
            !local_host::is_local_host(request.headers(), request.uri().authority(), allowed_hosts)
        }
        _ => false,
    };
    let limit = body_limit(&state, &request);
    let refusal = if foreign_host {
        Some(ApiError::BadHost)
    } else if declared_length(&request).is_some_and(|n| n > limit) {
        // Refused from its declared length, whatever the body holds.
        Some(ApiError::TooLarge(format!(
            "the request body is over {limit} bytes"
        )))
    } else {
        None
    };
    let mut response = if let Some(err) = refusal {
        // Anthropic clients read errors in Anthropic's shape.
        let anthropic_shape = is_anthropic(&request);
        if matches!(err, ApiError::TooLarge(_)) {
            discard_body(request).await;
        }
        if anthropic_shape {
            anthropic::error::AnthropicError::from(err).into_response()
        } else {
            err.into_response()
        }
    } else {
        next.run(request).instrument(span.clone()).await
    };
    span.in_scope(|| {
        tracing::debug!(
            status = response.status().as_u16(),
            micros = started.elapsed().as_micros() as u64,
            "answered"
        )
    });
    let headers = response.headers_mut();
    // The web UI's files say `no-cache` themselves.
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// The most a request's body may hold: more for a message (images in
/// base64) and an upload (`[server] max_upload_mb`) than for the rest.
fn body_limit(state: &AppState, request: &Request) -> u64 {
    let path = request.uri().path();
    let in_session = |tail: &str| {
        path.strip_prefix("/v1/sessions/")
            .and_then(|rest| rest.strip_suffix(tail))
            .is_some_and(|id| !id.is_empty() && !id.contains('/'))
    };
    match *request.method() {
        Method::POST if in_session("/messages") || in_session("/chat") => {
            messages::MESSAGE_BODY_LIMIT as u64
        }
        Method::POST if is_anthropic(request) => anthropic::BODY_LIMIT as u64,
        Method::POST if in_session("/files") => {
            state.registry.runtime().config.server.max_upload_bytes()
        }
        _ => BODY_LIMIT as u64,
    }
}

/// The most of a refused body read and dropped before the refusal.
const DISCARD_LIMIT: u64 = 64 << 20;

/// How long a refused body is read for at most.
const DISCARD_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// Reads and drops, for a moment, the body of a refused request that is
/// not huge: a client still sending it then reads the 413, not a reset
/// connection. A larger or slower one is not waited for; the connection
/// closes after the answer.
async fn discard_body(request: Request) {
    if declared_length(&request).is_some_and(|n| n > DISCARD_LIMIT) {
        return;
    }
    use futures::StreamExt as _;
    let mut chunks = request.into_body().into_data_stream();
    let drain = async {
        let mut read = 0u64;
        while let Some(Ok(chunk)) = chunks.next().await {
            read += chunk.len() as u64;
            if read > DISCARD_LIMIT {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DISCARD_TIME, drain).await;
}

/// A request to the Anthropic-compatible endpoint.
fn is_anthropic(request: &Request) -> bool {
    matches!(
        request.uri().path(),
        "/v1/messages" | "/v1/messages/count_tokens"
    )
}

fn declared_length(request: &Request) -> Option<u64> {
    request
        .headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// Serve until `signal` resolves, then shut down gracefully within `[server]
/// shutdown_deadline_s`: stop accepting, interrupt running turns (recorded as
/// `interrupted`), end event streams once those are stored, and wait for
/// connections to close. Whether all of that happened in time.
pub async fn serve(
    listener: TcpListener,
    runtime: Runtime,
    env: Env,
    auth: Auth,
    signal: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<Stopped> {
    let limits = runtime.config.server.connection_limits();
    let deadline = runtime.config.server.shutdown_deadline();
    let coordination = runtime.coordination.clone();
    let registry = Registry::new(runtime, env, Arc::new(Metrics::default()));
    let cluster_stop = CancellationToken::new();
    crate::webhooks::sender::start(
        registry.webhooks(),
        registry.runtime().store.clone(),
        registry.env(),
        cluster_stop.clone(),
    )
    .map_err(std::io::Error::other)?;
    crate::search_indexer::start(
        registry.runtime().store.clone(),
        registry.metrics().clone(),
        cluster_stop.clone(),
    );
    let address = format!("http://{}", listener.local_addr()?);
    coordination
        .join(&registry, &address, cluster_stop.clone())
        .await
        .map_err(std::io::Error::other)?;
    let drained = {
        let coordination = coordination.clone();
        async move { coordination.drained().await }
    };
    let streams = CancellationToken::new();
    let app = app(registry.clone(), auth, streams.clone());
    let (accepting, cut) = (CancellationToken::new(), CancellationToken::new());
    let mut connections = tokio::spawn(listen::serve_connections(
        listener,
        app,
        limits,
        registry.metrics().clone(),
        accepting.clone(),
        cut.clone(),
    ));
    tokio::select! {
        result = &mut connections => {
            return result.map(|()| Stopped::Clean).map_err(std::io::Error::other);
        }
        () = signal => {}
        () = drained => tracing::info!("drained: no turn left running here"),
    }
    tracing::info!(?deadline, "shutting down");
    let stopping = shutdown::Stopping {
        registry,
        cluster_stop,
        accepting,
        streams,
        connections,
        cut,
    };
    Ok(stopping.run(deadline).await)
}
