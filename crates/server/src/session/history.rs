//! Rewinding a session to a checkpoint (its files, its transcript, or both)
//! and forking it into a new session at a message.

use agentd_store::{NewSession, SessionRecord, SessionUpdate};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{SessionError, SessionResult, SessionService};
use crate::checkpoints::{Reading, copy_workspace, restore_files};
use crate::workspace_owner::hand_over_before_turn;

/// What a rewind does (also the body of `POST …/rewind`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rewind {
    pub checkpoint_id: String,
    /// Restore the workspace files (default true).
    #[serde(default = "yes")]
    pub files: bool,
    /// Remove the checkpoint's turn and everything after it from the
    /// transcript (default true).
    #[serde(default = "yes")]
    pub history: bool,
}

fn yes() -> bool {
    true
}

/// What a rewind did.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Rewound {
    pub checkpoint_id: String,
    /// Paths written, recreated or deleted.
    pub files_restored: Vec<String>,
    pub messages_removed: u64,
}

/// A fork: the new session and how many messages it got.
pub struct Forked {
    pub session: SessionRecord,
    pub messages: usize,
}

impl SessionService {
    /// Rewind the workspace files and/or the transcript to a checkpoint of
    /// the session. Refused while a turn runs or waits.
    pub async fn rewind(&self, session: SessionRecord, rewind: Rewind) -> SessionResult<Rewound> {
        if !rewind.files && !rewind.history {
            return Err(SessionError::Invalid(
                "rewind `files`, `history`, or both".into(),
            ));
        }
        let id = session.id.clone();
        let store = self.registry.runtime().store.clone();
        let record = store
            .get_checkpoint(&rewind.checkpoint_id)
            .await?
            .filter(|c| c.session_id == id)
            .ok_or_else(|| {
                SessionError::Missing("no checkpoint with this id in this session".into())
            })?;
        // Nothing may run while the session is rewound.
        self.idle_everywhere(&id).await?;
        let _exclusive = self.registry.begin_delete(&id).await?;
        let files_restored = if rewind.files {
            // Restored as the agent's user: the workspace is theirs first,
            // or (an existing directory) written only as far as they may.
            let (workspace, identity) = self.workspace_for_work(session).await?;
            // In an existing directory, what others own stays as it is.
            let keep_others = workspace.existing;
            let restored = restore_files(&store, &record, workspace.root, identity, keep_others)
                .await
                .map_err(|err| SessionError::Internal(format!("restoring the files: {err}")))?;
            self.share_workspace(&id).await?;
            restored
        } else {
            Vec::new()
        };
        let messages_removed = if rewind.history {
            store.truncate_history(&id, record.message_position).await?
        } else {
            0
        };
        tracing::info!(session_id = %id, checkpoint = %record.id, files = files_restored.len(), messages_removed, "rewound");
        Ok(Rewound {
            checkpoint_id: record.id,
            files_restored,
            messages_removed,
        })
    }

    /// A new session of `owner` with the transcript of `source` up to
    /// `at_message_id` (all of it when `None`) and the workspace as it was at
    /// the end of that message's turn.
    pub async fn fork(
        &self,
        source: SessionRecord,
        owner: &str,
        at_message_id: Option<&str>,
    ) -> SessionResult<Forked> {
        let id = source.id.clone();
        let source = self.with_local_workspace(source).await?;
        let store = self.registry.runtime().store.clone();
        let messages = store.messages(&id).await?;
        let last = match at_message_id {
            Some(message_id) => messages
                .iter()
                .position(|m| m.id == message_id)
                .ok_or_else(|| {
                    SessionError::Missing("no message with this id in this session".into())
                })?,
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
        let identity = self.agent_identity(owner).await?;
        let opened = self
            .registry
            .runtime()
            .workspace_root(&source, identity)
            .await;
        let opened = opened.map_err(|err| SessionError::Missing(err.to_string()))?;
        // An existing directory is read as the fork's owner's agent: only
        // what they could read themselves.
        let source_workspace = Reading {
            as_user: opened.reader(identity),
            root: opened.root,
        };
        let new_id = uuid::Uuid::now_v7().to_string();
        let workspace = self.new_workspace(&new_id).await?;
        let copied = async {
            // Written as the agent's user: the new workspace is theirs first.
            if let Some(identity) = identity {
                let data_dir = &self.registry.runtime().data_dir;
                hand_over_before_turn(&new_id, &workspace, data_dir, identity)
                    .await
                    .map_err(|err| err.to_string())?;
            }
            copy_workspace(
                &store,
                &source_workspace,
                &workspace,
                later.as_ref(),
                identity,
            )
            .await
            .map_err(|err| err.to_string())
        }
        .await;
        if let Err(err) = copied {
            let _ = tokio::fs::remove_dir_all(&workspace).await;
            return Err(SessionError::Internal(format!(
                "copying the workspace: {err}"
            )));
        }
        let title = format!("Fork of {}", source.title.as_deref().unwrap_or(&source.id));
        let created = store
            .create_session(NewSession {
                id: Some(new_id.clone()),
                owner: owner.to_string(),
                title: Some(title.chars().take(200).collect()),
                workspace: workspace.display().to_string(),
                existing_workspace: false,
                model: source.model.clone(),
                profile: source.profile.clone(),
            })
            .await;
        let mut session = match created {
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
        // A fork keeps the host mounts its source was given.
        if let Some(mounts) = store.session_mounts(&id).await? {
            store.set_session_mounts(&new_id, &mounts).await?;
        }
        // And the thinking budget it was given.
        if source.thinking_budget.is_some() {
            let update = SessionUpdate {
                thinking_budget: Some(source.thinking_budget),
                ..SessionUpdate::default()
            };
            session = store.update_session(&new_id, update).await?;
        }
        self.share_workspace(&new_id).await?;
        tracing::info!(from = %id, session_id = %new_id, messages = kept.len(), "forked");
        Ok(Forked {
            session,
            messages: kept.len(),
        })
    }
}
