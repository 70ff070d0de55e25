//! `/v1/sessions` and `/v1/sessions/{id}`: create, list, read, rename, delete.

use agentd_store::{SessionRecord, SessionStatus, SessionUpdate};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::access_check::{audit, check_choice, check_new_session};
use super::auth::User;
use super::error::{ApiError, ApiJson, ApiPath, ApiResult, ErrorBody};
use super::session_list::{Tag, check_tags};
use crate::config::{MountSpec, ProjectToml, Thinking};
use crate::models::resolve_model;
use crate::session::lifecycle::SessionSpec;

const MAX_TITLE_CHARS: usize = 200;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    /// A profile of `GET /v1/profiles`; `default` when omitted.
    pub profile: Option<String>,
    /// A model of `GET /v1/models` (or `provider:name`); the default when omitted.
    pub model: Option<String>,
    /// 1–200 characters, not all blank (stored trimmed).
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub title: Option<String>,
    /// Work in this existing directory (absolute, inside one of the
    /// caller's `[workspaces] roots`) instead of a new empty one. agentd
    /// never deletes it.
    #[schema(min_length = 1)]
    pub workspace: Option<String>,
    /// Work in a configured project's directory (`GET /v1/projects`), on its
    /// profile, with its greeting.
    #[schema(min_length = 1)]
    pub project: Option<String>,
    /// Host directories to mount into the session's sandbox; each `host`
    /// must lie in one of the caller's mountable roots (`[mounts] allowed`,
    /// `[users.NAME] mountable`), else `403 forbidden`.
    #[serde(default)]
    pub mounts: Vec<MountSpec>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateSession {
    /// 1–200 characters, not all blank (stored trimmed).
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub title: Option<String>,
    /// The model of the session's next turns: a name from `GET /v1/models`
    /// (or `provider:name`) the caller may use with the session's profile.
    #[schema(min_length = 1)]
    pub model: Option<String>,
    /// The session's own extended-thinking budget, winning over its
    /// profile's and its model's; `null` goes back to theirs.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Thinking>, nullable = true)]
    pub thinking: Option<Option<Thinking>>,
    /// Pinned sessions are listed first.
    pub pinned: Option<bool>,
    /// Archived sessions are left out of lists unless asked for.
    pub archived: Option<bool>,
    /// Replaces the session's tags (duplicates dropped).
    #[schema(max_items = 20)]
    pub tags: Option<Vec<Tag>>,
}

/// A field given as `null` is `Some(None)`; an absent one (`default`) `None`.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionView {
    pub id: String,
    pub title: Option<String>,
    /// `idle`, `running` or `waiting` (for a permission or an answer).
    pub status: String,
    pub model: String,
    pub profile: String,
    /// The session's own thinking budget (`PATCH`); `null`: its profile's
    /// or its model's, if any.
    pub thinking: Option<Thinking>,
    /// What its turns think with while `thinking` is `null`: its profile's
    /// budget, else its model's; `null` when neither has one (no thinking).
    pub default_thinking: Option<Thinking>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub totals: Totals,
    /// The `seq` of the newest event (0 when none).
    pub last_seq: u64,
    pub running_turn_id: Option<String>,
    /// Turns accepted with `queue: true`, waiting for the running one.
    pub queued_turns: usize,
    /// Background commands (`Bash` with `run_in_background`) running on
    /// this server, oldest first.
    pub background: Vec<BackgroundCommand>,
    /// Listed first.
    pub pinned: bool,
    /// Left out of lists unless asked for.
    pub archived: bool,
    pub tags: Vec<String>,
    /// With `q` in a list: words around the best match (plain text; the
    /// words matched are not marked).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub snippet: Option<String>,
}

/// A background command of a session.
#[derive(Debug, Serialize, ToSchema)]
pub struct BackgroundCommand {
    /// What `BashOutput` and `KillShell` take, e.g. `bash_12`.
    pub id: String,
    pub command: String,
    /// `running` (ended commands are not listed).
    pub status: String,
    pub started_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Totals {
    pub turns: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub cost_usd: f64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionView>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

pub(super) fn view(state: &AppState, session: SessionRecord) -> SessionView {
    let live = state.sessions.live_status(&session);
    let session_id = session.id.clone();
    let config = &state.registry.runtime().config;
    let default_thinking = config
        .profiles
        .get(&session.profile)
        .and_then(|profile| profile.thinking)
        .or_else(|| {
            crate::models::configured_thinking(config, &session.model)
                .map(|budget_tokens| Thinking { budget_tokens })
        });
    SessionView {
        id: session.id,
        title: session.title,
        status: live.status.as_str().to_string(),
        model: session.model,
        profile: session.profile,
        thinking: session
            .thinking_budget
            .map(|budget_tokens| Thinking { budget_tokens }),
        default_thinking,
        created_at: session.created_at,
        updated_at: session.updated_at,
        totals: Totals {
            turns: session.turns,
            input_tokens: session.usage.input_tokens,
            output_tokens: session.usage.output_tokens,
            cache_read_tokens: session.usage.cache_read_tokens,
            cache_write_tokens: session.usage.cache_write_tokens,
            cost_usd: session.cost_usd,
        },
        last_seq: session.last_seq,
        running_turn_id: live.running_turn,
        queued_turns: live.queued,
        background: background(state, &session_id),
        pinned: session.pinned,
        archived: session.archived,
        tags: session.tags,
        snippet: None,
    }
}

fn background(state: &AppState, session_id: &str) -> Vec<BackgroundCommand> {
    let running = state.registry.runtime().background.running(session_id);
    running
        .into_iter()
        .map(|shell| BackgroundCommand {
            id: shell.id,
            command: shell.command,
            status: shell.status.as_str().to_string(),
            started_at: shell.started_at.into(),
        })
        .collect()
}

/// The session if `user` owns it; 404 otherwise, whether it exists or not.
pub(super) async fn owned_session(
    state: &AppState,
    user: &User,
    id: &str,
) -> ApiResult<SessionRecord> {
    Ok(state.sessions.owned(&user.name, id).await?)
}

/// As the schema says: at most 200 characters as sent, not all blank.
fn check_title(title: &str) -> ApiResult<String> {
    if title.trim().is_empty() || title.chars().count() > MAX_TITLE_CHARS {
        return Err(ApiError::BadRequest(format!(
            "title must be 1 to {MAX_TITLE_CHARS} characters"
        )));
    }
    Ok(title.trim().to_string())
}

/// Create a session with its own empty workspace, or on an existing
/// directory (`workspace`) or a project's (`project`).
#[utoipa::path(post, path = "/v1/sessions", tag = "sessions",
    request_body = CreateSession,
    responses(
        (status = 201, description = "Created", body = SessionView),
        (status = 200, description = "The caller's session on a `single_session` project, which exists", body = SessionView),
        (status = 400, description = "Unknown profile, model or project, bad field, no such directory", body = ErrorBody),
        (status = 401, description = "Not authenticated", body = ErrorBody),
        (status = 403, description = "`not_granted`: the profile or model is not the caller's to choose; \
            `quota_exceeded`: stored sessions or workspace bytes at the caller's quota; \
            `forbidden`: the workspace or a mount's host is not under the caller's roots", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn create_session(
    State(state): State<AppState>,
    user: User,
    ApiJson(body): ApiJson<CreateSession>,
) -> ApiResult<impl IntoResponse> {
    let runtime = state.registry.runtime();
    let project = project_of(&state, &body)?;
    let profile = match (
        project.as_ref().and_then(|p| p.profile.clone()),
        body.profile,
    ) {
        (Some(theirs), Some(asked)) if theirs != asked => {
            return Err(ApiError::BadRequest(format!(
                "project {:?} runs on profile {theirs:?}",
                body.project.unwrap_or_default()
            )));
        }
        (theirs, asked) => theirs.or(asked).unwrap_or_else(|| "default".into()),
    };
    runtime
        .config
        .profile(&profile)
        .map_err(|err| ApiError::BadRequest(err.to_string()))?;
    let env = state.registry.env().clone();
    let lookup = move |key: &str| env.get(key).cloned();
    let model = resolve_model(&runtime.config, body.model.as_deref(), &lookup)
        .map_err(|err| ApiError::BadRequest(err.to_string()))?;
    let title = body.title.as_deref().map(check_title).transpose()?;
    let workspace = match (&project, &body.workspace) {
        (Some(project), _) => Some(state.sessions.project_directory(project).await?),
        (None, Some(raw)) => Some(state.sessions.chosen_directory(&user.name, raw).await?),
        (None, None) => None,
    };
    // One at a time per user, so that two asks make one single session.
    let single = project.as_ref().is_some_and(|p| p.single_session);
    let _one_at_a_time = match single {
        true => Some(state.registry.admissions().serialize(&user.name).await),
        false => None,
    };
    if let (true, Some(dir)) = (single, &workspace)
        && let Some(existing) = state.sessions.session_on(&user.name, dir, &profile).await?
    {
        return Ok((StatusCode::OK, Json(view(&state, existing))));
    }
    check_new_session(&state, &user, &profile, &model.spec).await?;
    let mounts = state
        .sessions
        .checked_mounts(&user.name, body.mounts)
        .await?;
    let spec = SessionSpec {
        owner: user.name.clone(),
        profile,
        model: model.spec,
        title: title.or_else(|| project.as_ref().map(|p| p.name.clone())),
        workspace,
        greeting: project.and_then(|p| p.greeting),
        mounts,
    };
    let session = state.sessions.create(spec).await?;
    let detail = serde_json::json!({
        "profile": session.profile,
        "model": session.model,
        "project": body.project,
        "workspace": body.workspace.is_some().then_some(&session.workspace),
    });
    audit(&state, &user, "session.create", Some(&session.id), detail).await;
    Ok((StatusCode::CREATED, Json(view(&state, session))))
}

/// The project `body` names, if any; not with a `workspace` too.
fn project_of(state: &AppState, body: &CreateSession) -> ApiResult<Option<ProjectToml>> {
    let Some(name) = &body.project else {
        return Ok(None);
    };
    if body.workspace.is_some() {
        return Err(ApiError::BadRequest(
            "give `workspace` or `project`, not both".into(),
        ));
    }
    let config = &state.registry.runtime().config;
    let project = config.project(name).cloned();
    project
        .map(Some)
        .ok_or_else(|| ApiError::BadRequest(format!("no project named {name:?}")))
}

/// One session, with its live status and totals.
#[utoipa::path(get, path = "/v1/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, body = SessionView),
        (status = 404, description = "No such session of yours", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn get_session(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<SessionView>> {
    let mut session = owned_session(&state, &user, &id).await?;
    // A record busy beside an idle live status is older than the turn's
    // end: read again, after that end is recorded if the turn is finishing
    // (it shows as over from its `turn.finished`), so a client that waits
    // for `idle` sees the turn's totals. A second at most.
    for _ in 0..100 {
        let idle = state.sessions.live_status(&session).status == SessionStatus::Idle;
        if !idle || session.status == SessionStatus::Idle {
            break;
        }
        let finishing = state.registry.live_state(&id).finishing;
        if finishing {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        session = owned_session(&state, &user, &id).await?;
        if !finishing {
            break;
        }
    }
    Ok(Json(view(&state, session)))
}

/// Rename a session, change the model or thinking budget of its next turns,
/// pin or archive it, or set its tags.
#[utoipa::path(patch, path = "/v1/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    request_body = UpdateSession,
    responses(
        (status = 200, body = SessionView),
        (status = 400, description = "A bad title, an empty or unknown model, a thinking budget \
            out of 1024–1000000, a bad tag or more than 20", body = ErrorBody),
        (status = 403, description = "`not_granted`: the model is not the caller's to choose", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn update_session(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<UpdateSession>,
) -> ApiResult<Json<SessionView>> {
    let mut session = owned_session(&state, &user, &id).await?;
    // Checked before anything changes: a bad title changes no model. An
    // empty body changes nothing.
    let title = body.title.as_deref().map(check_title).transpose()?;
    if body
        .model
        .as_deref()
        .is_some_and(|model| model.trim().is_empty())
    {
        return Err(ApiError::BadRequest("`model` must name a model".into()));
    }
    if let Some(Some(thinking)) = body.thinking {
        thinking.check().map_err(ApiError::BadRequest)?;
    }
    let tags = body.tags.as_deref().map(check_tags).transpose()?;
    let mut update = SessionUpdate {
        title,
        thinking_budget: body.thinking.map(|t| t.map(|t| t.budget_tokens)),
        pinned: body.pinned,
        archived: body.archived,
        tags,
        ..SessionUpdate::default()
    };
    if let Some(model) = &body.model {
        let runtime = state.registry.runtime();
        let env = state.registry.env().clone();
        let lookup = move |key: &str| env.get(key).cloned();
        let model = resolve_model(&runtime.config, Some(model), &lookup)
            .map_err(|err| ApiError::BadRequest(err.to_string()))?;
        check_choice(&state, &user, &session.profile, &model.spec).await?;
        update.model = Some(model.spec);
    }
    // An empty body changes nothing, not even `updated_at`.
    if update != SessionUpdate::default() {
        session = state.sessions.update(&id, update).await?;
    }
    Ok(Json(view(&state, session)))
}

/// Delete a session: its transcript, events and (for sessions created over
/// HTTP) its workspace. Refused with 409 while a turn runs or waits: interrupt
/// it first.
#[utoipa::path(delete, path = "/v1/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, body = ErrorBody),
        (status = 409, description = "A turn is running or queued", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn delete_session(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    let session = owned_session(&state, &user, &id).await?;
    state.sessions.delete(session).await?;
    audit(
        &state,
        &user,
        "session.delete",
        Some(&id),
        serde_json::json!({}),
    )
    .await;
    Ok(StatusCode::NO_CONTENT)
}
