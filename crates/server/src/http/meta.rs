//! What the server offers (`/v1/models`, `/v1/profiles`) and the
//! unauthenticated plumbing: `/healthz`, `/metrics`, `/openapi.json` (`/` is
//! the web UI, in `web.rs`).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::auth::User;
use super::error::{ApiResult, ErrorBody};
use crate::config::SandboxMode;
use crate::health::HealthCheck;
use crate::metrics::Gauges;
use crate::models::resolve_model;

#[derive(Debug, Serialize, ToSchema)]
pub struct ModelList {
    pub models: Vec<ModelInfo>,
    /// What a session gets when it names no model.
    pub default: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ModelInfo {
    /// Pass as `model` when creating a session.
    pub id: String,
    /// `anthropic`, `openai` or `scripted`.
    pub provider: String,
    /// The provider's model name.
    pub model: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ProfileList {
    pub profiles: Vec<ProfileInfo>,
    pub default: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ProfileInfo {
    pub name: String,
    pub network: bool,
    pub sandboxed: bool,
    pub max_turns: u32,
    pub turn_timeout_s: u64,
    pub max_budget_usd: Option<f64>,
    /// Its permission mode (`default`, `accept_edits`, `read_only`,
    /// `bypass`, `dont_ask`): a message may ask for it or a stricter one.
    pub permission_mode: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`, `degraded` (the database is down or takes no writes, or the
    /// data dir is low on space), `draining` (a cluster node
    /// finishing its turns before it exits) or `stopping`.
    pub status: String,
    /// This node's id, in a cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    pub version: String,
    /// `up`, `down` (no answer) or `read_only` (it answers reads, takes
    /// no writes: a full disk).
    pub database: String,
    /// What failed: `database`, `database_write`, `disk_space`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<String>,
    /// Free space of the data dir, in MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_disk_mb: Option<u64>,
    /// Why the database is down, or what else failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Models the caller may choose: the configured ones, the default, and
/// `demo`, less those not granted to them.
#[utoipa::path(get, path = "/v1/models", tag = "server",
    responses((status = 200, body = ModelList), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn models(State(state): State<AppState>, user: User) -> ApiResult<Json<ModelList>> {
    let runtime = state.registry.runtime();
    let usable = runtime.access().usable(&user.name, user.is_admin).await?;
    let config = &runtime.config;
    let env = state.registry.env().clone();
    let lookup = move |key: &str| env.get(key).cloned();
    let mut models: Vec<ModelInfo> = config
        .models
        .iter()
        .map(|(id, model)| ModelInfo {
            id: id.clone(),
            provider: model.provider.as_str().into(),
            model: model.model.clone().unwrap_or_else(|| "demo".into()),
        })
        .collect();
    let default = resolve_model(config, None, &lookup).ok();
    if let Some(default) = &default
        && !models.iter().any(|m| m.id == default.spec)
    {
        let provider = default.spec.split_once(':').map_or("scripted", |(p, _)| p);
        models.push(ModelInfo {
            id: default.spec.clone(),
            provider: provider.into(),
            model: default.model_name.clone(),
        });
    }
    if !models.iter().any(|m| m.id == "demo") {
        models.push(ModelInfo {
            id: "demo".into(),
            provider: "scripted".into(),
            model: "demo".into(),
        });
    }
    models.retain(|m| usable.model(config, &m.id));
    Ok(Json(ModelList {
        models,
        default: default.map(|d| d.spec),
    }))
}

/// Profiles the caller may choose (`default` always exists, though it may
/// not be theirs).
#[utoipa::path(get, path = "/v1/profiles", tag = "server",
    responses((status = 200, body = ProfileList), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn profiles(State(state): State<AppState>, user: User) -> ApiResult<Json<ProfileList>> {
    let runtime = state.registry.runtime();
    let usable = runtime.access().usable(&user.name, user.is_admin).await?;
    let config = &runtime.config;
    let mut names: Vec<String> = config.profiles.keys().cloned().collect();
    if !names.iter().any(|n| n == "default") {
        names.insert(0, "default".into());
    }
    let profiles = names
        .into_iter()
        .filter(|name| usable.profile(config, name))
        .filter_map(|name| {
            let profile = config.profile(&name).ok()?;
            Some(ProfileInfo {
                name,
                network: profile.network.shares_host(),
                sandboxed: profile.sandbox == SandboxMode::On,
                max_turns: profile.max_turns,
                turn_timeout_s: profile.turn_timeout_s,
                max_budget_usd: profile.max_budget_usd,
                permission_mode: profile.mode.name().into(),
            })
        })
        .collect();
    Ok(Json(ProfileList {
        profiles,
        default: "default".into(),
    }))
}

/// Health: answers while the server runs (no authentication), with whether
/// the database answers a read and takes a write within 2 s each and the
/// data dir has `[server] min_free_disk_mb` free; `503` when not, or while a
/// cluster node drains (load balancers stop sending it requests).
#[utoipa::path(get, path = "/healthz", tag = "server",
    responses((status = 200, body = Health),
        (status = 503, description = "The database is down or takes no writes, the disk is low, or the node drains", body = Health)))]
pub async fn healthz(State(state): State<AppState>) -> Response {
    let check = HealthCheck::run(state.registry.runtime()).await;
    let failing = check.failing();
    let error = check.error();
    let draining = state.registry.runtime().coordination.is_draining();
    let status = if state.registry.is_stopping() {
        "stopping"
    } else if error.is_some() {
        "degraded"
    } else if draining {
        "draining"
    } else {
        "ok"
    };
    let code = if error.is_some() || draining {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    let database = if check.read_error.is_some() {
        "down"
    } else if check.write_error.is_some() {
        "read_only"
    } else {
        "up"
    };
    let health = Health {
        status: status.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        node_id: state
            .registry
            .runtime()
            .coordination
            .node_id()
            .map(str::to_string),
        database: database.into(),
        failing: failing.into_iter().map(String::from).collect(),
        free_disk_mb: check.free_disk_bytes.map(|b| b / (1024 * 1024)),
        error,
    };
    (code, Json(health)).into_response()
}

/// Prometheus metrics (text format, no authentication; nothing per user).
#[utoipa::path(get, path = "/metrics", tag = "server",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain", body = String)))]
pub async fn metrics(State(state): State<AppState>) -> Response {
    let sessions_total = match state.registry.runtime().access().count_sessions().await {
        Ok(count) => count,
        Err(err) => {
            tracing::warn!(%err, "cannot count sessions for /metrics");
            0
        }
    };
    let gauges = Gauges {
        sessions_total,
        ..state.registry.gauges()
    };
    let body = state.registry.metrics().render(gauges);
    let mut response = body.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "server",
    responses((status = 200, description = "OpenAPI 3.1", content_type = "application/json", body = Object)))]
pub async fn openapi(State(state): State<AppState>) -> Response {
    let mut response = state.openapi.as_str().to_owned().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
