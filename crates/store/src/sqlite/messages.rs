//! The transcript: messages in order, stored losslessly as `Message` JSON.

use agentd_protocol::{Message, Role};
use sqlx::Row;

use super::SqliteStore;
use super::util::{db, now, to_json, to_ms, to_u64};
pub(super) use crate::records::message as message_from_row;
use crate::{StoreError, StoreResult, StoredMessage};

pub(super) fn role_str(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

impl SqliteStore {
    pub(super) async fn append_message_impl(
        &self,
        session_id: &str,
        turn_id: Option<&str>,
        message: &Message,
    ) -> StoreResult<StoredMessage> {
        // `content` holds the whole Message (role included) so that reading it
        // back needs nothing else; `role` is a copy for queries.
        let json = to_json(message, "message")?;
        let id = uuid::Uuid::now_v7().to_string();
        let at = now();

        // One round trip to the connection's thread (each costs two thread
        // hand-offs): touch the session, insert at the next position, commit.
        // No row back means no such session.
        let _write = self.write_guard().await;
        let mut conn = self
            .writes
            .acquire()
            .await
            .map_err(db("appending message"))?;
        let rows = sqlx::query(
            "BEGIN IMMEDIATE;\n\
             UPDATE sessions SET updated_at = ? WHERE id = ?;\n\
             INSERT INTO messages (id, session_id, turn_id, position, role, content, created_at) \
             SELECT ?, s.id, ?, \
               COALESCE((SELECT MAX(position) FROM messages WHERE session_id = s.id), 0) + 1, \
               ?, ?, ? \
             FROM sessions AS s WHERE s.id = ? \
             RETURNING position;\n\
             COMMIT;",
        )
        .bind(to_ms(at))
        .bind(session_id)
        .bind(&id)
        .bind(turn_id)
        .bind(role_str(message.role))
        .bind(&json)
        .bind(to_ms(at))
        .bind(session_id)
        .fetch_all(&mut *conn)
        .await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(e) => {
                super::writer::rollback(&mut conn).await;
                return Err(db("appending message")(e));
            }
        };
        let Some(row) = rows.first() else {
            return Err(StoreError::NotFound(format!("session {session_id}")));
        };
        let position: i64 = row.try_get(0).map_err(db("appending message"))?;

        Ok(StoredMessage {
            id,
            session_id: session_id.to_owned(),
            turn_id: turn_id.map(str::to_owned),
            position: to_u64(position, "position")?,
            message: message.clone(),
            created_at: at,
        })
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
