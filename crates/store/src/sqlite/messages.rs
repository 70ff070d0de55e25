//! The transcript: messages in order, stored losslessly as `Message` JSON.

use agentd_protocol::Message;

use super::SqliteStore;
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
}
