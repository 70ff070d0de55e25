//! The lease of each running turn: releasing, reading, and taking over the
//! leases of dead nodes.

use std::time::Duration;

use sqlx::Row;

use super::{ClusterStore, Lease, TURNS_CHANNEL, notify, secs};
use crate::StoreResult;
use crate::dialect::sql;
use crate::records::{db, execute, fetch_all, fetch_optional};

/// Read by [`lease_from`], by position.
const LEASES: &str = "SELECT session_id, turn_id, node_id, start_seq FROM turn_leases ";

sql!(LEASE_OF_SESSION = LEASES, "WHERE session_id = $1");

sql!(LEASES_OF_NODE = LEASES, "WHERE node_id = $1");

impl ClusterStore {
    /// End `node_id`'s lease (its turn is recorded): the session's next
    /// queued turn may go to any node, and the session shows `running` again
    /// if one waits. A lease another node took over is left alone.
    pub async fn release_lease(
        &self,
        session_id: &str,
        turn_id: &str,
        node_id: &str,
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await.map_err(db("releasing a lease"))?;
        let query = sqlx::query(
            "DELETE FROM turn_leases WHERE session_id = $1 AND turn_id = $2 AND node_id = $3",
        )
        .bind(session_id)
        .bind(turn_id)
        .bind(node_id);
        execute(&mut *tx, query, "releasing a lease").await?;
        let query = sqlx::query(
            "UPDATE sessions SET status = 'running' WHERE id = $1 \
               AND EXISTS (SELECT 1 FROM turn_queue WHERE session_id = $1)",
        )
        .bind(session_id);
        execute(&mut *tx, query, "releasing a lease").await?;
        notify(&mut tx, TURNS_CHANNEL, "").await?;
        tx.commit().await.map_err(db("releasing a lease"))?;
        Ok(())
    }

    pub async fn lease(&self, session_id: &str) -> StoreResult<Option<Lease>> {
        let query = sqlx::query(LEASE_OF_SESSION).bind(session_id);
        fetch_optional(&self.pool, query, "reading a lease", lease_from).await
    }

    /// Whether a `turn.finished` was stored in the session after `seq`.
    pub async fn finished_since(&self, session_id: &str, seq: u64) -> StoreResult<bool> {
        sqlx::query(
            "SELECT EXISTS (SELECT 1 FROM events WHERE session_id = $1 AND seq > $2 \
               AND type = 'turn.finished')",
        )
        .bind(session_id)
        .bind(i64::try_from(seq).unwrap_or(i64::MAX))
        .fetch_one(&self.pool)
        .await
        .and_then(|row| row.try_get(0))
        .map_err(db("reading events"))
    }

    /// Take over the leases of nodes silent for longer than `timeout` (and of
    /// nodes that are gone): they become `node_id`'s, to be finished as
    /// interrupted. `SKIP LOCKED`: two nodes never take the same lease.
    pub async fn take_dead_leases(
        &self,
        node_id: &str,
        timeout: Duration,
    ) -> StoreResult<Vec<Lease>> {
        let query = sqlx::query(
            "UPDATE turn_leases l SET node_id = $1, taken_at = now() \
             FROM (SELECT l2.session_id, l2.node_id FROM turn_leases l2 \
                   LEFT JOIN cluster_nodes n ON n.id = l2.node_id \
                   WHERE l2.node_id <> $1 \
                     AND (n.id IS NULL OR n.heartbeat_at < now() - make_interval(secs => $2)) \
                   FOR UPDATE OF l2 SKIP LOCKED) dead \
             WHERE l.session_id = dead.session_id \
               AND NOT EXISTS (SELECT 1 FROM cluster_nodes alive WHERE alive.id = l.node_id \
                   AND alive.heartbeat_at >= now() - make_interval(secs => $2)) \
             RETURNING l.session_id, l.turn_id, dead.node_id, l.start_seq",
        )
        .bind(node_id)
        .bind(secs(timeout));
        fetch_all(&self.pool, query, "taking over dead leases", lease_from).await
    }

    /// The leases `node_id` holds (at start-up: left by its previous life).
    pub async fn leases_of(&self, node_id: &str) -> StoreResult<Vec<Lease>> {
        let query = sqlx::query(LEASES_OF_NODE).bind(node_id);
        fetch_all(&self.pool, query, "reading the node's leases", lease_from).await
    }
}

fn lease_from(row: &sqlx::postgres::PgRow) -> StoreResult<Lease> {
    let read = || -> Result<Lease, sqlx::Error> {
        let start_seq: i64 = row.try_get(3)?;
        Ok(Lease {
            session_id: row.try_get(0)?,
            turn_id: row.try_get(1)?,
            node_id: row.try_get(2)?,
            start_seq: u64::try_from(start_seq).unwrap_or_default(),
        })
    };
    read().map_err(db("reading a lease"))
}
