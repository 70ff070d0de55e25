//! Who runs a session's turns: this process alone ([`Alone`], SQLite or a
//! single node), or whichever node of a cluster takes them
//! ([`crate::cluster::Cluster`], PostgreSQL). The session service and the
//! server's start and stop talk to [`Coordination`] only; nothing outside
//! these two implementations knows which one runs.

use std::path::Path;

use agentd_store::{PendingRecord, SessionRecord};
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::approvals::Reply;
use crate::registry::{Accepted, Registry, Submission, SubmitError};

/// Errors of the coordination layer, for the log (the client sees a 500).
pub type CoordinationResult<T> = anyhow::Result<T>;

/// What a lone process does is each method's default: nothing runs
/// elsewhere, so there is nothing to ask, forward or sync.
#[async_trait]
pub trait Coordination: Send + Sync {
    /// Start coordinating for `registry` (serving at `address`): recover what
    /// an earlier process left. Background work stops when `stop` is cancelled.
    async fn join(
        &self,
        registry: &Registry,
        address: &str,
        stop: CancellationToken,
    ) -> CoordinationResult<()>;

    /// Accept a message for `session` (the registry's part of it is
    /// [`Registry::submit_here`]).
    async fn submit(
        &self,
        registry: &Registry,
        session: &SessionRecord,
        submission: Submission,
    ) -> Result<Accepted, SubmitError>;

    /// This node's id in a cluster.
    fn node_id(&self) -> Option<&str> {
        None
    }

    /// This process sees every turn of its sessions: a session with no turn
    /// here is idle.
    fn sees_all_turns(&self) -> bool {
        true
    }

    /// A turn runs or waits in the session somewhere this process does not see.
    async fn busy_elsewhere(&self, _session_id: &str) -> CoordinationResult<bool> {
        Ok(false)
    }

    /// Interrupt the session's turn where it runs, when it does not run here:
    /// its id, `None` when none runs.
    async fn interrupt_elsewhere(
        &self,
        _registry: &Registry,
        _session_id: &str,
    ) -> CoordinationResult<Option<String>> {
        Ok(None)
    }

    /// Pass `reply` to the turn waiting for it elsewhere; whether one was.
    async fn forward(&self, _request: &PendingRecord, _reply: &Reply) -> CoordinationResult<bool> {
        Ok(false)
    }

    /// Point `session.workspace` at this process's copy, brought up to date,
    /// for work outside a turn (files, rewind, fork).
    async fn local_workspace(
        &self,
        _registry: &Registry,
        _session: &mut SessionRecord,
    ) -> CoordinationResult<()> {
        Ok(())
    }

    /// The workspace here becomes the session's shared state (after a rewind
    /// or a fork changed it outside a turn).
    async fn save_workspace(
        &self,
        _registry: &Registry,
        _session_id: &str,
    ) -> CoordinationResult<()> {
        Ok(())
    }

    /// Point `session.workspace` at this process's copy as it is (no sync).
    fn localize(&self, _data_dir: &Path, _session: &mut SessionRecord) {}

    /// Before a turn runs here: its workspace ready.
    async fn before_turn(
        &self,
        _registry: &Registry,
        _session: &mut SessionRecord,
    ) -> CoordinationResult<()> {
        Ok(())
    }

    /// After a turn that ran here is recorded (or dropped at shutdown).
    async fn turn_ended(&self, _registry: &Registry, _session_id: &str, _turn_id: &str) {}

    /// Taking no new turns (the node drains).
    fn is_draining(&self) -> bool {
        false
    }

    /// Resolves once draining and no turn is left running here; never alone.
    async fn drained(&self) {
        std::future::pending().await
    }

    /// A clean stop: whether the others were told.
    async fn leave(&self) -> bool {
        true
    }
}

/// One process on its own: the registry is the whole truth.
pub struct Alone;

#[async_trait]
impl Coordination for Alone {
    async fn join(
        &self,
        registry: &Registry,
        _address: &str,
        _stop: CancellationToken,
    ) -> CoordinationResult<()> {
        let recovered = registry
            .runtime()
            .recover(None)
            .await
            .map_err(|err| anyhow::anyhow!("recovering interrupted turns: {err}"))?;
        if recovered > 0 {
            tracing::warn!(
                recovered,
                "finished turns left running by an earlier process as interrupted"
            );
        }
        Ok(())
    }

    async fn submit(
        &self,
        registry: &Registry,
        session: &SessionRecord,
        submission: Submission,
    ) -> Result<Accepted, SubmitError> {
        registry.submit_here(session, submission).await
    }
}
