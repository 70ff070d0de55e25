//! The event log: per-session `seq` 1, 2, 3, … assigned in the append
//! transaction (see `writer`), so it has no gaps and no duplicates under
//! concurrency.

use agentd_protocol::{Event, EventEnvelope};

use super::SqliteStore;
use tokio::sync::oneshot;

use super::util::{db, to_json};
use super::writer::AppendJob;
pub(super) use crate::records::envelope as envelope_from_row;
use crate::{StoreError, StoreResult};

impl SqliteStore {
    pub(super) async fn append_event_impl(
        &self,
        session_id: &str,
        event: &Event,
    ) -> StoreResult<EventEnvelope> {
        let data = to_json(event, "event")?;
        let (reply, result) = oneshot::channel();
        let job = AppendJob {
            session_id: session_id.to_owned(),
            type_name: event.type_name(),
            data,
            reply,
        };
        let stopped =
            || StoreError::Database("appending event: the event writer has stopped".into());
        self.appends.send(job).await.map_err(|_| stopped())?;
        let (seq, at) = result.await.map_err(|_| stopped())??;
        Ok(EventEnvelope {
            seq,
            session_id: session_id.to_owned(),
            at,
            event: event.clone(),
        })
    }

    /// All jobs are queued before any reply is awaited, so the writer commits
    /// them together (in order: one sender, one queue).
    pub(super) async fn append_events_impl(
        &self,
        session_id: &str,
        events: &[Event],
    ) -> StoreResult<Vec<EventEnvelope>> {
        let stopped =
            || StoreError::Database("appending events: the event writer has stopped".into());
        let mut replies = Vec::with_capacity(events.len());
        for event in events {
            let (reply, result) = oneshot::channel();
            let job = AppendJob {
                session_id: session_id.to_owned(),
                type_name: event.type_name(),
                data: to_json(event, "event")?,
                reply,
            };
            self.appends.send(job).await.map_err(|_| stopped())?;
            replies.push(result);
        }
        let mut stored = Vec::with_capacity(events.len());
        for (event, result) in events.iter().zip(replies) {
            let (seq, at) = result.await.map_err(|_| stopped())??;
            stored.push(EventEnvelope {
                seq,
                session_id: session_id.to_owned(),
                at,
                event: event.clone(),
            });
        }
        Ok(stored)
    }

    /// Events with `seq > after`, in order; empty for an unknown session.
    pub(super) async fn events_after_impl(
        &self,
        session_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<EventEnvelope>> {
        let rows = sqlx::query(
            "SELECT seq, data, created_at FROM events \
             WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        )
        .bind(session_id)
        .bind(i64::try_from(after).unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(db("reading events"))?;
        rows.iter()
            .map(|row| envelope_from_row(session_id, row))
            .collect()
    }
}
