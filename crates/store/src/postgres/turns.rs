//! Starting and ending a turn: PostgreSQL gains no round trip by sending
//! statements together, so these are the shared transaction and the two
//! writes one after the other.

use agentd_protocol::TurnStatus;

use super::PostgresStore;
use crate::prelude::*;
use crate::{SessionRecord, SessionUpdate, StoreResult, TurnStart};

impl PostgresStore {
    pub(super) async fn start_turn_impl(
        &self,
        session_id: &str,
        turn_id: &str,
        client_request_id: Option<&str>,
    ) -> StoreResult<TurnStart> {
        self.start_turn_in_transaction(session_id, turn_id, client_request_id)
            .await
    }

    pub(super) async fn finish_turn_with_session_impl(
        &self,
        turn_id: &str,
        status: TurnStatus,
        session_id: &str,
        update: SessionUpdate,
    ) -> StoreResult<SessionRecord> {
        self.finish_turn(turn_id, status).await?;
        self.update_session(session_id, update).await
    }
}
