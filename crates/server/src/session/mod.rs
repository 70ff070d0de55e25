//! The session service: the one front door for every operation on a
//! session — create, read, rename, delete ([`lifecycle`]), send a message or
//! compact, interrupt ([`turns`]), answer a permission request or a question
//! ([`answers`]), rewind and fork ([`history`]), and the workspace as it is
//! now ([`SessionService::workspace`]). The HTTP handlers and the command line
//! call it and only map its [`SessionError`]; it talks to the store, the live
//! [`Registry`] and the [`crate::coordination::Coordination`] (alone or a
//! cluster node), so none of them needs to know which.

pub mod answers;
pub mod commands;
pub mod existing;
pub mod history;
pub mod lifecycle;
pub mod turn_events;
pub mod turns;

use std::sync::Arc;

use agentd_sandbox::confined::FsIdentity;
use agentd_store::{
    CheckpointRecord, PendingRecord, SessionRecord, SessionStatus, Store, StoreError, StoredMessage,
};

use crate::registry::Registry;
use crate::workspace_open::OpenWorkspace;

/// Why an operation on a session was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No such session (or not the caller's: the same answer).
    #[error("session not found")]
    NotFound,
    /// Something named inside the session does not exist.
    #[error("{0}")]
    Missing(String),
    #[error("{0}")]
    Invalid(String),
    /// Not the caller's to use (a directory outside their workspace roots).
    #[error("{0}")]
    Forbidden(String),
    /// A turn runs or waits in the session.
    #[error("{0}")]
    TurnRunning(String),
    /// A command the user started runs in the session.
    #[error("{0}")]
    CommandRunning(String),
    #[error("no turn is running in this session")]
    NoTurnRunning,
    #[error("{0}")]
    AlreadyAnswered(String),
    /// The turn that asked is gone.
    #[error("{0}")]
    NotWaiting(String),
    #[error("the server is shutting down")]
    Stopping,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(String),
}

pub type SessionResult<T> = Result<T, SessionError>;

/// What coordination failed at, with its causes.
impl From<anyhow::Error> for SessionError {
    fn from(err: anyhow::Error) -> Self {
        SessionError::Internal(format!("{err:#}"))
    }
}

/// What a session's status is right now: the registry knows sooner than the
/// store, which the turn's task updates.
#[derive(Debug, Clone)]
pub struct LiveStatus {
    pub status: SessionStatus,
    pub running_turn: Option<String>,
    pub queued: usize,
}

/// Cheap to clone; clones share the registry.
#[derive(Clone)]
pub struct SessionService {
    registry: Registry,
}

impl SessionService {
    pub fn new(registry: Registry) -> Self {
        Self { registry }
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    fn store(&self) -> &Arc<dyn Store> {
        &self.registry.runtime().store
    }

    /// The session if `owner` owns it; [`SessionError::NotFound`] otherwise,
    /// whether it exists or not.
    pub async fn owned(&self, owner: &str, id: &str) -> SessionResult<SessionRecord> {
        self.store()
            .get_session(id)
            .await?
            .filter(|session| session.owner == owner)
            .ok_or(SessionError::NotFound)
    }

    /// `owner`'s sessions, newest first; `cursor` is the last id of the
    /// previous page.
    pub async fn list(
        &self,
        owner: &str,
        cursor: Option<&str>,
        limit: u32,
    ) -> SessionResult<Vec<SessionRecord>> {
        match self.store().list_sessions(owner, cursor, limit).await {
            Err(StoreError::NotFound(_)) => Err(SessionError::Invalid("unknown cursor".into())),
            listed => Ok(listed?),
        }
    }

    /// The sessions `filter` selects (see [`agentd_store::SessionFilter`]).
    pub async fn find(
        &self,
        filter: &agentd_store::SessionFilter,
    ) -> SessionResult<Vec<agentd_store::SessionHit>> {
        match self.store().find_sessions(filter).await {
            Err(StoreError::NotFound(_)) => Err(SessionError::Invalid("unknown cursor".into())),
            found => Ok(found?),
        }
    }

    /// The session's status as clients should see it.
    pub fn live_status(&self, session: &SessionRecord) -> LiveStatus {
        let mut live = self.registry.live_state(&session.id);
        // In a cluster the turn may run on another node: only a turn running
        // here says more than the store.
        if !self.registry.runtime().coordination.sees_all_turns() && live.running_turn.is_none() {
            live = crate::registry::LiveState::default();
        }
        let status = match (session.status, &live.running_turn) {
            (SessionStatus::Waiting, Some(_)) => SessionStatus::Waiting,
            (_, Some(_)) => SessionStatus::Running,
            (_, None) if live.live && live.queued > 0 => SessionStatus::Running,
            (_, None) if live.live => SessionStatus::Idle,
            (status, None) => status,
        };
        LiveStatus {
            status,
            running_turn: live.running_turn,
            queued: live.queued,
        }
    }

    pub async fn messages(&self, session_id: &str) -> SessionResult<Vec<StoredMessage>> {
        Ok(self.store().messages(session_id).await?)
    }

    pub async fn checkpoints(&self, session_id: &str) -> SessionResult<Vec<CheckpointRecord>> {
        Ok(self.store().list_checkpoints(session_id).await?)
    }

    /// Up to `limit` stored events after `seq`, for a stream's replay.
    pub async fn events_after(
        &self,
        session_id: &str,
        seq: u64,
        limit: u32,
    ) -> SessionResult<Vec<agentd_protocol::EventEnvelope>> {
        Ok(self.store().events_after(session_id, seq, limit).await?)
    }

    /// Permission requests and questions waiting for an answer.
    pub async fn pending(&self, session_id: &str) -> SessionResult<Vec<PendingRecord>> {
        Ok(self.store().open_pending(Some(session_id)).await?)
    }

    /// The session's workspace on this node, up to date, and whom file work
    /// in it runs as (`None`: the server itself), for reading it outside a turn.
    pub async fn workspace(
        &self,
        session: SessionRecord,
    ) -> SessionResult<(OpenWorkspace, Option<FsIdentity>)> {
        self.opened(session, false).await
    }

    /// [`SessionService::workspace`], handed over to the agent's user first
    /// when it may be (see [`crate::workspace_open`]), to change its files.
    pub async fn workspace_for_work(
        &self,
        session: SessionRecord,
    ) -> SessionResult<(OpenWorkspace, Option<FsIdentity>)> {
        self.opened(session, true).await
    }

    async fn opened(
        &self,
        session: SessionRecord,
        for_work: bool,
    ) -> SessionResult<(OpenWorkspace, Option<FsIdentity>)> {
        let session = self.with_local_workspace(session).await?;
        let identity = self.agent_identity(&session.owner).await?;
        let runtime = self.registry.runtime();
        let opened = match for_work {
            true => runtime.open_workspace(&session, identity).await,
            false => runtime.workspace_root(&session, identity).await,
        };
        Ok((opened.map_err(workspace_error)?, identity))
    }

    /// Whom file work for `owner`'s sessions runs as.
    pub async fn agent_identity(&self, owner: &str) -> SessionResult<Option<FsIdentity>> {
        self.registry
            .runtime()
            .agent_identity(owner)
            .await
            .map_err(|err| SessionError::Internal(err.to_string()))
    }

    /// The session with `workspace` pointing at this node's copy, brought up
    /// to date in a cluster.
    async fn with_local_workspace(
        &self,
        mut session: SessionRecord,
    ) -> SessionResult<SessionRecord> {
        let coordination = self.registry.runtime().coordination.clone();
        coordination
            .local_workspace(&self.registry, &mut session)
            .await
            .map_err(|err| SessionError::Internal(format!("the session's workspace: {err}")))?;
        Ok(session)
    }

    /// The workspace here becomes the session's shared state.
    async fn share_workspace(&self, session_id: &str) -> SessionResult<()> {
        let coordination = self.registry.runtime().coordination.clone();
        coordination
            .save_workspace(&self.registry, session_id)
            .await
            .map_err(|err| SessionError::Internal(format!("saving the workspace: {err}")))
    }

    /// Refused while a turn runs or waits anywhere (this process's registry,
    /// or a cluster's queue and leases).
    async fn idle_everywhere(&self, session_id: &str) -> SessionResult<()> {
        let coordination = self.registry.runtime().coordination.clone();
        if coordination.busy_elsewhere(session_id).await? {
            return Err(turn_running());
        }
        Ok(())
    }
}

pub(crate) fn turn_running() -> SessionError {
    SessionError::TurnRunning(
        "a turn is running or queued in this session; interrupt it first".into(),
    )
}

impl From<crate::registry::Busy> for SessionError {
    fn from(busy: crate::registry::Busy) -> Self {
        match busy {
            crate::registry::Busy::Turn => turn_running(),
            crate::registry::Busy::Command => SessionError::CommandRunning(
                "a command the user started runs in this session; try again once it has ended"
                    .into(),
            ),
        }
    }
}

/// The workspace cannot be had (gone, or refused as it now is): said as is.
fn workspace_error(err: crate::runtime::RunError) -> SessionError {
    SessionError::Missing(err.to_string())
}
