//! A cluster node as the server's [`Coordination`]: turns go through the
//! shared queue, and what runs elsewhere is reached by signals.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agentd_store::postgres::cluster::Signal;
use agentd_store::{PendingRecord, SessionRecord};
use async_trait::async_trait;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Cluster, SAVE_TRIES, workspace};
use crate::approvals::Reply;
use crate::coordination::{Coordination, CoordinationResult};
use crate::registry::{Accepted, Registry, Submission, SubmitError};

#[async_trait]
impl Coordination for Cluster {
    async fn join(
        &self,
        registry: &Registry,
        address: &str,
        stop: CancellationToken,
    ) -> CoordinationResult<()> {
        // Other nodes' turns run: only this node's own leases (and dead
        // nodes') are recovered.
        self.start(registry.clone(), address, stop)
            .await
            .map_err(|err| anyhow::anyhow!("joining the cluster: {err}"))
    }

    async fn submit(
        &self,
        registry: &Registry,
        session: &SessionRecord,
        submission: Submission,
    ) -> Result<Accepted, SubmitError> {
        if registry.is_stopping() {
            return Err(SubmitError::Stopping);
        }
        self.enqueue(session, submission).await
    }

    fn node_id(&self) -> Option<&str> {
        Some(Cluster::node_id(self))
    }

    fn sees_all_turns(&self) -> bool {
        false
    }

    /// A turn runs or waits in the session, on any node.
    async fn busy_elsewhere(&self, session_id: &str) -> CoordinationResult<bool> {
        Ok(self.inner.store.busy(session_id).await?)
    }

    /// Interrupt a session's turn wherever it runs: `Some(turn id)` when one
    /// runs (a signal goes to its owner). A turn accepted but not taken yet is
    /// taken here and stopped before it does anything.
    async fn interrupt_elsewhere(
        &self,
        registry: &Registry,
        session_id: &str,
    ) -> CoordinationResult<Option<String>> {
        let store = &self.inner.store;
        let Some(lease) = store.lease(session_id).await? else {
            let Some(turn_id) = self.claim(registry, Some(session_id)).await? else {
                return Ok(None);
            };
            registry.interrupt_turn(session_id, &turn_id);
            return Ok(Some(turn_id));
        };
        if store.finished_since(session_id, lease.start_seq).await? {
            return Ok(None);
        }
        let signal = Signal {
            kind: "interrupt".into(),
            target: session_id.to_string(),
            data: json!({"turn_id": lease.turn_id}).to_string(),
        };
        store.send_signal(&lease.node_id, &signal).await?;
        Ok(Some(lease.turn_id))
    }

    async fn local_workspace(
        &self,
        registry: &Registry,
        session: &mut SessionRecord,
    ) -> CoordinationResult<()> {
        if registry.runs_here(&session.id) {
            super::localize(&registry.runtime().data_dir, session);
            return Ok(());
        }
        super::workspace::prepare(self, registry.runtime(), session).await
    }

    async fn save_workspace(
        &self,
        registry: &Registry,
        session_id: &str,
    ) -> CoordinationResult<()> {
        super::workspace::save(self, registry.runtime(), session_id, None).await
    }

    fn localize(&self, data_dir: &Path, session: &mut SessionRecord) {
        super::localize(data_dir, session);
    }

    /// Before a taken turn runs: its workspace here, restored from the last
    /// saved state if this node lacks it.
    async fn before_turn(
        &self,
        registry: &Registry,
        session: &mut SessionRecord,
    ) -> CoordinationResult<()> {
        // A warm `claude` CLI only knows the turns it ran: if the session's
        // last turn ran elsewhere, start it afresh from the stored transcript.
        let last = self.inner.store.last_turn(&session.id).await?;
        if last != self.inner.last_turns.get(&session.id) {
            registry.runtime().claude.stop_session(&session.id).await;
        }
        workspace::prepare(self, registry.runtime(), session).await
    }

    /// After a taken turn is recorded: save its workspace, release its lease
    /// (a few tries each: the heartbeat finishes a lease left behind).
    async fn turn_ended(&self, registry: &Registry, session_id: &str, turn_id: &str) {
        self.inner.last_turns.set(session_id, turn_id);
        let mut wait = Duration::from_millis(200);
        for attempt in 1..=SAVE_TRIES {
            match workspace::save(self, registry.runtime(), session_id, Some(turn_id)).await {
                Ok(()) => break,
                // The next node starts from the previous save: say so loudly.
                Err(err) if attempt == SAVE_TRIES => tracing::error!(%err, session_id,
                    "could not save the workspace at the turn end; its changes stay on this node"),
                Err(err) => {
                    tracing::warn!(%err, session_id, attempt, "saving the workspace failed; retrying")
                }
            }
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
        let store = &self.inner.store;
        if let Err(err) = store
            .release_lease(session_id, turn_id, &self.inner.node_id)
            .await
        {
            tracing::error!(%err, session_id, "could not release the lease; the heartbeat retries");
        }
        self.inner.running.fetch_sub(1, Ordering::SeqCst);
        self.inner.released.notify_waiters();
        self.inner.kick.notify_one();
    }

    fn is_draining(&self) -> bool {
        Cluster::is_draining(self)
    }

    /// Resolves when draining and no taken turn is left.
    async fn drained(&self) {
        self.inner.draining.cancelled().await;
        loop {
            let released = self.inner.released.notified();
            if self.inner.running.load(Ordering::SeqCst) == 0 {
                return;
            }
            tokio::select! {
                () = released => {}
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        }
    }

    /// Leave the cluster (a clean stop): others need not wait for a timeout.
    /// Whether the database took it.
    async fn leave(&self) -> bool {
        if let Err(err) = self.inner.store.remove_node(&self.inner.node_id).await {
            tracing::warn!(%err, "could not leave the cluster cleanly");
            return false;
        }
        true
    }

    /// Pass an answer to the node whose turn waits for it; `false` when
    /// that turn does not run.
    async fn forward(&self, request: &PendingRecord, reply: &Reply) -> CoordinationResult<bool> {
        let store = &self.inner.store;
        let lease = store.lease(&request.session_id).await?;
        let Some(lease) = lease.filter(|l| request.turn_id.as_deref() == Some(l.turn_id.as_str()))
        else {
            return Ok(false);
        };
        let request_id = request.id.as_str();
        let (kind, data) = reply.to_signal();
        let signal = Signal {
            kind: kind.into(),
            target: request_id.to_string(),
            data: data.to_string(),
        };
        store.send_signal(&lease.node_id, &signal).await?;
        Ok(true)
    }
}
