//! Permission requests and questions as persisted objects: stored when asked,
//! resolved by whoever answers first (a person through the API or the
//! terminal, the profile's `on_no_answer` after a timeout, or a restart).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd_engine::{Answer, ApprovalRequest, Approver, Decision, QuestionAnswer, QuestionRequest};
use agentd_protocol::{PendingKind, Resolver};
use agentd_store::{Fence, PendingRecord, SessionStatus, SessionUpdate, Store, StoreError};
use async_trait::async_trait;
use serde_json::json;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::config::NoAnswer;

/// Requests waiting for an answer in this process, by request id.
#[derive(Clone, Default)]
pub struct Approvals {
    waiting: Arc<Mutex<HashMap<String, Waiting>>>,
}

enum Waiting {
    Permission(oneshot::Sender<Answer>),
    Question(oneshot::Sender<QuestionAnswer>),
}

/// An answer for a waiting turn: a permission decision or a question's answers.
#[derive(Debug, Clone)]
pub enum Reply {
    Permission(Answer),
    Question(QuestionAnswer),
}

impl Reply {
    /// As a cluster signal passes it on: its kind and data.
    pub fn to_signal(&self) -> (&'static str, serde_json::Value) {
        match self {
            Reply::Permission(a) => ("permission", json!({"decision": a.decision, "by": a.by})),
            Reply::Question(a) => ("question", json!({"answers": a.answers, "by": a.by})),
        }
    }

    /// Read back from a signal; `None` for another kind or no decision.
    pub fn from_signal(kind: &str, data: &serde_json::Value) -> Option<Self> {
        let by = data["by"]
            .as_str()
            .map_or(Resolver::Terminal, Resolver::parse);
        match kind {
            "permission" => match serde_json::from_value(data["decision"].clone()) {
                Ok(Decision::Other(_)) | Err(_) => None,
                Ok(decision) => Some(Reply::Permission(Answer::new(decision, by))),
            },
            "question" => {
                let answers = Some(data["answers"].clone()).filter(|a| !a.is_null());
                Some(Reply::Question(QuestionAnswer { answers, by }))
            }
            _ => None,
        }
    }
}

impl Approvals {
    /// Deliver `reply` to the turn in this process that waits for it;
    /// `false` when none does.
    pub fn deliver(&self, request_id: &str, reply: Reply) -> bool {
        match (self.take(request_id), reply) {
            (Some(Waiting::Permission(sender)), Reply::Permission(answer)) => {
                sender.send(answer).is_ok()
            }
            (Some(Waiting::Question(sender)), Reply::Question(answer)) => {
                sender.send(answer).is_ok()
            }
            _ => false,
        }
    }

    fn take(&self, request_id: &str) -> Option<Waiting> {
        self.waiting
            .lock()
            .ok()
            .and_then(|mut waiting| waiting.remove(request_id))
    }

    fn register(&self, request_id: &str) -> oneshot::Receiver<Answer> {
        let (sender, receiver) = oneshot::channel();
        self.insert(request_id, Waiting::Permission(sender));
        receiver
    }

    fn register_question(&self, request_id: &str) -> oneshot::Receiver<QuestionAnswer> {
        let (sender, receiver) = oneshot::channel();
        self.insert(request_id, Waiting::Question(sender));
        receiver
    }

    fn insert(&self, request_id: &str, waiting: Waiting) {
        if let Ok(mut map) = self.waiting.lock() {
            map.insert(request_id.to_string(), waiting);
        }
    }

    fn forget(&self, request_id: &str) {
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.remove(request_id);
        }
    }
}

/// What a profile says about unanswered requests.
#[derive(Debug, Clone, Copy)]
pub struct NoAnswerPolicy {
    pub decision: NoAnswer,
    pub after: Duration,
}

impl NoAnswerPolicy {
    pub fn answer(&self, by: Resolver) -> Answer {
        let decision = match self.decision {
            NoAnswer::Deny => Decision::Deny,
            NoAnswer::Allow => Decision::Allow,
        };
        Answer::new(decision, by)
    }
}

/// Where an answer comes from, besides the API.
#[async_trait]
pub trait AnswerSource: Send + Sync {
    /// Ask; `None` when this source cannot answer (nobody there).
    async fn ask(&self, request: &ApprovalRequest) -> Option<Answer>;

    /// Ask a question; `None` when this source cannot answer.
    async fn ask_question(&self, _request: &QuestionRequest) -> Option<QuestionAnswer> {
        None
    }
}

/// The approver of one session's turn: stores the request, waits for the first
/// answer from `source` or [`Approvals::answer`], or applies `no_answer` after
/// its timeout; then records the resolution (and a session-wide allow).
pub struct StoredApprover {
    pub store: Arc<dyn Store>,
    pub session_id: String,
    pub approvals: Approvals,
    pub no_answer: NoAnswerPolicy,
    pub source: Option<Arc<dyn AnswerSource>>,
    /// Requests stored by `prepare`, waiting for `decide`.
    pub prepared: Mutex<HashMap<String, oneshot::Receiver<Answer>>>,
    /// Questions stored by `prepare_question`, waiting for `answer_question`.
    pub prepared_questions: Mutex<HashMap<String, oneshot::Receiver<QuestionAnswer>>>,
    /// Requests open right now (parallel subagents may each wait): the
    /// session is `waiting` until the last one is answered.
    pub open: Mutex<usize>,
    /// The turn's lease in a cluster: its status writes are fenced by it,
    /// so a node that lost the turn cannot mark the session again.
    pub fence: Option<Fence>,
}

#[async_trait]
impl Approver for StoredApprover {
    async fn prepare(&self, request: &ApprovalRequest) {
        let data = serde_json::to_value(request).unwrap_or_default();
        // Ready for an answer before anyone can see the request: a client
        // that answers as soon as it is stored is not lost.
        let receiver = self.approvals.register(&request.request_id);
        if !self
            .store_pending(
                &request.request_id,
                &request.turn_id,
                &request.call_id,
                PendingKind::Permission,
                data,
            )
            .await
        {
            self.approvals.forget(&request.request_id);
            return;
        }
        if let Ok(mut prepared) = self.prepared.lock() {
            prepared.insert(request.request_id.clone(), receiver);
        }
        self.waiting_started().await;
    }

    async fn prepare_question(&self, request: &QuestionRequest) {
        let data = serde_json::to_value(request).unwrap_or_default();
        let receiver = self.approvals.register_question(&request.request_id);
        if !self
            .store_pending(
                &request.request_id,
                &request.turn_id,
                &request.call_id,
                PendingKind::Question,
                data,
            )
            .await
        {
            self.approvals.forget(&request.request_id);
            return;
        }
        if let Ok(mut prepared) = self.prepared_questions.lock() {
            prepared.insert(request.request_id.clone(), receiver);
        }
        self.waiting_started().await;
    }

    async fn answer_question(
        &self,
        request: &QuestionRequest,
        cancel: &CancellationToken,
    ) -> QuestionAnswer {
        let from_api = self
            .prepared_questions
            .lock()
            .ok()
            .and_then(|mut prepared| prepared.remove(&request.request_id));
        let Some(from_api) = from_api else {
            return QuestionAnswer::unanswered(Resolver::StoreError);
        };
        let from_source = async {
            match &self.source {
                Some(source) => source.ask_question(request).await,
                None => None,
            }
        };
        let answer = self
            .first_answer(from_api, from_source, cancel, |by| {
                QuestionAnswer::unanswered(by)
            })
            .await;
        let resolution = json!({"answers": answer.answers, "by": answer.by});
        self.resolve(&request.request_id, &resolution).await;
        self.waiting_ended().await;
        answer
    }

    async fn decide(&self, request: &ApprovalRequest, cancel: &CancellationToken) -> Answer {
        let from_api = self
            .prepared
            .lock()
            .ok()
            .and_then(|mut prepared| prepared.remove(&request.request_id));
        let Some(from_api) = from_api else {
            return Answer::new(Decision::Deny, Resolver::StoreError);
        };
        let from_source = async {
            match &self.source {
                Some(source) => source.ask(request).await,
                None => None,
            }
        };
        let answer = self
            .first_answer(from_api, from_source, cancel, |by| match by {
                Resolver::Timeout => self.no_answer.answer(by),
                _ => Answer::new(Decision::Deny, by),
            })
            .await;
        let resolution = json!({"decision": answer.decision, "by": answer.by});
        self.resolve(&request.request_id, &resolution).await;
        // The rule is the asked call's: not remembered when the answer ran
        // the call as something else.
        let rewritten = answer
            .updated_input
            .as_ref()
            .is_some_and(|updated| *updated != request.input);
        if answer.decision == Decision::AllowSession
            && !rewritten
            && let Err(err) = self
                .store
                .add_session_rule(&self.session_id, &request.session_rule)
                .await
        {
            tracing::error!(%err, "could not remember a session allow");
        }
        self.waiting_ended().await;
        answer
    }
}

impl StoredApprover {
    /// Whichever comes first: the API's answer, the other source's, the
    /// profile's timeout (`unanswered(Timeout)`) or an interrupt
    /// (`unanswered(Interrupted)`).
    async fn first_answer<T>(
        &self,
        from_api: oneshot::Receiver<T>,
        from_source: impl std::future::Future<Output = Option<T>>,
        cancel: &CancellationToken,
        unanswered: impl Fn(Resolver) -> T,
    ) -> T {
        tokio::select! {
            Ok(answer) = from_api => answer,
            Some(answer) = from_source => answer,
            _ = tokio::time::sleep(self.no_answer.after) => unanswered(Resolver::Timeout),
            _ = cancel.cancelled() => unanswered(Resolver::Interrupted),
        }
    }

    /// Records how a request ended and forgets it.
    async fn resolve(&self, request_id: &str, resolution: &serde_json::Value) {
        self.approvals.forget(request_id);
        if let Err(err) = self.store.resolve_pending(request_id, resolution).await {
            tracing::error!(%err, request_id, "could not record how a request ended");
        }
    }

    /// Stores an open request; `false` (logged) when the store failed, in
    /// which case nobody can answer it and it ends as `store_error`.
    async fn store_pending(
        &self,
        id: &str,
        turn_id: &str,
        call_id: &str,
        kind: PendingKind,
        data: serde_json::Value,
    ) -> bool {
        let record = PendingRecord {
            id: id.to_string(),
            session_id: self.session_id.clone(),
            turn_id: Some(turn_id.to_string()),
            kind,
            call_id: Some(call_id.to_string()),
            data,
            created_at: chrono::Utc::now(),
            resolved_at: None,
            resolution: None,
        };
        match self.store.create_pending(&record).await {
            Ok(_) => true,
            Err(err) => {
                tracing::error!(%err, kind = %record.kind, "could not store a pending request; it cannot be answered");
                false
            }
        }
    }

    async fn waiting_started(&self) {
        if let Ok(mut open) = self.open.lock() {
            *open += 1;
        }
        self.set_status(SessionStatus::Waiting).await;
    }

    async fn waiting_ended(&self) {
        let still_open = self
            .open
            .lock()
            .map(|mut open| {
                *open = open.saturating_sub(1);
                *open
            })
            .unwrap_or(0);
        if still_open == 0 {
            self.set_status(SessionStatus::Running).await;
        }
    }

    async fn set_status(&self, status: SessionStatus) {
        let update = SessionUpdate {
            status: Some(status),
            ..SessionUpdate::default()
        };
        let updated = crate::turn_writes::update_session_as(
            self.store.as_ref(),
            &self.session_id,
            self.fence.as_ref(),
            update,
        )
        .await;
        match updated {
            Ok(_) => {}
            // The node that took the turn over owns the session's status.
            Err(StoreError::LeaseLost(why)) => {
                tracing::info!(%why, "the turn's lease was lost; the session status is left alone");
            }
            Err(err) => tracing::warn!(%err, "could not update the session status"),
        }
    }
}
