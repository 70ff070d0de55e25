//! A cluster node as the server's [`Coordination`]: turns go through the
//! shared queue, and what runs elsewhere is reached by signals.

use std::path::Path;

use agentd_engine::{Answer, QuestionAnswer};
use agentd_store::{PendingRecord, SessionRecord};
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::Cluster;
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
            .map_err(|err| format!("joining the cluster: {err}"))
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

    async fn busy_elsewhere(&self, session_id: &str) -> CoordinationResult<bool> {
        self.busy(session_id).await
    }

    async fn interrupt_elsewhere(
        &self,
        registry: &Registry,
        session_id: &str,
    ) -> CoordinationResult<Option<String>> {
        self.interrupt(registry, session_id).await
    }

    async fn forward_permission(
        &self,
        request: &PendingRecord,
        answer: &Answer,
    ) -> CoordinationResult<bool> {
        let data = serde_json::json!({"decision": answer.decision, "by": answer.by});
        self.forward(request, "permission", data).await
    }

    async fn forward_question(
        &self,
        request: &PendingRecord,
        answer: &QuestionAnswer,
    ) -> CoordinationResult<bool> {
        let data = serde_json::json!({"answers": answer.answers, "by": answer.by});
        self.forward(request, "question", data).await
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

    async fn before_turn(
        &self,
        registry: &Registry,
        session: &mut SessionRecord,
    ) -> CoordinationResult<()> {
        self.prepare(registry, session).await
    }

    async fn turn_ended(&self, registry: &Registry, session_id: &str, turn_id: &str) {
        self.release(registry, session_id, turn_id).await;
    }

    fn is_draining(&self) -> bool {
        Cluster::is_draining(self)
    }

    async fn drained(&self) {
        Cluster::drained(self).await;
    }

    async fn leave(&self) -> bool {
        Cluster::leave(self).await
    }
}
