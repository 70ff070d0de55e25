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
use super::util::{db, to_json};
use crate::records::Columns;
use crate::{StoreError, StoreResult};

/// One event; `seq` and `at` come back.
const APPEND_ONE: &str = "WITH s AS (\
       UPDATE sessions SET last_seq = last_seq + 1 WHERE id = $1 RETURNING last_seq\
     ) \
     INSERT INTO events (session_id, seq, type, data, created_at) \
     SELECT $1, s.last_seq, $2, $3, (extract(epoch FROM clock_timestamp()) * 1000)::bigint \
     FROM s RETURNING seq, created_at";

const APPEND_ONE_NOTIFY: &str = "WITH s AS (\
       UPDATE sessions SET last_seq = last_seq + 1 WHERE id = $1 RETURNING last_seq\
     ), n AS (SELECT pg_notify('agentd_events', $1 || ' ' || s.last_seq || ' ' || s.last_seq) \
       FROM s) \
     INSERT INTO events (session_id, seq, type, data, created_at) \
     SELECT $1, s.last_seq, $2, $3, (extract(epoch FROM clock_timestamp()) * 1000)::bigint \
     FROM s, n RETURNING seq, created_at";

/// A batch: `$2` events with types `$3` and data `$4`.
const APPEND_MANY: &str = "WITH s AS (\
       UPDATE sessions SET last_seq = last_seq + $2 WHERE id = $1 RETURNING last_seq\
     ) \
     INSERT INTO events (session_id, seq, type, data, created_at) \
     SELECT $1, s.last_seq - $2 + v.ord, v.type, v.data, \
       (extract(epoch FROM clock_timestamp()) * 1000)::bigint \
     FROM s, unnest($3::text[], $4::text[]) WITH ORDINALITY AS v(type, data, ord) \
     RETURNING seq, created_at";

const APPEND_MANY_NOTIFY: &str = "WITH s AS (\
       UPDATE sessions SET last_seq = last_seq + $2 WHERE id = $1 RETURNING last_seq\
     ), n AS (SELECT pg_notify('agentd_events', \
       $1 || ' ' || (s.last_seq - $2 + 1) || ' ' || s.last_seq) FROM s) \
     INSERT INTO events (session_id, seq, type, data, created_at) \
     SELECT $1, s.last_seq - $2 + v.ord, v.type, v.data, \
       (extract(epoch FROM clock_timestamp()) * 1000)::bigint \
     FROM s, n, unnest($3::text[], $4::text[]) WITH ORDINALITY AS v(type, data, ord) \
     RETURNING seq, created_at";

impl PostgresStore {
    pub(super) async fn append_event_impl(
        &self,
        session_id: &str,
        event: &Event,
    ) -> StoreResult<EventEnvelope> {
        let data = to_json(event, "event")?;
        // One statement, so one implicit transaction. The timestamp is the
        // database's clock read after the row lock is held, so `at` does not
        // decrease as `seq` grows (whichever node appends).
        let row = sqlx::query(if self.notify_events {
            APPEND_ONE_NOTIFY
        } else {
            APPEND_ONE
        })
        .bind(session_id)
        .bind(event.type_name())
        .bind(&data)
        .fetch_optional(&self.pool)
        .await
        .map_err(db("appending event"))?;
        let Some(row) = row else {
            return Err(StoreError::NotFound(format!("session {session_id}")));
        };
        Ok(EventEnvelope {
            seq: row.count("seq")?,
            session_id: session_id.to_owned(),
            at: row.time("created_at")?,
            event: event.clone(),
        })
    }

    /// One statement: `last_seq` advances by the batch size under the row
    /// lock, so the batch gets consecutive `seq`s, all or nothing.
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
        .map_err(db("appending events"))?;
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
}
