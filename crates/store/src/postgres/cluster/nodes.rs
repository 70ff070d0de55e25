//! Node rows: registering, heartbeats (which also renew the node's leases),
//! and forgetting nodes that went silent.

use std::time::Duration;

use sqlx::Row;

use super::{ClusterStore, HeldLease, NodeRecord, secs};
use crate::StoreResult;
use crate::records::{db, execute};

impl ClusterStore {
    /// Announce a node (process `instance`) and beat its heart. `Ok(false)`
    /// when another process with the same id heartbeated within `timeout`:
    /// the row is left alone.
    pub async fn register_node(
        &self,
        id: &str,
        address: &str,
        instance: &str,
        timeout: Duration,
    ) -> StoreResult<bool> {
        let query = sqlx::query(
            "INSERT INTO cluster_nodes (id, address, instance) VALUES ($1, $2, $3) \
             ON CONFLICT (id) DO UPDATE SET address = $2, instance = $3, started_at = now(), \
               heartbeat_at = now(), draining = FALSE \
             WHERE cluster_nodes.instance = $3 \
               OR cluster_nodes.heartbeat_at < now() - make_interval(secs => $4)",
        )
        .bind(id)
        .bind(address)
        .bind(instance)
        .bind(secs(timeout));
        let rows = execute(&self.pool, query, "registering the node").await?;
        Ok(rows.rows_affected() == 1)
    }

    /// Nodes that heartbeated within `timeout`.
    pub async fn live_nodes(&self, timeout: Duration) -> StoreResult<u64> {
        let count: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM cluster_nodes \
             WHERE heartbeat_at >= now() - make_interval(secs => $1)",
        )
        .bind(secs(timeout))
        .fetch_one(&self.pool)
        .await
        .map_err(db("counting live nodes"))?;
        Ok(u64::try_from(count).unwrap_or_default())
    }

    /// Beat the node's heart; returns the leases it still holds (another node
    /// takes the leases of a node it believes dead).
    pub async fn heartbeat(
        &self,
        id: &str,
        address: &str,
        instance: &str,
        draining: bool,
    ) -> StoreResult<Vec<HeldLease>> {
        let query = sqlx::query(
            "INSERT INTO cluster_nodes (id, address, instance, draining) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), draining = $4",
        )
        .bind(id)
        .bind(address)
        .bind(instance)
        .bind(draining);
        execute(&self.pool, query, "heartbeat").await?;
        let rows = sqlx::query(
            "SELECT session_id, turn_id, \
               (extract(epoch FROM now() - taken_at) * 1000)::bigint AS age_ms \
             FROM turn_leases WHERE node_id = $1",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await
        .map_err(db("reading the node's leases"))?;
        rows.iter()
            .map(|row| {
                Ok(HeldLease {
                    session_id: row.try_get("session_id")?,
                    turn_id: row.try_get("turn_id")?,
                    age_ms: row.try_get("age_ms")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(db("reading the node's leases"))
    }

    /// A node that stops cleanly leaves.
    pub async fn remove_node(&self, id: &str) -> StoreResult<()> {
        let query = sqlx::query("DELETE FROM cluster_nodes WHERE id = $1").bind(id);
        execute(&self.pool, query, "removing the node").await?;
        Ok(())
    }

    pub async fn nodes(&self) -> StoreResult<Vec<NodeRecord>> {
        let rows = sqlx::query(
            "SELECT id, address, draining, \
               (extract(epoch FROM now() - heartbeat_at) * 1000)::bigint AS silent_ms \
             FROM cluster_nodes ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db("listing nodes"))?;
        rows.iter()
            .map(|row| {
                Ok(NodeRecord {
                    id: row.try_get("id").map_err(db("reading a node"))?,
                    address: row.try_get("address").map_err(db("reading a node"))?,
                    draining: row.try_get("draining").map_err(db("reading a node"))?,
                    silent_ms: row.try_get("silent_ms").map_err(db("reading a node"))?,
                })
            })
            .collect()
    }

    /// Forget nodes silent for longer than `timeout` that hold no lease, and
    /// signals nobody will read.
    pub async fn forget_dead_nodes(&self, timeout: Duration) -> StoreResult<()> {
        let query = sqlx::query(
            "DELETE FROM cluster_nodes n WHERE n.heartbeat_at < now() - make_interval(secs => $1) \
               AND NOT EXISTS (SELECT 1 FROM turn_leases l WHERE l.node_id = n.id)",
        )
        .bind(secs(timeout));
        execute(&self.pool, query, "forgetting dead nodes").await?;
        let query = sqlx::query(
            "DELETE FROM cluster_signals s \
             WHERE NOT EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.id = s.node_id)",
        );
        execute(&self.pool, query, "forgetting dead nodes").await?;
        Ok(())
    }
}
