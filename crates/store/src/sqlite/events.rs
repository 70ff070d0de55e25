//! The event log: per-session `seq` 1, 2, 3, … assigned in the append
//! transaction, so it has no gaps and no duplicates under concurrency.

use agentd_protocol::{Event, EventEnvelope};
use sqlx::sqlite::SqliteRow;

use super::SqliteStore;
use super::util::{col, col_time, col_u64, db, from_json, now, to_json, to_ms, to_u64};
use crate::{StoreError, StoreResult};

fn envelope_from_row(session_id: &str, row: &SqliteRow) -> StoreResult<EventEnvelope> {
    let seq = col_u64(row, "seq")?;
    let data: String = col(row, "data")?;
    Ok(EventEnvelope {
        seq,
        session_id: session_id.to_owned(),
        at: col_time(row, "created_at")?,
        event: from_json(&data, &format!("event {session_id}/{seq}"))?,
    })
}

impl SqliteStore {
    pub(super) async fn append_event_impl(
        &self,
        session_id: &str,
        event: &Event,
    ) -> StoreResult<EventEnvelope> {
        // Encode before taking the lock: the critical section is only SQL.
        let data = to_json(event, "event")?;
        let at = now();

        let _write = self.write_guard().await;
        let mut tx = self.pool.begin().await.map_err(db("appending event"))?;
        let seq: Option<i64> = sqlx::query_scalar(
            "UPDATE sessions SET last_seq = last_seq + 1 WHERE id = ? RETURNING last_seq",
        )
        .bind(session_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db("appending event"))?;
        let Some(seq) = seq else {
            return Err(StoreError::NotFound(format!("session {session_id}")));
        };
        sqlx::query(
            "INSERT INTO events (session_id, seq, type, data, created_at) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(session_id)
        .bind(seq)
        .bind(event.type_name())
        .bind(&data)
        .bind(to_ms(at))
        .execute(&mut *tx)
        .await
        .map_err(db("appending event"))?;
        tx.commit().await.map_err(db("appending event"))?;

        Ok(EventEnvelope {
            seq: to_u64(seq, "seq")?,
            session_id: session_id.to_owned(),
            at,
            event: event.clone(),
        })
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
