//! The transcript: messages in order, stored losslessly as `Message` JSON.

use agentd_protocol::Message;

use super::PostgresStore;
use crate::dialect::sql;
use crate::queries::transcript::{INSERT_MESSAGES, TOUCH_SESSION};
use crate::records::{db, now, role_str, to_json, to_ms, to_u64};
use crate::{Fence, StoreError, StoreResult, StoredMessage};

sql!(
    /// At the session's next position (its row locked by [`TOUCH_SESSION`]).
    APPEND = INSERT_MESSAGES,
    "SELECT $1, $2, $3, COALESCE(MAX(position), 0) + 1, $4, $5, $6 \
     FROM messages WHERE session_id = $2 RETURNING position"
);

/// [`TOUCH_SESSION`] (`$1` now, `$2` session) only while node `$4` holds the
/// lease of turn `$3`, its row locked first (as every fenced write does) and
/// held to the commit. A node frozen before it commits must not keep that
/// row from a takeover: the transaction may then idle `$5` ms at most (the
/// server ends it after), under the lease timeout.
const TOUCH_FENCED: &str = "UPDATE sessions SET updated_at = $1 WHERE id = $2 \
     AND EXISTS (SELECT 1 FROM turn_leases \
       WHERE session_id = $2 AND turn_id = $3 AND node_id = $4 FOR SHARE) \
     RETURNING set_config('idle_in_transaction_session_timeout', $5, true)";

impl PostgresStore {
    pub(super) async fn append_message_impl(
        &self,
        session_id: &str,
        turn_id: Option<&str>,
        message: &Message,
    ) -> StoreResult<StoredMessage> {
        self.append_message_fenced(session_id, turn_id, None, message)
            .await
    }

    /// [`Self::append_message_impl`], with a `fence` stored only while its
    /// node holds its turn's lease (`LeaseLost` otherwise).
    pub(super) async fn append_message_fenced(
        &self,
        session_id: &str,
        turn_id: Option<&str>,
        fence: Option<&Fence>,
        message: &Message,
    ) -> StoreResult<StoredMessage> {
        // `content` holds the whole Message (role included) so that reading it
        // back needs nothing else; `role` is a copy for queries.
        let json = to_json(message, "message")?;
        let id = uuid::Uuid::now_v7().to_string();
        let at = now();

        let what = "appending message";
        let mut tx = self.pool.begin().await.map_err(db(what))?;
        // Touching the session first both checks it exists and locks its row,
        // so concurrent appends serialize here; the INSERT below is a new
        // statement (READ COMMITTED: a new snapshot) and sees their rows.
        let touch = match fence {
            None => sqlx::query(TOUCH_SESSION).bind(to_ms(at)).bind(session_id),
            Some(fence) => sqlx::query(TOUCH_FENCED)
                .bind(to_ms(at))
                .bind(session_id)
                .bind(&fence.turn_id)
                .bind(&fence.node_id)
                .bind(self.fence_hold_ms.to_string()),
        };
        let touched = touch.execute(&mut *tx).await.map_err(db(what))?;
        if touched.rows_affected() == 0 {
            // Before asking why on another connection: this one holds locks.
            tx.rollback().await.map_err(db(what))?;
            return Err(match fence {
                Some(fence) => self.refused(session_id, fence, what).await,
                None => StoreError::NotFound(format!("session {session_id}")),
            });
        }
        let position: i64 = sqlx::query_scalar(APPEND)
            .bind(&id)
            .bind(session_id)
            .bind(turn_id)
            .bind(role_str(message.role))
            .bind(&json)
            .bind(to_ms(at))
            .fetch_one(&mut *tx)
            .await
            .map_err(db(what))?;
        tx.commit().await.map_err(db(what))?;

        Ok(StoredMessage {
            id,
            session_id: session_id.to_owned(),
            turn_id: turn_id.map(str::to_owned),
            position: to_u64(position, "position")?,
            message: message.clone(),
            created_at: at,
        })
    }
}
