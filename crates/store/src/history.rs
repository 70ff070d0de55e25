//! Checkpoints, compactions, and rewinding the transcript (which drops the
//! checkpoints and compactions past the point rewound to), written once for
//! both backends: [`history_impl!`] expands to the same methods on each
//! store.
//!
//! The statements use `$n` placeholders, which sqlx binds by number on SQLite
//! as on PostgreSQL; every `$n` first appears in increasing order (SQLite
//! numbers named parameters by first appearance). `trigger`, an SQL keyword,
//! is quoted.

use crate::records::{CHECKPOINT_COLUMNS, COMPACTION_COLUMNS};

pub(crate) const INSERT_CHECKPOINT: &str = "INSERT INTO checkpoints (id, session_id, turn_id, \
    message_position, manifest_hash, base_checkpoint_id, files, stats, created_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";

/// Binds a checkpoint row's columns in [`INSERT_CHECKPOINT`]'s order (`files`
/// and `stats` as JSON text).
macro_rules! bind_checkpoint {
    ($query:expr, $r:expr, $files:expr, $stats:expr) => {
        $query
            .bind(&$r.id)
            .bind(&$r.session_id)
            .bind(&$r.turn_id)
            .bind($r.message_position)
            .bind(&$r.manifest_hash)
            .bind(&$r.base_checkpoint_id)
            .bind($files)
            .bind($stats)
            .bind($crate::records::to_ms($r.created_at))
    };
}
pub(crate) use bind_checkpoint;

/// Binds a [`crate::SessionUpdate`]'s nine values in the order of the
/// backends' `UPDATE sessions SET title, status, the five totals, turns,
/// updated_at` (an `Err` for a count beyond `i64`).
macro_rules! bind_session_update {
    ($query:expr, $update:expr) => {{
        let update: $crate::SessionUpdate = $update;
        let usage = update.add_usage.unwrap_or_default();
        let to_i64 = $crate::records::to_i64;
        (|| {
            Ok::<_, $crate::StoreError>(
                $query
                    .bind(update.title)
                    .bind(update.status.map($crate::SessionStatus::as_str))
                    .bind(to_i64(usage.input_tokens, "input_tokens")?)
                    .bind(to_i64(usage.output_tokens, "output_tokens")?)
                    .bind(to_i64(usage.cache_read_tokens, "cache_read_tokens")?)
                    .bind(to_i64(usage.cache_write_tokens, "cache_write_tokens")?)
                    .bind(update.add_cost_usd.unwrap_or(0.0))
                    .bind(to_i64(update.add_turns.unwrap_or(0), "turns")?)
                    .bind($crate::records::to_ms($crate::records::now())),
            )
        })()
    }};
}
pub(crate) use bind_session_update;

/// Marks session `$3` running (`$1`) at `$2`, when it starts a turn.
pub(crate) const MARK_RUNNING: &str =
    "UPDATE sessions SET status = $1, updated_at = $2 WHERE id = $3";

pub(crate) const MESSAGES_FROM: &str = "SELECT id, session_id, turn_id, position, content, \
    created_at FROM messages WHERE session_id = $1 AND position >= $2 ORDER BY position";

pub(crate) fn list_checkpoints() -> String {
    format!(
        "SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE session_id = $1 \
         ORDER BY created_at, id"
    )
}

/// The session's latest checkpoint (`which` = 0) and latest keyframe (one
/// with no base, `which` = 1), in one query.
pub(crate) fn latest_checkpoints() -> String {
    let latest = |keyframe: &str, which: u8| {
        format!(
            "SELECT * FROM (SELECT {CHECKPOINT_COLUMNS}, {which} AS which FROM checkpoints \
             WHERE session_id = $1{keyframe} ORDER BY created_at DESC, id DESC LIMIT 1) AS c{which}"
        )
    };
    format!(
        "{} UNION ALL {}",
        latest("", 0),
        latest(" AND base_checkpoint_id IS NULL", 1)
    )
}

pub(crate) fn get_checkpoint() -> String {
    format!("SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE id = $1")
}

pub(crate) const INSERT_COMPACTION: &str = "INSERT INTO compactions (id, session_id, turn_id, \
    \"trigger\", summary, context, first_kept_position, tokens_before, tokens_after, created_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";

pub(crate) fn latest_compaction() -> String {
    format!(
        "SELECT {COMPACTION_COLUMNS} FROM compactions WHERE session_id = $1 \
         ORDER BY created_at DESC, id DESC LIMIT 1"
    )
}

/// Bumps `updated_at` (`$1`) of session `$2`; no row means no session. In
/// PostgreSQL this also locks the session row, so truncation and message
/// appends serialize.
/// A turn started once per `client_request_id` (`$1` id, `$2` session,
/// `$3` request id, `$4` start), or nothing when the id was used.
pub(crate) fn insert_turn() -> String {
    format!(
        "INSERT INTO turns (id, session_id, status, client_request_id, started_at) \
         VALUES ($1, $2, NULL, $3, $4) \
         ON CONFLICT (session_id, client_request_id) DO NOTHING \
         RETURNING {}",
        crate::records::TURN_COLUMNS
    )
}

/// The turn of session `$1` started with request id `$2`.
pub(crate) fn turn_by_request() -> String {
    format!(
        "SELECT {} FROM turns WHERE session_id = $1 AND client_request_id = $2",
        crate::records::TURN_COLUMNS
    )
}

/// Whether session `$1` exists (a row of its id).
pub(crate) const SESSION_EXISTS: &str = "SELECT id FROM sessions WHERE id = $1";

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

/// The `*_impl` methods behind the checkpoint, compaction and truncation
/// methods of `Store`, for a store type with a `pool` and these methods:
/// `write_guard()` (awaited; held around every write), `writer()` (the pool
/// writes run on) and `begin_write()`
/// (a write transaction, as `Result<_, sqlx::Error>`).
macro_rules! history_impl {
    ($store:ty) => {
        impl $store {
            pub(super) async fn create_checkpoint_impl(
                &self,
                r: &$crate::CheckpointRecord,
            ) -> $crate::StoreResult<()> {
                use $crate::records::{insert_error, to_json};
                let files = to_json(&r.files, "checkpoint files")?;
                let stats = to_json(&r.stats, "checkpoint stats")?;
                let _write = self.write_guard().await;
                $crate::history::bind_checkpoint!(
                    sqlx::query($crate::history::INSERT_CHECKPOINT),
                    r,
                    files,
                    stats
                )
                .execute(self.writer())
                .await
                .map_err(insert_error("storing a checkpoint", &r.session_id, &r.id))?;
                Ok(())
            }

            /// The messages from `from_position` on, in order.
            pub(super) async fn messages_from_impl(
                &self,
                session_id: &str,
                from_position: u64,
            ) -> $crate::StoreResult<Vec<$crate::StoredMessage>> {
                let rows = sqlx::query($crate::history::MESSAGES_FROM)
                    .bind(session_id)
                    .bind(i64::try_from(from_position).unwrap_or(i64::MAX))
                    .fetch_all(&self.pool)
                    .await
                    .map_err($crate::records::db("reading messages"))?;
                rows.iter().map($crate::records::message).collect()
            }

            pub(super) async fn list_checkpoints_impl(
                &self,
                session_id: &str,
            ) -> $crate::StoreResult<Vec<$crate::CheckpointRecord>> {
                let rows = sqlx::query(&$crate::history::list_checkpoints())
                    .bind(session_id)
                    .fetch_all(&self.pool)
                    .await
                    .map_err($crate::records::db("listing checkpoints"))?;
                rows.iter().map($crate::records::checkpoint).collect()
            }

            pub(super) async fn latest_checkpoints_impl(
                &self,
                session_id: &str,
            ) -> $crate::StoreResult<$crate::LatestCheckpoints> {
                let rows = sqlx::query(&$crate::history::latest_checkpoints())
                    .bind(session_id)
                    .fetch_all(&self.pool)
                    .await
                    .map_err($crate::records::db("reading the latest checkpoints"))?;
                let mut latest = $crate::LatestCheckpoints::default();
                for row in &rows {
                    let which: i32 = sqlx::Row::try_get(row, "which")
                        .map_err($crate::records::db("reading the latest checkpoints"))?;
                    let record = Some($crate::records::checkpoint(row)?);
                    if which == 0 {
                        latest.last = record;
                    } else {
                        latest.keyframe = record;
                    }
                }
                Ok(latest)
            }

            pub(super) async fn get_checkpoint_impl(
                &self,
                id: &str,
            ) -> $crate::StoreResult<Option<$crate::CheckpointRecord>> {
                let row = sqlx::query(&$crate::history::get_checkpoint())
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err($crate::records::db("reading a checkpoint"))?;
                row.as_ref().map($crate::records::checkpoint).transpose()
            }

            pub(super) async fn add_compaction_impl(
                &self,
                r: &$crate::CompactionRecord,
            ) -> $crate::StoreResult<()> {
                use $crate::records::{insert_error, to_i64, to_ms};
                let tokens_before = to_i64(r.tokens_before, "tokens_before")?;
                let tokens_after = to_i64(r.tokens_after, "tokens_after")?;
                let context = $crate::records::to_json(&r.context, "compaction context")?;
                let _write = self.write_guard().await;
                sqlx::query($crate::history::INSERT_COMPACTION)
                    .bind(&r.id)
                    .bind(&r.session_id)
                    .bind(&r.turn_id)
                    .bind(&r.trigger)
                    .bind(&r.summary)
                    .bind(context)
                    .bind(r.first_kept_position)
                    .bind(tokens_before)
                    .bind(tokens_after)
                    .bind(to_ms(r.created_at))
                    .execute(self.writer())
                    .await
                    .map_err(insert_error("storing a compaction", &r.session_id, &r.id))?;
                Ok(())
            }

            pub(super) async fn turn_position_impl(
                &self,
                session_id: &str,
                turn_id: &str,
            ) -> $crate::StoreResult<Option<i64>> {
                use $crate::records::Columns;
                let row = sqlx::query(
                    "SELECT MIN(position) AS first FROM messages \
                     WHERE session_id = $1 AND turn_id = $2",
                )
                .bind(session_id)
                .bind(turn_id)
                .fetch_one(&self.pool)
                .await
                .map_err($crate::records::db("finding a turn's first message"))?;
                row.opt_int("first")
            }

            pub(super) async fn latest_compaction_impl(
                &self,
                session_id: &str,
            ) -> $crate::StoreResult<Option<$crate::CompactionRecord>> {
                let row = sqlx::query(&$crate::history::latest_compaction())
                    .bind(session_id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err($crate::records::db("reading the latest compaction"))?;
                row.as_ref().map($crate::records::compaction).transpose()
            }

            pub(super) async fn truncate_history_impl(
                &self,
                session_id: &str,
                from_position: i64,
            ) -> $crate::StoreResult<u64> {
                use $crate::records::{db, now, to_ms};
                let ctx = "truncating history";
                let _write = self.write_guard().await;
                let mut tx = self.begin_write().await.map_err(db(ctx))?;
                let touched = sqlx::query($crate::history::TOUCH_SESSION)
                    .bind(to_ms(now()))
                    .bind(session_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(db(ctx))?;
                if touched.rows_affected() == 0 {
                    return Err($crate::StoreError::NotFound(format!(
                        "session {session_id}"
                    )));
                }
                let mut deleted = 0;
                for statement in $crate::history::TRUNCATE_HISTORY {
                    deleted = sqlx::query(statement)
                        .bind(session_id)
                        .bind(from_position)
                        .execute(&mut *tx)
                        .await
                        .map_err(db(ctx))?
                        .rows_affected();
                }
                tx.commit().await.map_err(db(ctx))?;
                Ok(deleted)
            }
        }
    };
}

pub(crate) use history_impl;
