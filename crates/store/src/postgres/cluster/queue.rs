//! The queue of accepted turns: enqueueing (one session's submissions decided
//! one after the other), claiming, and what a session is waiting for.

use std::time::Duration;

use sqlx::Row;

use super::{ClusterStore, Enqueued, Lease, QueuedTurn, TURNS_CHANNEL, notify, secs};
use crate::records::{db, execute};
use crate::{StoreError, StoreResult};

/// What [`ClusterStore::last_turn`] runs (`$1` the session), an index scan
/// of the session's turns (migration 0016). Public for the test that reads
/// its plan.
pub const LAST_TURN: &str = "SELECT id FROM turns WHERE session_id = $1 ORDER BY id DESC LIMIT 1";

impl ClusterStore {
    /// Accept a turn for a session: queued for whichever node takes it. One
    /// transaction holding the session row, so two submissions to one session
    /// (through any nodes) are decided one after the other.
    pub async fn enqueue_turn(&self, turn: &QueuedTurn, queue: bool) -> StoreResult<Enqueued> {
        let mut tx = self.pool.begin().await.map_err(db("enqueueing a turn"))?;
        let session = sqlx::query("SELECT last_seq FROM sessions WHERE id = $1 FOR UPDATE")
            .bind(&turn.session_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db("enqueueing a turn"))?;
        if session.is_none() {
            return Err(StoreError::NotFound(format!("session {}", turn.session_id)));
        }
        if let Some(request_id) = &turn.client_request_id {
            let seen = sqlx::query(
                "SELECT turn_id FROM turn_queue WHERE session_id = $1 AND client_request_id = $2 \
                 UNION ALL \
                 SELECT turn_id FROM turn_leases WHERE session_id = $1 AND client_request_id = $2 \
                 UNION ALL \
                 SELECT id FROM turns WHERE session_id = $1 AND client_request_id = $2 LIMIT 1",
            )
            .bind(&turn.session_id)
            .bind(request_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db("enqueueing a turn"))?;
            if let Some(row) = seen {
                let id: String = row.try_get(0).map_err(db("enqueueing a turn"))?;
                return Ok(Enqueued::Duplicate(id));
            }
        }
        let busy: bool = sqlx::query(BUSY)
            .bind(&turn.session_id)
            .fetch_one(&mut *tx)
            .await
            .and_then(|row| row.try_get(0))
            .map_err(db("enqueueing a turn"))?;
        if busy && !queue {
            return Ok(Enqueued::Busy);
        }
        let query = sqlx::query(
            "INSERT INTO turn_queue (turn_id, session_id, text, client_request_id) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(&turn.turn_id)
        .bind(&turn.session_id)
        .bind(&turn.text)
        .bind(&turn.client_request_id);
        execute(&mut *tx, query, "enqueueing a turn").await?;
        if !busy {
            // Running from now on for every node, not only once one takes it.
            let query = sqlx::query(
                "UPDATE sessions SET status = 'running', \
                   updated_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint \
                 WHERE id = $1",
            )
            .bind(&turn.session_id);
            execute(&mut *tx, query, "enqueueing a turn").await?;
        }
        notify(&mut tx, TURNS_CHANNEL, "").await?;
        tx.commit().await.map_err(db("enqueueing a turn"))?;
        Ok(if busy {
            Enqueued::Queued
        } else {
            Enqueued::Started
        })
    }

    /// Take the oldest queued turn of a session with no running turn: the
    /// turn leaves the queue and `node_id` holds its lease. `None` when there
    /// is nothing to take (or another node took it first).
    /// `session` limits the claim to one session's turns. Only a node whose
    /// own heartbeat is younger than `timeout` may claim (one the others
    /// believe dead must not start work).
    pub async fn claim_turn(
        &self,
        node_id: &str,
        session: Option<&str>,
        timeout: Duration,
    ) -> StoreResult<Option<(QueuedTurn, Lease)>> {
        let mut tx = self.pool.begin().await.map_err(db("claiming a turn"))?;
        let row = sqlx::query(
            "SELECT q.seq, q.turn_id, q.session_id, q.text, q.client_request_id \
             FROM turn_queue q \
             WHERE ($2::text IS NULL OR q.session_id = $2) \
               AND EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.id = $1 \
                           AND n.heartbeat_at >= now() - make_interval(secs => $3)) \
               AND NOT EXISTS (SELECT 1 FROM turn_leases l WHERE l.session_id = q.session_id) \
               AND NOT EXISTS (SELECT 1 FROM turn_queue o \
                               WHERE o.session_id = q.session_id AND o.seq < q.seq) \
             ORDER BY q.seq LIMIT 1 FOR UPDATE OF q SKIP LOCKED",
        )
        .bind(node_id)
        .bind(session)
        .bind(secs(timeout))
        .fetch_optional(&mut *tx)
        .await
        .map_err(db("claiming a turn"))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let get = |name: &str| -> StoreResult<String> {
            row.try_get(name).map_err(db("claiming a turn"))
        };
        let queue_seq: i64 = row.try_get("seq").map_err(db("claiming a turn"))?;
        let turn = QueuedTurn {
            turn_id: get("turn_id")?,
            session_id: get("session_id")?,
            text: get("text")?,
            client_request_id: row
                .try_get("client_request_id")
                .map_err(db("claiming a turn"))?,
        };
        let start_seq: Option<i64> = sqlx::query(
            "INSERT INTO turn_leases (session_id, turn_id, node_id, start_seq, client_request_id) \
             SELECT id, $2, $3, last_seq, $4 FROM sessions WHERE id = $1 \
             ON CONFLICT (session_id) DO NOTHING RETURNING start_seq",
        )
        .bind(&turn.session_id)
        .bind(&turn.turn_id)
        .bind(node_id)
        .bind(&turn.client_request_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db("claiming a turn"))?
        .map(|row| row.try_get(0))
        .transpose()
        .map_err(db("claiming a turn"))?;
        let Some(start_seq) = start_seq else {
            // Another node leased the session between our read and insert.
            return Ok(None);
        };
        let query = sqlx::query("DELETE FROM turn_queue WHERE seq = $1").bind(queue_seq);
        execute(&mut *tx, query, "claiming a turn").await?;
        tx.commit().await.map_err(db("claiming a turn"))?;
        let lease = Lease {
            session_id: turn.session_id.clone(),
            turn_id: turn.turn_id.clone(),
            node_id: node_id.to_string(),
            start_seq: u64::try_from(start_seq).unwrap_or_default(),
        };
        Ok(Some((turn, lease)))
    }

    /// A turn runs or waits in the session, on any node.
    pub async fn busy(&self, session_id: &str) -> StoreResult<bool> {
        sqlx::query(BUSY)
            .bind(session_id)
            .fetch_one(&self.pool)
            .await
            .and_then(|row| row.try_get(0))
            .map_err(db("checking the session's turns"))
    }

    /// The session's latest turn (ids are time-ordered UUIDs).
    pub async fn last_turn(&self, session_id: &str) -> StoreResult<Option<String>> {
        sqlx::query_scalar(LAST_TURN)
            .bind(session_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("reading the last turn"))
    }

    /// `(session, turn)` of turns recorded as running that no lease covers:
    /// left by a single-node server before the cluster, or by a node that
    /// died between its lease and its turn's end (never both at once).
    pub async fn orphan_turns(&self) -> StoreResult<Vec<(String, String)>> {
        sqlx::query_as(
            "SELECT t.session_id, t.id FROM turns t WHERE t.status IS NULL \
               AND NOT EXISTS (SELECT 1 FROM turn_leases l WHERE l.turn_id = t.id)",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db("reading orphan turns"))
    }
}

/// A turn runs (its lease has no `turn.finished` after its start) or waits.
const BUSY: &str = "SELECT EXISTS (SELECT 1 FROM turn_queue WHERE session_id = $1) \
    OR EXISTS (SELECT 1 FROM turn_leases l WHERE l.session_id = $1 AND NOT EXISTS (\
      SELECT 1 FROM events e WHERE e.session_id = $1 AND e.seq > l.start_seq \
        AND e.type = 'turn.finished'))";
