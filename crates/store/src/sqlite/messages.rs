//! The transcript: messages in order, stored losslessly as `Message` JSON.

use agentd_protocol::Message;

use super::SqliteStore;
use super::util::db;
pub(super) use crate::records::message as message_from_row;
use crate::{LogEntry, Logged, StoreError, StoreResult, StoredMessage};

impl SqliteStore {
    /// Through the writer, as a log of one message (its insert is written
    /// once, there): the session's next position, its `updated_at` touched.
    pub(super) async fn append_message_impl(
        &self,
        session_id: &str,
        turn_id: Option<&str>,
        message: &Message,
    ) -> StoreResult<StoredMessage> {
        let appended = self
            .append_log_impl(session_id, &[LogEntry::Message { turn_id, message }])
            .await;
        if let Some(error) = appended.error {
            return Err(error);
        }
        match appended.stored.into_iter().next() {
            Some(Logged::Message(stored)) => Ok(stored),
            _ => Err(StoreError::Database("appending message: no result".into())),
        }
    }

    /// The whole transcript in order; empty for an unknown session.
    pub(super) async fn messages_impl(&self, session_id: &str) -> StoreResult<Vec<StoredMessage>> {
        let rows = sqlx::query(
            "SELECT id, session_id, turn_id, position, content, created_at \
             FROM messages WHERE session_id = ? ORDER BY position",
        )
        .bind(session_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db("reading messages"))?;
        rows.iter().map(message_from_row).collect()
    }
}
