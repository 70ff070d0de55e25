//! Checkpoints, rewinding a session to one, and forking a session.

use std::path::PathBuf;

use agentd_store::{CheckpointRecord, NewSession};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::access_check::{audit, check_new_session};
use super::auth::User;
use super::error::{ApiError, ApiJson, ApiPath, ApiResult, ErrorBody};
use super::files::owner_identity;
use super::sessions::{
    SessionView, idle_in_cluster, new_workspace, owned_session, share_workspace, turn_running,
    view, with_local_workspace,
};
use crate::checkpoints::{copy_workspace, restore_files};
use crate::workspace_owner::hand_over_before_turn;

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
    let records = state.registry.runtime().store.list_checkpoints(&id).await?;
    Ok(Json(CheckpointList {
        checkpoints: records.into_iter().map(CheckpointView::from).collect(),
    }))
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RewindRequest {
    pub checkpoint_id: String,
    /// Restore the workspace files (default true).
    #[serde(default = "yes")]
    pub files: bool,
    /// Remove the checkpoint's turn and everything after it from the
    /// transcript (default true).
    #[serde(default = "yes")]
    pub history: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Rewound {
    pub checkpoint_id: String,
    /// Paths written, recreated or deleted.
    pub files_restored: Vec<String>,
    pub messages_removed: u64,
}

/// Rewind the workspace files and/or the transcript to a checkpoint.
#[utoipa::path(post, path = "/v1/sessions/{id}/rewind", tag = "history",
    params(("id" = String, Path, description = "Session id")),
    request_body = RewindRequest,
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
    ApiJson(body): ApiJson<RewindRequest>,
) -> ApiResult<Json<Rewound>> {
    let session = owned_session(&state, &user, &id).await?;
    if !body.files && !body.history {
        return Err(ApiError::BadRequest(
            "rewind `files`, `history`, or both".into(),
        ));
    }
    let store = state.registry.runtime().store.clone();
    let record = store
        .get_checkpoint(&body.checkpoint_id)
        .await?
        .filter(|c| c.session_id == id)
        .ok_or_else(|| ApiError::NotFound("no checkpoint with this id in this session".into()))?;
    // Nothing may run while the session is rewound.
    idle_in_cluster(&state, &id).await?;
    let _exclusive = state
        .registry
        .begin_delete(&id)
        .await
        .ok_or_else(turn_running)?;
    let files_restored = if body.files {
        let session = with_local_workspace(&state, session).await?;
        let identity = owner_identity(&state, &session.owner).await?;
        let workspace = PathBuf::from(&session.workspace);
        // Restored as the agent's user: the workspace must be theirs first.
        if let Some(identity) = identity {
            let data_dir = &state.registry.runtime().data_dir;
            hand_over_before_turn(&id, &workspace, data_dir, identity)
                .await
                .map_err(|err| ApiError::Internal(err.to_string()))?;
        }
        let restored = restore_files(&store, &record, &workspace, identity)
            .await
            .map_err(|err| ApiError::Internal(format!("restoring the files: {err}")))?;
        share_workspace(&state, &id).await?;
        restored
    } else {
        Vec::new()
    };
    let messages_removed = if body.history {
        store.truncate_history(&id, record.message_position).await?
    } else {
        0
    };
    tracing::info!(session_id = %id, checkpoint = %record.id, files = files_restored.len(), messages_removed, "rewound");
    let detail = serde_json::json!({
        "checkpoint_id": record.id,
        "files_restored": files_restored.len(),
        "messages_removed": messages_removed,
    });
    audit(&state, &user, "session.rewind", Some(&id), detail).await;
    Ok(Json(Rewound {
        checkpoint_id: record.id,
        files_restored,
        messages_removed,
    }))
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
    let source = with_local_workspace(&state, source).await?;
    let store = state.registry.runtime().store.clone();
    let messages = store.messages(&id).await?;
    let last = match &body.at_message_id {
        Some(message_id) => messages
            .iter()
            .position(|m| &m.id == message_id)
            .ok_or_else(|| ApiError::NotFound("no message with this id in this session".into()))?,
        None => messages.len().saturating_sub(1),
    };
    let kept = &messages[..(last + 1).min(messages.len())];
    let end = kept.last().map_or(0, |m| m.position as i64);
    // The workspace as it was then: the state before the first later turn
    // that changed files, or, when none did, as it is now.
    let later = store
        .list_checkpoints(&id)
        .await?
        .into_iter()
        .find(|c| c.message_position > end);
    // Whom the copy is written as, before a workspace exists to clean up.
    let identity = owner_identity(&state, &user.name).await?;
    let new_id = uuid::Uuid::now_v7().to_string();
    let workspace = new_workspace(&state, &new_id).await?;
    let copied = async {
        // Written as the agent's user: the new workspace is theirs first.
        if let Some(identity) = identity {
            let data_dir = &state.registry.runtime().data_dir;
            hand_over_before_turn(&new_id, &workspace, data_dir, identity)
                .await
                .map_err(|err| err.to_string())?;
        }
        let source = PathBuf::from(&source.workspace);
        copy_workspace(&store, &source, &workspace, later.as_ref(), identity)
            .await
            .map_err(|err| err.to_string())
    }
    .await;
    if let Err(err) = copied {
        let _ = tokio::fs::remove_dir_all(&workspace).await;
        return Err(ApiError::Internal(format!("copying the workspace: {err}")));
    }
    let title = format!("Fork of {}", source.title.as_deref().unwrap_or(&source.id));
    let created = store
        .create_session(NewSession {
            id: Some(new_id.clone()),
            owner: user.name.clone(),
            title: Some(title.chars().take(200).collect()),
            workspace: workspace.display().to_string(),
            model: source.model.clone(),
            profile: source.profile.clone(),
        })
        .await;
    let session = match created {
        Ok(session) => session,
        Err(err) => {
            let _ = tokio::fs::remove_dir_all(&workspace).await;
            return Err(err.into());
        }
    };
    for message in kept {
        store
            .append_message(&new_id, message.turn_id.as_deref(), &message.message)
            .await?;
    }
    share_workspace(&state, &new_id).await?;
    tracing::info!(from = %id, session_id = %new_id, messages = kept.len(), "forked");
    let detail = serde_json::json!({"from": id, "messages": kept.len()});
    audit(&state, &user, "session.fork", Some(&new_id), detail).await;
    Ok((StatusCode::CREATED, Json(view(&state, session))))
}
