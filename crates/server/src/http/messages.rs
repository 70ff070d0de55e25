//! Sending messages (each starts a turn owned by the server), the transcript,
//! and interrupting.

use agentd_policy::permissions::PermissionMode;
use agentd_store::SessionRecord;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::AppState;
use super::access_check::check_turn;
use super::attachments::{MessageContentDoc, to_content_blocks};
use super::auth::User;
use super::error::{ApiError, ApiJson, ApiPath, ApiResult, ErrorBody};
use super::sessions::owned_session;
use crate::admission::Caller;
use crate::content::check_content;
use crate::registry::{Accepted, Submission, TurnKind};

pub(super) const MAX_REQUEST_ID_CHARS: usize = 200;

/// Largest body of `POST …/messages`: room for several images in base64.
pub const MESSAGE_BODY_LIMIT: usize = 32 * 1024 * 1024;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessage {
    /// The user's message: its text (not all blank), or content blocks in
    /// Anthropic's shapes (text, images, documents).
    #[schema(value_type = MessageContentDoc)]
    pub content: Value,
    /// Extended thinking for this turn only, over the profile's and the
    /// model's (Anthropic models).
    pub thinking: Option<crate::config::Thinking>,
    /// The permission mode for this turn only (agentd's names or Claude
    /// Code's): as strict as the session profile's mode or stricter, never
    /// looser (`403`). Strictest first: `read_only`/`plan` and
    /// `dont_ask`/`dontAsk`, then `default`, `accept_edits`/`acceptEdits`,
    /// `bypass`/`bypassPermissions`.
    #[schema(value_type = Option<PermissionModeName>)]
    pub permission_mode: Option<String>,
    /// 1–200 characters. Makes retries safe: the same id in this session answers with the
    /// turn it started the first time, and starts nothing.
    #[schema(min_length = 1, max_length = 200)]
    pub client_request_id: Option<String>,
    /// Run after the running turn instead of answering 409.
    #[serde(default)]
    pub queue: bool,
}

/// A permission mode's spellings, for the OpenAPI document only (the
/// handler reads them with `PermissionMode::parse`).
#[derive(ToSchema)]
#[allow(dead_code, non_camel_case_types, clippy::enum_variant_names)]
pub enum PermissionModeName {
    default,
    accept_edits,
    acceptEdits,
    read_only,
    plan,
    bypass,
    bypassPermissions,
    dont_ask,
    dontAsk,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TurnAccepted {
    pub turn_id: String,
    /// `started`, `queued`, or `duplicate` (an earlier request with this
    /// `client_request_id` made the turn).
    pub state: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Transcript {
    /// In order.
    #[schema(value_type = Vec<TranscriptMessage>)]
    pub messages: Vec<Value>,
}

/// One message of the transcript (the store's `StoredMessage`), for the
/// OpenAPI document only.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct TranscriptMessage {
    id: String,
    session_id: String,
    turn_id: Option<String>,
    /// 1, 2, 3, … within the session.
    position: u64,
    message: agentd_protocol::Message,
    created_at: chrono::DateTime<chrono::Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Interrupted {
    pub turn_id: String,
}

/// Send a message: the turn starts at once in the background (the response
/// does not wait for it); watch it on `GET …/events`.
#[utoipa::path(post, path = "/v1/sessions/{id}/messages", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    request_body = SendMessage,
    responses(
        (status = 202, description = "Accepted; the turn runs", body = TurnAccepted),
        (status = 400, body = ErrorBody),
        (status = 403, description = "`not_granted`: the session's profile or model is no longer the caller's; \
            `quota_exceeded`: spend or workspace bytes at the caller's quota; \
            `forbidden`: a `permission_mode` looser than the profile's", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, description = "`rate_limited`: turns at once or per hour at the caller's limit; \
            see `Retry-After`", body = ErrorBody),
        (status = 409, description = "A turn is running (and `queue` was not set)", body = ErrorBody),
        (status = 413, description = "Body over 32 MiB, or an image over 5 MiB", body = ErrorBody),
        (status = 503, description = "`shutting_down`: the server is stopping; \
            `store_unavailable`: the database is down", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn post_message(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<SendMessage>,
) -> ApiResult<(StatusCode, Json<TurnAccepted>)> {
    let session = owned_session(&state, &user, &id).await?;
    let blocks = check_content(body.content)?;
    let thinking = body.thinking.map(|t| t.check()).transpose();
    let thinking_budget = thinking
        .map_err(ApiError::BadRequest)?
        .map(|t| t.budget_tokens);
    if let Some(request_id) = &body.client_request_id
        && (request_id.is_empty() || request_id.chars().count() > MAX_REQUEST_ID_CHARS)
    {
        return Err(ApiError::BadRequest(format!(
            "client_request_id must be 1 to {MAX_REQUEST_ID_CHARS} characters"
        )));
    }
    let mode = turn_mode(&state, &session, body.permission_mode.as_deref())?;
    let content = to_content_blocks(&state, &session, blocks).await?;
    let kind = TurnKind::from_blocks(content, thinking_budget).with_permission_mode(mode);
    submit_turn(
        &state,
        &user,
        session,
        kind,
        body.client_request_id,
        body.queue,
    )
    .await
}

/// The mode a message asks for its turn, read and checked: never looser
/// than the profile's (a user must not step out of their profile).
fn turn_mode(
    state: &AppState,
    session: &SessionRecord,
    asked: Option<&str>,
) -> ApiResult<Option<PermissionMode>> {
    let Some(asked) = asked else {
        return Ok(None);
    };
    let mode = PermissionMode::parse(asked).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "unknown permission_mode {asked:?}: use default, accept_edits, read_only, \
             bypass or dont_ask (or acceptEdits, plan, bypassPermissions, dontAsk)"
        ))
    })?;
    let config = &state.registry.runtime().config;
    // A profile no longer configured is refused by the turn's access check.
    if let Ok(profile) = config.profile(&session.profile)
        && mode.is_looser_than(profile.mode)
    {
        return Err(ApiError::Forbidden(format!(
            "permission_mode {} is looser than the {:?} profile's {}: choose it or a stricter one",
            mode.name(),
            session.profile,
            profile.mode.name()
        )));
    }
    Ok(Some(mode))
}

/// Accept a turn of the caller's `session`, after the access checks.
pub(super) async fn submit_turn(
    state: &AppState,
    user: &User,
    session: SessionRecord,
    kind: TurnKind,
    client_request_id: Option<String>,
    queue: bool,
) -> ApiResult<(StatusCode, Json<TurnAccepted>)> {
    // A retry of an accepted request answers with its turn, whatever the
    // quotas say now.
    let _admission = state.registry.admissions().serialize(&user.name).await;
    let duplicate = match &client_request_id {
        Some(request_id) => state.sessions.is_retry(&session.id, request_id).await?,
        None => false,
    };
    if !duplicate {
        check_turn(state, user, &session).await?;
    }
    let submission = Submission {
        kind,
        client_request_id,
        queue,
        by: Some(Caller {
            name: user.name.clone(),
            is_admin: user.is_admin,
        }),
    };
    let accepted = state.sessions.submit(&session, submission).await?;
    if !matches!(accepted, Accepted::Duplicate(_)) {
        crate::access::metrics::turn_started(&user.name);
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(TurnAccepted {
            turn_id: accepted.turn_id().to_string(),
            state: accepted.as_str().to_string(),
        }),
    ))
}

/// Compact the session's context now: a turn of its own (like sending
/// `/compact`) that ends with a `compaction` event; the transcript stays whole.
#[utoipa::path(post, path = "/v1/sessions/{id}/compact", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 202, description = "Accepted; the compaction runs as a turn", body = TurnAccepted),
        (status = 403, description = "`not_granted` or `quota_exceeded`, as for a message", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, description = "`rate_limited`, as for a message; see `Retry-After`", body = ErrorBody),
        (status = 409, description = "A turn is running", body = ErrorBody),
        (status = 503, description = "`shutting_down`: the server is stopping; \
            `store_unavailable`: the database is down", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn compact(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<(StatusCode, Json<TurnAccepted>)> {
    let session = owned_session(&state, &user, &id).await?;
    submit_turn(&state, &user, session, TurnKind::Compact, None, false).await
}

/// The transcript: every message, lossless (text, thinking, tool calls and
/// results).
#[utoipa::path(get, path = "/v1/sessions/{id}/messages", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, body = Transcript),
        (status = 404, body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn list_messages(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Transcript>> {
    owned_session(&state, &user, &id).await?;
    let messages = state.sessions.messages(&id).await?;
    let messages = messages
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| ApiError::Internal(err.to_string()))?;
    Ok(Json(Transcript { messages }))
}

/// Stop the running turn: it ends as `interrupted` (model stream dropped,
/// tool processes killed). Queued turns still run after it.
#[utoipa::path(post, path = "/v1/sessions/{id}/interrupt", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 202, description = "Interrupting; `turn.finished` follows", body = Interrupted),
        (status = 404, body = ErrorBody),
        (status = 409, description = "No turn is running", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn interrupt(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<(StatusCode, Json<Interrupted>)> {
    owned_session(&state, &user, &id).await?;
    let turn_id = state.sessions.interrupt(&id).await?;
    Ok((StatusCode::ACCEPTED, Json(Interrupted { turn_id })))
}
