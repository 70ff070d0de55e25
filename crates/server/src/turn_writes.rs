//! A turn's own writes besides those its `StoreSink` makes: its row started
//! and finished, its session's status and totals, and the end the worker
//! records for a turn that could not run. In a cluster each is fenced by the
//! turn's lease ([`agentd_store::Fence`], see `cluster::leases`): once
//! another node has taken the turn over, nothing is written
//! (`StoreError::LeaseLost`), so a node woken after losing it can neither
//! recreate the turn nor mark its session running again.

use agentd_protocol::{Event, EventEnvelope, TurnStatus};
use agentd_store::{Fence, LogEntry, SessionRecord, SessionUpdate, Store, StoreError, TurnStart};

use crate::runtime::Runtime;

impl Runtime {
    /// The turn's row, its session marked running.
    pub(crate) async fn record_turn_start(
        &self,
        session_id: &str,
        turn_id: &str,
        client_request_id: Option<&str>,
    ) -> Result<TurnStart, StoreError> {
        match self.fence_for(turn_id) {
            Some(fence) => {
                self.store
                    .start_turn_fenced(session_id, &fence, client_request_id)
                    .await
            }
            None => {
                self.store
                    .start_turn(session_id, turn_id, client_request_id)
                    .await
            }
        }
    }

    /// The turn's status (the first one recorded wins).
    pub(crate) async fn record_turn_status(
        &self,
        session_id: &str,
        turn_id: &str,
        status: TurnStatus,
    ) -> Result<(), StoreError> {
        match self.fence_for(turn_id) {
            Some(fence) => {
                self.store
                    .finish_turn_fenced(session_id, &fence, status)
                    .await
            }
            None => self.store.finish_turn(turn_id, status).await,
        }
    }

    /// The session's `update` made by its turn `turn_id`.
    pub(crate) async fn update_session_for_turn(
        &self,
        session_id: &str,
        turn_id: &str,
        update: SessionUpdate,
    ) -> Result<SessionRecord, StoreError> {
        update_session_as(
            self.store.as_ref(),
            session_id,
            self.fence_for(turn_id).as_ref(),
            update,
        )
        .await
    }

    /// The turn's status, then the session's `update` (alone: in one
    /// transaction where the backend can).
    pub(crate) async fn record_turn_end(
        &self,
        session_id: &str,
        turn_id: &str,
        status: TurnStatus,
        update: SessionUpdate,
    ) -> Result<(), StoreError> {
        if self.fence_for(turn_id).is_none() {
            self.store
                .finish_turn_with_session(turn_id, status, session_id, update)
                .await?;
            return Ok(());
        }
        self.record_turn_status(session_id, turn_id, status).await?;
        self.update_session_for_turn(session_id, turn_id, update)
            .await?;
        Ok(())
    }

    /// The turn's own `events`, stored in one commit.
    pub(crate) async fn append_turn_events(
        &self,
        session_id: &str,
        turn_id: &str,
        events: &[Event],
    ) -> Result<Vec<EventEnvelope>, StoreError> {
        let Some(fence) = self.fence_for(turn_id) else {
            return self.store.append_events(session_id, events).await;
        };
        let entries: Vec<LogEntry> = events.iter().map(LogEntry::Event).collect();
        // One run of events: stored whole or not at all.
        self.store
            .append_log_fenced(session_id, &fence, &entries)
            .await
            .into_events()
    }
}

/// The session's `update` by a turn, fenced by its lease when it has one.
pub(crate) async fn update_session_as(
    store: &dyn Store,
    session_id: &str,
    fence: Option<&Fence>,
    update: SessionUpdate,
) -> Result<SessionRecord, StoreError> {
    match fence {
        Some(fence) => store.update_session_fenced(session_id, fence, update).await,
        None => store.update_session(session_id, update).await,
    }
}
