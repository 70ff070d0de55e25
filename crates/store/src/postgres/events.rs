//! The event log: per-session `seq` 1, 2, 3, … taken from `sessions.last_seq`
//! in the same statement that inserts the event. The UPDATE locks the session
//! row, so appends to one session serialize (across processes too) and a
//! failed or abandoned append rolls back its `seq` with it: no gaps.
//!
//! In cluster mode every append also sends `NOTIFY agentd_events, '<session>
//! <first> <last>'` in its transaction (delivered at commit, in commit order):
//! other nodes' live streams wake up on it and read the events from this table.
//!
//! A leased turn's appends are fenced ([`Fence`]): the same statement first
//! locks the turn's lease row `FOR SHARE`, and only while it names the fence's
//! node and turn. A takeover (`take_dead_leases`) locks that row `FOR UPDATE
//! SKIP LOCKED`, so it skips a lease an append holds (and takes it at a later
//! beat); an append that comes after a takeover waits for it to commit, then
//! (READ COMMITTED re-checks a locked row's newest version) finds the row
//! naming another node, or gone, and stores nothing.

use agentd_protocol::{Event, EventEnvelope};

use super::PostgresStore;
use crate::dialect::sql;
use crate::queries::transcript::INSERT_EVENTS;
use crate::records::Columns;
use crate::records::{db, to_json};
use crate::{Fence, LogAppend, LogEntry, Logged, StoreError, StoreResult};

/// `$1` session: `last_seq` advanced by the `$2` events under the row's lock.
const NEXT_SEQS: &str =
    "WITH s AS (UPDATE sessions SET last_seq = last_seq + $2 WHERE id = $1 RETURNING last_seq)";

/// [`NEXT_SEQS`] only while node `$6` holds the lease of turn `$5`, that
/// lease row locked first (see the module docs).
const NEXT_SEQS_FENCED: &str = "WITH s AS (UPDATE sessions SET last_seq = last_seq + $2 \
     WHERE id = $1 AND EXISTS (SELECT 1 FROM turn_leases \
       WHERE session_id = $1 AND turn_id = $5 AND node_id = $6 FOR SHARE) \
     RETURNING last_seq)";

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
    /// After the `s` of `NEXT_SEQS…`: the events inserted.
    INSERT_TAIL = " ",
    INSERT_EVENTS,
    ROWS,
    ROWS_OF_ARRAYS,
    RETURNING
);
sql!(
    /// [`INSERT_TAIL`] with the NOTIFY.
    NOTIFY_TAIL = NOTIFY_SEQS,
    " ",
    INSERT_EVENTS,
    ROWS,
    ", n",
    ROWS_OF_ARRAYS,
    RETURNING
);
sql!(APPEND_MANY = NEXT_SEQS, INSERT_TAIL);
sql!(APPEND_MANY_NOTIFY = NEXT_SEQS, NOTIFY_TAIL);
sql!(APPEND_MANY_FENCED = NEXT_SEQS_FENCED, INSERT_TAIL);
sql!(APPEND_MANY_FENCED_NOTIFY = NEXT_SEQS_FENCED, NOTIFY_TAIL);

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
        self.append_events_fenced(session_id, None, events).await
    }

    /// [`Self::append_events_impl`], with a `fence` stored only while its
    /// node holds its turn's lease (`LeaseLost` otherwise).
    async fn append_events_fenced(
        &self,
        session_id: &str,
        fence: Option<&Fence>,
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
        let what = match events.len() {
            1 => "appending event",
            _ => "appending events",
        };
        let query = match (fence, self.notify_events) {
            (None, false) => APPEND_MANY,
            (None, true) => APPEND_MANY_NOTIFY,
            (Some(_), false) => APPEND_MANY_FENCED,
            (Some(_), true) => APPEND_MANY_FENCED_NOTIFY,
        };
        let mut query = sqlx::query(query)
            .bind(session_id)
            .bind(count)
            .bind(&types)
            .bind(&data);
        if let Some(fence) = fence {
            query = query.bind(&fence.turn_id).bind(&fence.node_id);
        }
        let rows = query.fetch_all(&self.pool).await.map_err(db(what))?;
        if rows.is_empty() {
            return Err(match fence {
                Some(fence) => self.refused(session_id, fence, what).await,
                None => StoreError::NotFound(format!("session {session_id}")),
            });
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
        self.append_one_kind_at_a_time(session_id, None, entries)
            .await
    }

    pub(super) async fn append_fenced_log_impl(
        &self,
        session_id: &str,
        fence: &Fence,
        entries: &[LogEntry<'_>],
    ) -> LogAppend {
        self.append_one_kind_at_a_time(session_id, Some(fence), entries)
            .await
    }

    /// Appends `entries` in order: each run of events in one statement
    /// (committed whole or not at all), each message alone; every commit
    /// checks the `fence`, if any.
    async fn append_one_kind_at_a_time(
        &self,
        session_id: &str,
        fence: Option<&Fence>,
        entries: &[LogEntry<'_>],
    ) -> LogAppend {
        let mut stored = Vec::with_capacity(entries.len());
        let mut rest = entries;
        while let Some(first) = rest.first() {
            let outcome = match first {
                LogEntry::Message { turn_id, message } => {
                    rest = &rest[1..];
                    self.append_message_fenced(session_id, *turn_id, fence, message)
                        .await
                        .map(|message| stored.push(Logged::Message(message)))
                }
                LogEntry::Event(_) => {
                    let run = rest
                        .iter()
                        .take_while(|entry| matches!(entry, LogEntry::Event(_)))
                        .count();
                    let events: Vec<Event> = rest[..run]
                        .iter()
                        .filter_map(|entry| match entry {
                            LogEntry::Event(event) => Some((*event).clone()),
                            LogEntry::Message { .. } => None,
                        })
                        .collect();
                    rest = &rest[run..];
                    self.append_events_fenced(session_id, fence, &events)
                        .await
                        .map(|events| stored.extend(events.into_iter().map(Logged::Event)))
                }
            };
            if let Err(error) = outcome {
                return LogAppend::new(stored, Some(error));
            }
        }
        LogAppend::new(stored, None)
    }
}
