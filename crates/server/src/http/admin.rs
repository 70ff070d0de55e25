//! `/v1/usage` (the caller's own) and the admin routes under `/v1/admin`:
//! users with their grants and usage, changing flags and grants, the audit
//! log, and per-user metrics (kept off the unauthenticated `/metrics`).

use agentd_store::{AuditQuery, AuditRecord, GrantKind};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::auth::User;
use super::error::{ApiError, ApiJson, ApiPath, ApiQuery, ApiResult, ErrorBody};
use crate::access::{AdminError, UsageReport, UserView};
use crate::session::SessionError;

const DEFAULT_AUDIT_PAGE: u32 = 100;
const MAX_AUDIT_PAGE: u32 = 1000;

pub(super) fn admin(user: &User) -> ApiResult<()> {
    if user.is_admin {
        Ok(())
    } else {
        Err(ApiError::AdminOnly)
    }
}

impl From<AdminError> for ApiError {
    fn from(err: AdminError) -> Self {
        match err {
            AdminError::Invalid(message) => ApiError::BadRequest(message),
            AdminError::Store(err) => err.into(),
        }
    }
}

/// The caller's usage against their quotas.
#[utoipa::path(get, path = "/v1/usage", tag = "server",
    responses((status = 200, body = UsageReport), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn usage(State(state): State<AppState>, user: User) -> ApiResult<Json<UsageReport>> {
    let report = state
        .registry
        .runtime()
        .access()
        .usage_report(&user.name)
        .await?;
    Ok(Json(report))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UserList {
    pub users: Vec<UserView>,
}

/// Every user with a row, a grant or an admin entry: flags, grants, usage.
#[utoipa::path(get, path = "/v1/admin/users", tag = "admin",
    responses((status = 200, body = UserList), (status = 401, body = ErrorBody),
        (status = 403, description = "`admin_only`", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_users(State(state): State<AppState>, user: User) -> ApiResult<Json<UserList>> {
    admin(&user)?;
    let users = state.registry.runtime().access().user_views().await?;
    Ok(Json(UserList { users }))
}

/// One user (also one without a row: a proxy's user).
#[utoipa::path(get, path = "/v1/admin/users/{name}", tag = "admin",
    params(("name" = String, Path, description = "User name")),
    responses((status = 200, body = UserView), (status = 401, body = ErrorBody),
        (status = 403, description = "`admin_only`", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_user(
    State(state): State<AppState>,
    user: User,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<UserView>> {
    admin(&user)?;
    if !crate::http::auth::valid_user_name(&name) {
        return Err(ApiError::BadRequest(format!("invalid user name {name:?}")));
    }
    let view = state.registry.runtime().access().user_view(&name).await?;
    Ok(Json(view))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UserChange {
    /// Make the user an admin, or not.
    pub is_admin: Option<bool>,
    /// Disable the user (their tokens stop working), or enable them again.
    pub disabled: Option<bool>,
}

/// Make a user an admin or not, disable or enable them.
#[utoipa::path(patch, path = "/v1/admin/users/{name}", tag = "admin",
    params(("name" = String, Path, description = "User name")),
    request_body = UserChange,
    responses((status = 200, body = UserView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "`admin_only`", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn update_user(
    State(state): State<AppState>,
    user: User,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<UserChange>,
) -> ApiResult<Json<UserView>> {
    admin(&user)?;
    if name == user.name && (body.is_admin == Some(false) || body.disabled == Some(true)) {
        return Err(ApiError::BadRequest(
            "an admin cannot demote or disable themselves; ask another admin".into(),
        ));
    }
    let runtime = state.registry.runtime();
    let view = runtime
        .access()
        .set_user_flags(&user.name, &name, body.is_admin, body.disabled)
        .await?;
    if body.disabled == Some(true) {
        interrupt_turns_of(&state, &name).await?;
    }
    Ok(Json(view))
}

/// A disabled user's running turns stop (queued ones are refused when they
/// would start; see `worker::still_allowed`).
async fn interrupt_turns_of(state: &AppState, name: &str) -> ApiResult<()> {
    const PAGE: u32 = 200;
    let mut cursor: Option<String> = None;
    loop {
        let page = state.sessions.list(name, cursor.as_deref(), PAGE).await?;
        for session in &page {
            match state.sessions.interrupt(&session.id).await {
                Ok(_) | Err(SessionError::NoTurnRunning) => {}
                Err(err) => return Err(err.into()),
            }
        }
        match page.last() {
            Some(last) if page.len() == PAGE as usize => cursor = Some(last.id.clone()),
            _ => return Ok(()),
        }
    }
}

/// What a grant gives.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum GrantWhat {
    Profile,
    Model,
}

impl From<GrantWhat> for GrantKind {
    fn from(what: GrantWhat) -> Self {
        match what {
            GrantWhat::Profile => GrantKind::Profile,
            GrantWhat::Model => GrantKind::Model,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantRequest {
    pub kind: GrantWhat,
    /// A profile of the config, or a model of `GET /v1/models`.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    pub name: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GrantChanged {
    /// `false` when it was already so.
    pub changed: bool,
    pub user: UserView,
}

/// Grant a user a profile or model beyond the defaults.
#[utoipa::path(post, path = "/v1/admin/users/{name}/grants", tag = "admin",
    params(("name" = String, Path, description = "User name")),
    request_body = GrantRequest,
    responses((status = 200, body = GrantChanged), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "`admin_only`", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn add_grant(
    State(state): State<AppState>,
    user: User,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<GrantRequest>,
) -> ApiResult<Json<GrantChanged>> {
    change_grant(&state, &user, &name, body.kind.into(), &body.name, true).await
}

/// Take a grant back: the user's next turn with it is refused.
#[utoipa::path(delete, path = "/v1/admin/users/{name}/grants/{kind}/{grant}", tag = "admin",
    params(("name" = String, Path, description = "User name"),
           ("kind" = GrantWhat, Path, description = "`profile` or `model`"),
           ("grant" = String, Path, description = "The profile or model")),
    responses((status = 200, body = GrantChanged), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "`admin_only`", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn remove_grant(
    State(state): State<AppState>,
    user: User,
    ApiPath((name, kind, grant)): ApiPath<(String, GrantWhat, String)>,
) -> ApiResult<Json<GrantChanged>> {
    change_grant(&state, &user, &name, kind.into(), &grant, false).await
}

async fn change_grant(
    state: &AppState,
    user: &User,
    name: &str,
    kind: GrantKind,
    grant: &str,
    granted: bool,
) -> ApiResult<Json<GrantChanged>> {
    admin(user)?;
    let runtime = state.registry.runtime();
    let changed = runtime
        .access()
        .set_grant(&user.name, name, kind, grant, granted)
        .await?;
    let user = runtime.access().user_view(name).await?;
    Ok(Json(GrantChanged { changed, user }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    /// Entries after this id (`next_after` of the previous page).
    #[param(nullable = false)]
    pub after: Option<i64>,
    /// Entries per page, 1–1000 (default 100).
    #[param(minimum = 1, maximum = 1000, nullable = false)]
    pub limit: Option<u32>,
    /// Only this actor's.
    #[param(nullable = false, pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$")]
    pub actor: Option<String>,
    /// Only this action (`session.create`, `grant.add`, …).
    #[param(nullable = false, pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$")]
    pub action: Option<String>,
    /// Only entries at or after this time (RFC 3339).
    #[param(nullable = false)]
    pub since: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AuditPage {
    #[schema(value_type = Vec<Object>)]
    pub entries: Vec<AuditRecord>,
    /// Pass as `after` for the next page; `null` on the last.
    pub next_after: Option<i64>,
}

/// The audit log, oldest first: who did what, when.
#[utoipa::path(get, path = "/v1/admin/audit", tag = "admin",
    params(AuditParams),
    responses((status = 200, body = AuditPage), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "`admin_only`", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn audit_log(
    State(state): State<AppState>,
    user: User,
    ApiQuery(params): ApiQuery<AuditParams>,
) -> ApiResult<Json<AuditPage>> {
    admin(&user)?;
    let limit = params.limit.unwrap_or(DEFAULT_AUDIT_PAGE);
    if !(1..=MAX_AUDIT_PAGE).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "limit must be 1 to {MAX_AUDIT_PAGE}"
        )));
    }
    let filters = [&params.actor, &params.action];
    if filters.iter().any(|f| {
        f.as_deref()
            .is_some_and(|f| f.chars().any(char::is_control))
    }) {
        return Err(ApiError::BadRequest(
            "actor and action have no control characters".into(),
        ));
    }
    let query = AuditQuery {
        after: params.after,
        limit,
        actor: params.actor,
        action: params.action,
        since: params.since,
    };
    let entries = state.registry.runtime().access().audit_log(&query).await?;
    let next_after = (entries.len() == limit as usize)
        .then(|| entries.last().map(|e| e.id))
        .flatten();
    Ok(Json(AuditPage {
        entries,
        next_after,
    }))
}

/// Per-user series (turns, spend, refusals) in the Prometheus text format.
#[utoipa::path(get, path = "/v1/admin/metrics", tag = "admin",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain", body = String),
        (status = 401, body = ErrorBody),
        (status = 403, description = "`admin_only`", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn user_metrics(user: User) -> ApiResult<Response> {
    admin(&user)?;
    let mut text = String::new();
    crate::access::metrics::render(&mut text);
    let mut response = (StatusCode::OK, text).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    Ok(response)
}
