//! Turns of a session: a message or a compaction accepted (started now,
//! queued, or recognised as a retry), and the running turn interrupted,
//! wherever it runs.

use agentd_protocol::{EventEnvelope, TurnFinished};
use agentd_store::SessionRecord;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{SessionError, SessionResult, SessionService};
use crate::registry::{Accepted, Submission, SubmitError, TurnKind};
use crate::runtime::{RunError, TurnOptions};

impl SessionService {
    /// Whether `request_id` already made a turn of this session: a retry of
    /// an accepted request is answered with its turn, whatever else changed.
    pub async fn is_retry(&self, session_id: &str, request_id: &str) -> SessionResult<bool> {
        Ok(self
            .registry
            .is_known_request(session_id, request_id)
            .await?)
    }

    /// Accept a message or a compaction for `session`.
    pub async fn submit(
        &self,
        session: &SessionRecord,
        submission: Submission,
    ) -> SessionResult<Accepted> {
        let accepted =
            self.registry
                .submit(session, submission)
                .await
                .map_err(|err| match err {
                    SubmitError::Busy => SessionError::TurnRunning(err.to_string()),
                    SubmitError::CommandRunning => SessionError::CommandRunning(err.to_string()),
                    SubmitError::Stopping => SessionError::Stopping,
                    SubmitError::Store(err) => err.into(),
                })?;
        tracing::info!(session_id = %session.id, turn_id = accepted.turn_id(), kind = accepted.as_str(), "message accepted");
        Ok(accepted)
    }

    /// Stop the session's running turn (it ends `interrupted`); its id.
    pub async fn interrupt(&self, session_id: &str) -> SessionResult<String> {
        let turn_id = match self.registry.interrupt(session_id) {
            Some(turn_id) => turn_id,
            // Not here: in a cluster, its owner gets a signal.
            None => {
                let coordination = self.registry.runtime().coordination.clone();
                coordination
                    .interrupt_elsewhere(&self.registry, session_id)
                    .await?
                    .ok_or(SessionError::NoTurnRunning)?
            }
        };
        tracing::info!(session_id, %turn_id, "interrupt requested");
        Ok(turn_id)
    }

    /// Run a turn of `session` here and now, to its end (`agentd run`):
    /// events go to the store and, as they are stored, to `observer`.
    /// `Ok(None)` when its `client_request_id` named a turn already made.
    pub async fn run_here(
        &self,
        session: &SessionRecord,
        kind: &TurnKind,
        options: TurnOptions,
        observer: Option<mpsc::UnboundedSender<EventEnvelope>>,
        cancel: CancellationToken,
    ) -> Result<Option<TurnFinished>, RunError> {
        let env = self.registry.env().clone();
        let lookup = move |key: &str| env.get(key).cloned();
        let runtime = self.registry.runtime();
        runtime
            .run_turn(session, kind, options, &lookup, observer, cancel)
            .await
    }
}
