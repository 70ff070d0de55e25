//! Answering what a waiting turn asked: a permission request or a question.
//! The answer goes to the turn in this process, or, in a cluster, to the node
//! whose turn waits for it.

use agentd_engine::{Answer, QuestionAnswer};
use agentd_protocol::{PendingKind, Resolver};
use agentd_store::PendingRecord;
use serde_json::Value;

use crate::approvals::Reply;

use super::{SessionError, SessionResult, SessionService};

impl SessionService {
    /// Decide the permission request `request_id` of the session; the
    /// request as it was asked.
    pub async fn answer_permission(
        &self,
        session_id: &str,
        request_id: &str,
        answer: Answer,
    ) -> SessionResult<PendingRecord> {
        let record = self
            .open_request(session_id, request_id, PendingKind::Permission)
            .await?;
        self.deliver(&record, Reply::Permission(answer), "request")
            .await?;
        Ok(record)
    }

    /// Answer the question `request_id` of the session, as `by`.
    pub async fn answer_question(
        &self,
        session_id: &str,
        request_id: &str,
        answers: Value,
        by: Resolver,
    ) -> SessionResult<()> {
        let record = self
            .open_request(session_id, request_id, PendingKind::Question)
            .await?;
        let questions = record.data.get("questions").cloned().unwrap_or(Value::Null);
        agentd_engine::validate_answers(&questions, &answers).map_err(SessionError::Invalid)?;
        let answer = QuestionAnswer {
            answers: Some(answers),
            by,
        };
        self.deliver(&record, Reply::Question(answer), "question")
            .await
    }

    /// Hand `reply` to the turn waiting for `record`, here or on another node.
    async fn deliver(&self, record: &PendingRecord, reply: Reply, what: &str) -> SessionResult<()> {
        let runtime = self.registry.runtime();
        let delivered = runtime.approvals.deliver(&record.id, reply.clone())
            || (runtime.coordination.forward(record, &reply).await)?;
        if !delivered {
            return Err(SessionError::NotWaiting(format!(
                "no turn is waiting for this {what} any more"
            )));
        }
        Ok(())
    }

    /// The open request `request_id` of kind `kind` in the session:
    /// [`SessionError::Missing`] when there is none, `AlreadyAnswered` when
    /// it was answered.
    pub async fn open_request(
        &self,
        session_id: &str,
        request_id: &str,
        kind: PendingKind,
    ) -> SessionResult<PendingRecord> {
        let record = self
            .store()
            .get_pending(request_id)
            .await?
            .filter(|record| record.session_id == session_id && record.kind == kind)
            .ok_or_else(|| SessionError::Missing(format!("no {kind} request with this id")))?;
        if record.resolved_at.is_some() {
            return Err(SessionError::AlreadyAnswered(format!(
                "this {kind} request was already answered"
            )));
        }
        Ok(record)
    }
}
