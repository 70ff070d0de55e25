//! A session's life: created with its own empty workspace, renamed, and
//! deleted with everything of it — its workspace too, when agentd made it
//! (the one rule of [`crate::paths::own_workspace`]).

use std::path::PathBuf;

use agentd_protocol::{ContentBlock, Message};
use agentd_sandbox::confined::FsIdentity;
use agentd_store::{NewSession, SessionRecord, SessionUpdate};

use super::{SessionError, SessionResult, SessionService};

/// A session to create (the caller checked the owner may choose these).
pub struct SessionSpec {
    pub owner: String,
    pub profile: String,
    /// A resolved model spec.
    pub model: String,
    pub title: Option<String>,
    /// An existing directory (see [`super::existing`]) instead of a new one.
    pub workspace: Option<PathBuf>,
    /// Stored as the session's first message, the assistant's.
    pub greeting: Option<String>,
    /// Host mounts asked for, checked (`checked_session_mounts`).
    pub mounts: Vec<crate::config::MountSpec>,
}

/// What a delete did.
#[derive(Debug)]
pub enum Deleted {
    Removed {
        /// Why the workspace agentd made could not be removed, if it could not.
        workspace_error: Option<String>,
    },
    /// Someone else deleted it first.
    AlreadyGone,
}

impl SessionService {
    /// Create a session with its own empty workspace, owned by the agent's
    /// user when there is one, or on the existing directory `spec` names.
    pub async fn create(&self, spec: SessionSpec) -> SessionResult<SessionRecord> {
        let runtime = self.registry.runtime();
        // Whom the agent works as comes first: no workspace is left behind
        // when no uid can be had.
        let identity = self.agent_identity(&spec.owner).await?;
        let id = uuid::Uuid::now_v7().to_string();
        let made = spec.workspace.is_none();
        let workspace = match spec.workspace {
            Some(existing) => existing,
            None => self.new_workspace_for(&id, identity).await?,
        };
        let created = runtime
            .store
            .create_session(NewSession {
                id: Some(id),
                owner: spec.owner,
                title: spec.title,
                workspace: workspace.display().to_string(),
                existing_workspace: !made,
                model: spec.model,
                profile: spec.profile,
            })
            .await;
        let session = match created {
            Ok(session) => session,
            Err(err) => {
                if made {
                    let _ = tokio::fs::remove_dir(&workspace).await;
                }
                return Err(err.into());
            }
        };
        if !spec.mounts.is_empty() {
            let json = serde_json::to_string(&spec.mounts)
                .map_err(|err| SessionError::Internal(err.to_string()))?;
            if let Err(err) = runtime.store.set_session_mounts(&session.id, &json).await {
                // Without them the session would run without what it asked for.
                let _ = runtime.store.delete_session(&session.id).await;
                return Err(err.into());
            }
        }
        if let Some(greeting) = spec.greeting {
            let message = Message::assistant(vec![ContentBlock::Text { text: greeting }]);
            if let Err(err) = runtime
                .store
                .append_message(&session.id, None, &message)
                .await
            {
                // A session without its greeting would look broken: none at all.
                let _ = runtime.store.delete_session(&session.id).await;
                return Err(err.into());
            }
        }
        tracing::info!(session_id = %session.id, "session created");
        Ok(session)
    }

    /// Create a session of `owner` on a directory of theirs (`agentd run`):
    /// agentd never deletes it.
    pub async fn create_in(
        &self,
        owner: &str,
        workspace: &std::path::Path,
        model: &str,
        profile: &str,
    ) -> Result<SessionRecord, crate::runtime::RunError> {
        let runtime = self.registry.runtime();
        runtime
            .create_session(owner, workspace, model, profile)
            .await
    }

    /// Change what a `PATCH` changes (title, model, thinking budget) in one
    /// write: all of it or, on error, none.
    pub async fn update(
        &self,
        session_id: &str,
        update: SessionUpdate,
    ) -> SessionResult<SessionRecord> {
        let store = &self.registry.runtime().store;
        Ok(store.update_session(session_id, update).await?)
    }

    /// Delete the session: its transcript, events, live streams, helper
    /// processes and (when agentd made it) its workspace. Refused while a
    /// turn runs or waits.
    pub async fn delete(&self, mut session: SessionRecord) -> SessionResult<Deleted> {
        let id = session.id.clone();
        self.idle_everywhere(&id).await?;
        let guard = self.registry.begin_delete(&id).await?;
        let runtime = self.registry.runtime();
        // This node's copy (copies on other nodes stay until their data dir goes).
        runtime
            .coordination
            .localize(&runtime.data_dir, &mut session);
        if !runtime.store.delete_session(&id).await? {
            return Ok(Deleted::AlreadyGone);
        }
        // An import may bring the same session back, with the same message ids.
        runtime.transcripts.forget(&id);
        guard.finish();
        runtime.mcp.shutdown_session(&id).await;
        runtime.egress.shutdown_session(&id);
        runtime.claude.stop_session(&id).await;
        runtime.background.end_session(&id).await;
        let mut workspace_error = None;
        if let Some(workspace) = crate::paths::own_workspace(&runtime.data_dir, &session) {
            match tokio::fs::remove_dir_all(&workspace).await {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                    tracing::warn!(session_id = %id, %err, "cannot remove the workspace");
                    workspace_error = Some(format!(
                        "removed session {id} but not its workspace {}: {err}",
                        workspace.display()
                    ));
                }
                _ => {}
            }
        }
        tracing::info!(session_id = %id, "session deleted");
        Ok(Deleted::Removed { workspace_error })
    }

    /// Where sessions made by agentd keep their files.
    pub fn workspaces_dir(&self) -> PathBuf {
        self.registry.runtime().data_dir.join("workspaces")
    }

    /// Create the (empty, private) workspace of a new session.
    pub(super) async fn new_workspace(&self, session_id: &str) -> SessionResult<PathBuf> {
        let (root, id) = (self.workspaces_dir(), session_id.to_string());
        tokio::task::spawn_blocking(move || {
            agentd_sandbox::create_workspace(&root, &id)?.canonicalize()
        })
        .await
        .map_err(|err| SessionError::Internal(err.to_string()))?
        .map_err(|err| SessionError::Internal(format!("creating the workspace: {err}")))
    }

    /// [`SessionService::new_workspace`], owned by `identity` (the agent's
    /// user) when there is one: what its agent, and file work done as it,
    /// can write.
    async fn new_workspace_for(
        &self,
        session_id: &str,
        identity: Option<FsIdentity>,
    ) -> SessionResult<PathBuf> {
        let workspace = self.new_workspace(session_id).await?;
        let Some(identity) = identity else {
            return Ok(workspace);
        };
        let dir = workspace.clone();
        let given =
            tokio::task::spawn_blocking(move || crate::workspace_owner::give_new(&dir, identity))
                .await
                .map_err(std::io::Error::other)
                .and_then(|given| given);
        if let Err(err) = given {
            let _ = tokio::fs::remove_dir(&workspace).await;
            return Err(SessionError::Internal(format!(
                "giving the workspace to uid {}: {err}",
                identity.uid
            )));
        }
        Ok(workspace)
    }
}
