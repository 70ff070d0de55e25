//! Turns entering a session: a submission becomes a running turn, a queued
//! one, or the answer that its `client_request_id` was seen before; a
//! session's worker takes the next queued turn when one ends.

use std::sync::MutexGuard;

use agentd_store::SessionRecord;
use tokio_util::sync::CancellationToken;

use super::{EntryHandle, Registry, Running, TurnState};
use crate::admission::Caller;
use crate::worker;

use super::TurnKind;

/// A turn accepted by `POST …/messages` or `…/compact`.
#[derive(Debug, Clone)]
pub struct PendingTurn {
    pub turn_id: String,
    /// What it does; an error for a cluster queue entry that could not be
    /// read back (the turn fails with it rather than run something else).
    pub kind: Result<TurnKind, String>,
    pub client_request_id: Option<String>,
    /// Who it was accepted from, when it was accepted on this node (and
    /// counted in [`Registry::admissions`] until it ends).
    pub by: Option<Caller>,
}

/// What a submission asks for.
#[derive(Debug, Clone)]
pub struct Submission {
    pub kind: TurnKind,
    pub client_request_id: Option<String>,
    /// Wait behind a running turn instead of being refused.
    pub queue: bool,
    /// Who sends it (counted and checked again as them; see [`Caller`]).
    pub by: Option<Caller>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    Started(String),
    Queued(String),
    /// The `client_request_id` was seen before: that turn's id.
    Duplicate(String),
}

impl Accepted {
    pub fn turn_id(&self) -> &str {
        match self {
            Accepted::Started(id) | Accepted::Queued(id) | Accepted::Duplicate(id) => id,
        }
    }

    /// `started`, `queued` or `duplicate`, as the API says it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Accepted::Started(_) => "started",
            Accepted::Queued(_) => "queued",
            Accepted::Duplicate(_) => "duplicate",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("a turn is running in this session (send \"queue\": true to run after it)")]
    Busy,
    #[error(
        "a command the user started runs in this session: send the message again once it has ended"
    )]
    CommandRunning,
    #[error("the server is shutting down")]
    Stopping,
    #[error(transparent)]
    Store(#[from] agentd_store::StoreError),
}

impl Registry {
    /// Accept a message for `session`: start its turn now, queue it, or
    /// answer with the turn an earlier request with the same
    /// `client_request_id` started.
    pub async fn submit(
        &self,
        session: &SessionRecord,
        submission: Submission,
    ) -> Result<Accepted, SubmitError> {
        let coordination = self.inner.runtime.coordination.clone();
        coordination.submit(self, session, submission).await
    }

    /// [`Registry::submit`] when this process runs the session's turns.
    pub(crate) async fn submit_here(
        &self,
        session: &SessionRecord,
        submission: Submission,
    ) -> Result<Accepted, SubmitError> {
        let handle = self.handle(&session.id);
        let _submitting = handle.submit.lock().await;
        if let Some(request_id) = &submission.client_request_id {
            if let Some(turn_id) = handle.lock_turns().request_ids.get(request_id) {
                return Ok(Accepted::Duplicate(turn_id.clone()));
            }
            let store = &self.inner.runtime.store;
            if let Some(turn) = store.find_turn(&session.id, request_id).await? {
                return Ok(Accepted::Duplicate(turn.id));
            }
        }
        if self.inner.stopping.is_cancelled() {
            return Err(SubmitError::Stopping);
        }
        // Refused now if the store takes no writes (a full disk answers
        // reads): never a `202` for a turn that cannot be recorded.
        crate::health::probe_write(self.inner.runtime.store.as_ref()).await?;
        let pending = PendingTurn {
            turn_id: uuid::Uuid::now_v7().to_string(),
            kind: Ok(submission.kind),
            client_request_id: submission.client_request_id,
            by: submission.by,
        };
        let mut turns = handle.lock_turns();
        // Shutdown may have begun while the probe ran: its worker would
        // start after the server stopped waiting for turns.
        if self.inner.stopping.is_cancelled() {
            return Err(SubmitError::Stopping);
        }
        // Not even queued: the command may run up to its timeout.
        if turns.command_running {
            return Err(SubmitError::CommandRunning);
        }
        let busy = turns.running.as_ref().is_some_and(|r| !r.finishing) || !turns.queue.is_empty();
        if busy && !submission.queue {
            return Err(SubmitError::Busy);
        }
        if let Some(request_id) = &pending.client_request_id {
            turns
                .request_ids
                .insert(request_id.clone(), pending.turn_id.clone());
        }
        let turn_id = pending.turn_id.clone();
        if let Some(by) = &pending.by {
            self.inner.admissions.admitted(&by.name);
        }
        if turns.running.is_some() {
            // Behind a finishing turn it starts in a moment: not "queued".
            turns.queue.push_back(pending);
            return Ok(if busy {
                Accepted::Queued(turn_id)
            } else {
                Accepted::Started(turn_id)
            });
        }
        self.spawn_worker(&session.id, turns, pending);
        Ok(Accepted::Started(turn_id))
    }

    /// Whether `request_id` already made a turn of this session (here or in
    /// the store).
    pub async fn is_known_request(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> Result<bool, agentd_store::StoreError> {
        let known_here = {
            let entries = self.inner.lock_entries();
            entries
                .get(session_id)
                .is_some_and(|entry| entry.lock_turns().request_ids.contains_key(request_id))
        };
        if known_here {
            return Ok(true);
        }
        let store = &self.inner.runtime.store;
        Ok(store.find_turn(session_id, request_id).await?.is_some())
    }

    /// Run `pending` now: mark it running (under the `turns` lock the caller
    /// holds) and start the session's worker.
    fn spawn_worker(
        &self,
        session_id: &str,
        mut turns: MutexGuard<'_, TurnState>,
        pending: PendingTurn,
    ) {
        let cancel = self.inner.stopping.child_token();
        turns.running = Some(Running {
            turn_id: pending.turn_id.clone(),
            cancel: cancel.clone(),
            finishing: false,
        });
        drop(turns);
        let worker_handle = self.handle(session_id);
        let registry = self.clone();
        let work = async move {
            worker::drive(registry, worker_handle, pending, cancel).await;
        };
        match self.inner.runtime.threads.turns() {
            Some(turns) => self.inner.tasks.spawn_on(work, turns),
            None => self.inner.tasks.spawn(work),
        };
    }

    /// Run a turn this node took from the cluster's queue (after the turn
    /// running here, if one still finishes).
    pub(crate) fn start_claimed(&self, session_id: &str, pending: PendingTurn) {
        let handle = self.handle(session_id);
        let mut turns = handle.lock_turns();
        if turns.running.is_some() {
            turns.queue.push_back(pending);
            return;
        }
        self.spawn_worker(session_id, turns, pending);
    }
    /// After a turn: forget its request id and start the next queued turn, if
    /// any (with its cancel token), or mark the session idle.
    pub(crate) fn next_turn(
        &self,
        handle: &EntryHandle,
        finished: &PendingTurn,
    ) -> Option<(PendingTurn, CancellationToken)> {
        let mut turns = handle.lock_turns();
        if let Some(request_id) = &finished.client_request_id {
            turns.request_ids.remove(request_id);
        }
        match turns.queue.pop_front() {
            Some(next) if !self.inner.stopping.is_cancelled() => {
                let cancel = self.inner.stopping.child_token();
                turns.running = Some(Running {
                    turn_id: next.turn_id.clone(),
                    cancel: cancel.clone(),
                    finishing: false,
                });
                Some((next, cancel))
            }
            Some(next) => {
                // Shutting down: the worker records it as interrupted.
                turns.running = None;
                turns.queue.push_front(next);
                None
            }
            None => {
                turns.running = None;
                None
            }
        }
    }

    /// The running turn has emitted its `turn.finished`.
    pub(crate) fn finishing(&self, handle: &EntryHandle) {
        if let Some(running) = handle.lock_turns().running.as_mut() {
            running.finishing = true;
        }
    }

    /// Take the queued turns (at shutdown, to record them as interrupted).
    pub(crate) fn drain_queue(&self, handle: &EntryHandle) -> Vec<PendingTurn> {
        let mut turns = handle.lock_turns();
        let drained: Vec<PendingTurn> = turns.queue.drain(..).collect();
        for turn in &drained {
            if let Some(request_id) = &turn.client_request_id {
                turns.request_ids.remove(request_id);
            }
        }
        drained
    }
}
