//! Checkpoints, rewinding a session to one, and forking a session.

use agentd_store::CheckpointRecord;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::access_check::{audit, check_new_session};
use super::auth::User;
use super::error::{ApiJson, ApiPath, ApiResult, ErrorBody};
use super::sessions::{SessionView, owned_session, view};
use crate::session::history::{Rewind, Rewound};

#[derive(Debug, Serialize, ToSchema)]
pub struct CheckpointList {
    /// Oldest first.
    pub checkpoints: Vec<CheckpointView>,
}

/// The workspace as it was before a turn first changed it.
#[derive(Debug, Serialize, ToSchema)]
pub struct CheckpointView {
    pub id: String,
    pub turn_id: Option<String>,
    /// Position of the turn's user message: rewinding the history to this
    /// checkpoint removes it and everything after.
    pub message_position: i64,
    /// Paths that changed since the previous checkpoint.
    pub files: Vec<String>,
    /// `files`, `hashed_files`, `new_blobs`, `new_bytes`, `manifest_bytes`, `skipped`.
    #[schema(value_type = Object)]
    pub stats: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

impl From<CheckpointRecord> for CheckpointView {
    fn from(c: CheckpointRecord) -> Self {
        Self {
            id: c.id,
            turn_id: c.turn_id,
            message_position: c.message_position,
            files: c.files,
            stats: c.stats,
            created_at: c.created_at,
        }
    }
}

/// The session's checkpoints.
#[utoipa::path(get, path = "/v1/sessions/{id}/checkpoints", tag = "history",
    params(("id" = String, Path, description = "Session id")),
    responses((status = 200, body = CheckpointList), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_checkpoints(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<CheckpointList>> {
    owned_session(&state, &user, &id).await?;
    let records = state.sessions.checkpoints(&id).await?;
    Ok(Json(CheckpointList {
        checkpoints: records.into_iter().map(CheckpointView::from).collect(),
    }))
}

/// Rewind the workspace files and/or the transcript to a checkpoint.
#[utoipa::path(post, path = "/v1/sessions/{id}/rewind", tag = "history",
    params(("id" = String, Path, description = "Session id")),
    request_body = Rewind,
    responses(
        (status = 200, body = Rewound),
        (status = 400, body = ErrorBody),
        (status = 404, description = "No such session or checkpoint", body = ErrorBody),
        (status = 409, description = "A turn is running", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn rewind(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
    ApiJson(rewind): ApiJson<Rewind>,
) -> ApiResult<Json<Rewound>> {
    let session = owned_session(&state, &user, &id).await?;
    let rewound = state.sessions.rewind(session, rewind).await?;
    let detail = serde_json::json!({
        "checkpoint_id": rewound.checkpoint_id,
        "files_restored": rewound.files_restored.len(),
        "messages_removed": rewound.messages_removed,
    });
    audit(&state, &user, "session.rewind", Some(&id), detail).await;
    Ok(Json(rewound))
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkRequest {
    /// The last message the fork keeps (an id from `GET …/messages`); the
    /// whole transcript when absent.
    pub at_message_id: Option<String>,
}

/// A new session with the transcript up to a message and the workspace as
/// it was at the end of that message's turn.
#[utoipa::path(post, path = "/v1/sessions/{id}/fork", tag = "history",
    params(("id" = String, Path, description = "Session id")),
    request_body = ForkRequest,
    responses(
        (status = 201, description = "The new session", body = SessionView),
        (status = 403, description = "`not_granted` or `quota_exceeded`, as for a new session", body = ErrorBody),
        (status = 404, description = "No such session or message", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn fork(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ForkRequest>,
) -> ApiResult<(StatusCode, Json<SessionView>)> {
    let source = owned_session(&state, &user, &id).await?;
    check_new_session(&state, &user, &source.profile, &source.model).await?;
    let forked = state
        .sessions
        .fork(source, &user.name, body.at_message_id.as_deref())
        .await?;
    let new_id = forked.session.id.clone();
    let detail = serde_json::json!({"from": id, "messages": forked.messages});
    audit(&state, &user, "session.fork", Some(&new_id), detail).await;
    Ok((StatusCode::CREATED, Json(view(&state, forked.session))))
}
