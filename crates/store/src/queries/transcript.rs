//! [`TranscriptStore`](crate::TranscriptStore): the messages in order,
//! compactions, and rewinding the transcript (which drops the checkpoints
//! and compactions past the point rewound to). Appending a message is each
//! backend's own (`append_message_impl`): SQLite's goes through its writer.

use crate::dialect::sql;
use crate::records::COMPACTION_COLUMNS;

/// The start of every insert of messages (the backends append their own rows).
pub(crate) const INSERT_MESSAGES: &str =
    "INSERT INTO messages (id, session_id, turn_id, position, role, content, created_at) ";

/// The start of every insert of events.
pub(crate) const INSERT_EVENTS: &str =
    "INSERT INTO events (session_id, seq, type, data, created_at) ";

pub(crate) const MESSAGE_COLUMNS: &str = "id, session_id, turn_id, position, content, created_at";

sql!(pub(crate) MESSAGES = "SELECT ", MESSAGE_COLUMNS,
     " FROM messages WHERE session_id = $1 ORDER BY position");

sql!(pub(crate) MESSAGES_FROM = "SELECT ", MESSAGE_COLUMNS,
     " FROM messages WHERE session_id = $1 AND position >= $2 ORDER BY position");

sql!(
    /// `trigger`, an SQL keyword, is quoted.
    pub(crate) INSERT_COMPACTION = "INSERT INTO compactions (", COMPACTION_COLUMNS,
     ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)");

sql!(pub(crate) LATEST_COMPACTION = "SELECT ", COMPACTION_COLUMNS,
     " FROM compactions WHERE session_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1");

pub(crate) const TURN_POSITION: &str =
    "SELECT MIN(position) AS first FROM messages WHERE session_id = $1 AND turn_id = $2";

/// Bumps `updated_at` (`$1`) of session `$2`; no row means no session. In
/// PostgreSQL this also locks the session row, so truncation and message
/// appends serialize.
pub(crate) const TOUCH_SESSION: &str = "UPDATE sessions SET updated_at = $1 WHERE id = $2";

/// Truncating history, in this order in one transaction, each bound with
/// `(session_id, from_position)`.
pub(crate) const TRUNCATE_HISTORY: [&str; 3] = [
    // First, while the messages are there: a compaction created since the
    // earliest of the messages to delete may summarise it.
    "DELETE FROM compactions WHERE session_id = $1 AND (first_kept_position > $2 \
     OR created_at >= (SELECT MIN(created_at) FROM messages \
                       WHERE session_id = $1 AND position >= $2))",
    // A checkpoint at `from_position` is the state rewound to: it stays.
    "DELETE FROM checkpoints WHERE session_id = $1 AND message_position > $2",
    // Last, so that its count is the answer.
    "DELETE FROM messages WHERE session_id = $1 AND position >= $2",
];

/// Binds a [`crate::CompactionRecord`]'s ten values, `$1` to `$10` of
/// [`INSERT_COMPACTION`] (an `Err` for a count beyond `i64`).
macro_rules! bind_compaction {
    ($query:expr, $r:expr) => {{
        let r: &$crate::CompactionRecord = $r;
        (|| {
            Ok::<_, $crate::StoreError>(
                $query
                    .bind(&r.id)
                    .bind(&r.session_id)
                    .bind(&r.turn_id)
                    .bind(&r.trigger)
                    .bind(&r.summary)
                    .bind($crate::records::to_json(&r.context, "compaction context")?)
                    .bind(r.first_kept_position)
                    .bind($crate::records::to_i64(r.tokens_before, "tokens_before")?)
                    .bind($crate::records::to_i64(r.tokens_after, "tokens_after")?)
                    .bind($crate::records::to_ms(r.created_at)),
            )
        })()
    }};
}
pub(crate) use bind_compaction;

macro_rules! transcript_store {
    ($store:ty) => {
        const _: () = {
            use agentd_protocol::Message;

            use $crate::queries::transcript as q;
            use $crate::records::{Columns, compaction, db, execute, fetch_all, fetch_optional};
            use $crate::records::{insert_error, message, now, to_ms};
            use $crate::{CompactionRecord, StoreError, StoreResult, StoredMessage};

            #[async_trait::async_trait]
            impl $crate::TranscriptStore for $store {
                async fn append_message(
                    &self,
                    session_id: &str,
                    turn_id: Option<&str>,
                    message: &Message,
                ) -> StoreResult<StoredMessage> {
                    self.append_message_impl(session_id, turn_id, message).await
                }

                /// The whole transcript in order; empty for an unknown session.
                async fn messages(&self, session_id: &str) -> StoreResult<Vec<StoredMessage>> {
                    let query = sqlx::query(q::MESSAGES).bind(session_id);
                    fetch_all(&self.pool, query, "reading messages", message).await
                }

                async fn messages_from(
                    &self,
                    session_id: &str,
                    from_position: u64,
                ) -> StoreResult<Vec<StoredMessage>> {
                    let (context, from) = (
                        "reading messages",
                        i64::try_from(from_position).unwrap_or(i64::MAX),
                    );
                    let sql = q::MESSAGES_FROM;
                    if let Some(rows) =
                        self.read_here(sql, &[&session_id, &from], context, |row| message(row))
                    {
                        return rows;
                    }
                    let query = sqlx::query(sql).bind(session_id).bind(from);
                    fetch_all(&self.pool, query, context, message).await
                }

                async fn add_compaction(&self, r: &CompactionRecord) -> StoreResult<()> {
                    let query = q::bind_compaction!(sqlx::query(q::INSERT_COMPACTION), r)?;
                    let _write = self.write_guard().await;
                    query.execute(self.writer()).await.map_err(insert_error(
                        "storing a compaction",
                        &r.session_id,
                        &r.id,
                    ))?;
                    Ok(())
                }

                async fn add_compaction_fenced(
                    &self,
                    r: &CompactionRecord,
                    fence: &$crate::Fence,
                ) -> StoreResult<()> {
                    self.add_compaction_fenced_impl(r, fence).await
                }

                async fn latest_compaction(
                    &self,
                    session_id: &str,
                ) -> StoreResult<Option<CompactionRecord>> {
                    let context = "reading the latest compaction";
                    let sql = q::LATEST_COMPACTION;
                    if let Some(rows) =
                        self.read_here(sql, &[&session_id], context, |row| compaction(row))
                    {
                        return rows.map(|rows| rows.into_iter().next());
                    }
                    let query = sqlx::query(sql).bind(session_id);
                    fetch_optional(&self.pool, query, context, compaction).await
                }

                async fn turn_position(
                    &self,
                    session_id: &str,
                    turn_id: &str,
                ) -> StoreResult<Option<i64>> {
                    let row = sqlx::query(q::TURN_POSITION)
                        .bind(session_id)
                        .bind(turn_id)
                        .fetch_one(&self.pool)
                        .await
                        .map_err(db("finding a turn's first message"))?;
                    row.opt_int("first")
                }

                async fn truncate_history(
                    &self,
                    session_id: &str,
                    from_position: i64,
                ) -> StoreResult<u64> {
                    let ctx = "truncating history";
                    let _write = self.write_guard().await;
                    let mut tx = self.begin_write().await.map_err(db(ctx))?;
                    let touch = sqlx::query(q::TOUCH_SESSION)
                        .bind(to_ms(now()))
                        .bind(session_id);
                    if execute(&mut *tx, touch, ctx).await?.rows_affected() == 0 {
                        return Err(StoreError::NotFound(format!("session {session_id}")));
                    }
                    let mut deleted = 0;
                    for statement in q::TRUNCATE_HISTORY {
                        let query = sqlx::query(statement).bind(session_id).bind(from_position);
                        deleted = execute(&mut *tx, query, ctx).await?.rows_affected();
                    }
                    tx.commit().await.map_err(db(ctx))?;
                    Ok(deleted)
                }
            }
        };
    };
}
pub(crate) use transcript_store;
