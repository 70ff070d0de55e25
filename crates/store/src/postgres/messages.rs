//! The transcript: messages in order, stored losslessly as `Message` JSON.

use agentd_protocol::Message;

use super::PostgresStore;
use super::events::HOLD_LEASE;
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

        let mut tx = self.pool.begin().await.map_err(db("appending message"))?;
        // The lease row first, as every fenced append locks it (then the
        // session's): held to the commit, so no takeover comes in between.
        if let Some(fence) = fence {
            let held = sqlx::query(HOLD_LEASE)
                .bind(session_id)
                .bind(&fence.turn_id)
                .bind(&fence.node_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db("appending message"))?;
            if held.is_none() {
                return Err(
                    if self.session_exists(session_id, "appending message").await? {
                        fence.lost(session_id)
                    } else {
                        StoreError::NotFound(format!("session {session_id}"))
                    },
                );
            }
        }
        // Touching the session first both checks it exists and locks its row,
        // so concurrent appends serialize here; the INSERT below is a new
        // statement (READ COMMITTED: a new snapshot) and sees their rows.
        let touched = sqlx::query(TOUCH_SESSION)
            .bind(to_ms(at))
            .bind(session_id)
            .execute(&mut *tx)
            .await
            .map_err(db("appending message"))?;
        if touched.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("session {session_id}")));
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
            .map_err(db("appending message"))?;
        tx.commit().await.map_err(db("appending message"))?;

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
