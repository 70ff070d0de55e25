//! Users and their API tokens (stored as SHA-256 hashes, never in clear),
//! plus two small lookups the server needs: a turn by `client_request_id` and
//! the session count.

use super::PostgresStore;
use super::util::db;
use crate::{StoreResult, TurnRecord};

impl PostgresStore {
    pub(super) async fn find_turn_impl(
        &self,
        session_id: &str,
        client_request_id: &str,
    ) -> StoreResult<Option<TurnRecord>> {
        let row = sqlx::query(
            "SELECT id, session_id, status, client_request_id, started_at, finished_at \
             FROM turns WHERE session_id = $1 AND client_request_id = $2",
        )
        .bind(session_id)
        .bind(client_request_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db("reading turn"))?;
        row.as_ref().map(crate::records::turn).transpose()
    }
}
