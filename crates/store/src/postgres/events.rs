//! The event log: per-session `seq` 1, 2, 3, … taken from `sessions.last_seq`
//! in the same statement that inserts the event. The UPDATE locks the session
//! row, so appends to one session serialize (across processes too) and a
//! failed or abandoned append rolls back its `seq` with it: no gaps.
//!
//! In cluster mode every append also sends `NOTIFY agentd_events, '<session>
//! <first> <last>'` in its transaction (delivered at commit, in commit order):
//! other nodes' live streams wake up on it and read the events from this table.

use agentd_protocol::{Event, EventEnvelope};

use super::PostgresStore;
use crate::dialect::sql;
use crate::queries::transcript::INSERT_EVENTS;
use crate::records::Columns;
use crate::records::{db, to_json};
use crate::{LogAppend, LogEntry, StoreError, StoreResult, append_one_kind_at_a_time};

/// `$1` session: `last_seq` advanced by the `$2` events under the row's lock.
const NEXT_SEQS: &str =
    "WITH s AS (UPDATE sessions SET last_seq = last_seq + $2 WHERE id = $1 RETURNING last_seq)";

/// Tells the cluster `<session> <first> <last>` at commit.
const NOTIFY_SEQS: &str = ", n AS (SELECT pg_notify('agentd_events', $1 || ' ' || \
     (s.last_seq - $2 + 1) || ' ' || s.last_seq) FROM s)";

/// The database's clock, read once the row lock is held.
const NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

const RETURNING: &str = " RETURNING seq, created_at";

sql!(
    /// `$2` events with types `$3` and data `$4`.
    ROWS = "SELECT $1, s.last_seq - $2 + v.ord, v.type, v.data, ", NOW_MS, " FROM s");
const ROWS_OF_ARRAYS: &str =
    ", unnest($3::text[], $4::text[]) WITH ORDINALITY AS v(type, data, ord)";

sql!(
    APPEND_MANY = NEXT_SEQS,
    " ",
    INSERT_EVENTS,
    ROWS,
    ROWS_OF_ARRAYS,
    RETURNING
);
sql!(
    APPEND_MANY_NOTIFY = NEXT_SEQS,
    NOTIFY_SEQS,
    " ",
    INSERT_EVENTS,
    ROWS,
    ", n",
    ROWS_OF_ARRAYS,
    RETURNING
);

impl PostgresStore {
    /// One statement, so one implicit transaction: `last_seq` advances by the
    /// batch size under the row lock, so the batch gets consecutive `seq`s,
    /// all or nothing. The timestamp is the database's clock read after the
    /// row lock is held, so `at` does not decrease as `seq` grows (whichever
    /// node appends).
    pub(super) async fn append_events_impl(
        &self,
        session_id: &str,
        events: &[Event],
    ) -> StoreResult<Vec<EventEnvelope>> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let types: Vec<&str> = events.iter().map(Event::type_name).collect();
        let data = events
            .iter()
            .map(|e| to_json(e, "event"))
            .collect::<StoreResult<Vec<String>>>()?;
        let count = i64::try_from(events.len())
            .map_err(|_| StoreError::Database("appending events: too many".into()))?;
        let rows = sqlx::query(if self.notify_events {
            APPEND_MANY_NOTIFY
        } else {
            APPEND_MANY
        })
        .bind(session_id)
        .bind(count)
        .bind(&types)
        .bind(&data)
        .fetch_all(&self.pool)
        .await
        .map_err(db(match events.len() {
            1 => "appending event",
            _ => "appending events",
        }))?;
        if rows.is_empty() {
            return Err(StoreError::NotFound(format!("session {session_id}")));
        }
        let mut stamps = rows
            .iter()
            .map(|row| Ok((row.count("seq")?, row.time("created_at")?)))
            .collect::<StoreResult<Vec<_>>>()?;
        // RETURNING order is unspecified: seqs were assigned in input order.
        stamps.sort_unstable_by_key(|(seq, _)| *seq);
        if stamps.len() != events.len() {
            return Err(StoreError::Corrupt(format!(
                "appending events: {} stored for {} sent",
                stamps.len(),
                events.len()
            )));
        }
        Ok(events
            .iter()
            .zip(stamps)
            .map(|(event, (seq, at))| EventEnvelope {
                seq,
                session_id: session_id.to_owned(),
                at,
                event: event.clone(),
            })
            .collect())
    }

    /// Each run of events in one statement, each message on its own.
    pub(super) async fn append_log_impl(
        &self,
        session_id: &str,
        entries: &[LogEntry<'_>],
    ) -> LogAppend {
        append_one_kind_at_a_time(self, session_id, entries).await
    }
}
