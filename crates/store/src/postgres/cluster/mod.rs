//! What several `agentd serve` nodes sharing one database coordinate through
//! (migration 0004): node heartbeats, the queue of accepted turns,
//! the lease of each running turn, signals to the owner of a turn, and where
//! each session's workspace was last saved.
//!
//! Every table is the source of truth; NOTIFY on the channels below only wakes
//! nodes up, so a lost notification costs latency, never work.

mod queue;
mod sessions;
mod signals;

use std::time::Duration;

pub use sqlx::postgres::PgListener;
use sqlx::postgres::PgPool;
use sqlx::{Postgres, Row, Transaction};

use super::PostgresStore;
use super::util::db;
use crate::StoreResult;

/// `<session> <first seq> <last seq>` for every append (see `events`).
pub const EVENTS_CHANNEL: &str = "agentd_events";
/// A turn was queued or a lease released: free nodes look for work.
pub const TURNS_CHANNEL: &str = "agentd_turns";
/// `<node id>`: that node has signals waiting.
pub const SIGNALS_CHANNEL: &str = "agentd_signals";

/// The cluster tables of a PostgreSQL store. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ClusterStore {
    pool: PgPool,
}

/// What a submission became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enqueued {
    /// Nothing runs or waits in the session: it starts as soon as a node takes it.
    Started,
    /// Behind the running or queued turns of the session.
    Queued,
    /// The `client_request_id` was seen before: that turn's id.
    Duplicate(String),
    /// A turn runs or waits and the caller did not ask to queue.
    Busy,
}

/// A turn to enqueue.
#[derive(Debug, Clone)]
pub struct QueuedTurn {
    pub turn_id: String,
    pub session_id: String,
    pub text: String,
    pub client_request_id: Option<String>,
}

/// A running turn's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub session_id: String,
    pub turn_id: String,
    pub node_id: String,
    pub start_seq: u64,
}

/// A message for the node that owns a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    /// `interrupt`, `permission` or `question`.
    pub kind: String,
    /// The session (interrupt) or the request id (answers).
    pub target: String,
    /// JSON.
    pub data: String,
}

/// A node as the others see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRecord {
    pub id: String,
    pub address: String,
    pub draining: bool,
    /// Milliseconds since its last heartbeat, by the database's clock.
    pub silent_ms: i64,
}

/// Connections of the cluster's own pool: heartbeats and claims never wait
/// behind a busy store.
const CLUSTER_POOL_SIZE: u32 = 4;

impl PostgresStore {
    /// The cluster tables, over a small pool of their own.
    pub fn cluster(&self) -> ClusterStore {
        let options = (*self.pool().connect_options()).clone();
        ClusterStore {
            pool: sqlx::postgres::PgPoolOptions::new()
                .max_connections(CLUSTER_POOL_SIZE)
                .acquire_timeout(Duration::from_secs(3))
                .connect_lazy_with(options),
        }
    }
}

/// One of this node's leases, as the heartbeat sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldLease {
    pub session_id: String,
    pub turn_id: String,
    /// Milliseconds since the lease was taken (database clock).
    pub age_ms: i64,
}

fn secs(timeout: Duration) -> f64 {
    timeout.as_secs_f64()
}

impl ClusterStore {
    /// A connection listening on the three channels (it reconnects by itself;
    /// see `PgListener::try_recv` for how a lost connection shows).
    pub async fn listener(&self) -> StoreResult<PgListener> {
        let mut listener = PgListener::connect_with(&self.pool)
            .await
            .map_err(db("connecting the cluster listener"))?;
        listener
            .listen_all([EVENTS_CHANNEL, TURNS_CHANNEL, SIGNALS_CHANNEL])
            .await
            .map_err(db("listening for cluster notifications"))?;
        Ok(listener)
    }

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
        let rows = sqlx::query(
            "INSERT INTO cluster_nodes (id, address, instance) VALUES ($1, $2, $3) \
             ON CONFLICT (id) DO UPDATE SET address = $2, instance = $3, started_at = now(), \
               heartbeat_at = now(), draining = FALSE \
             WHERE cluster_nodes.instance = $3 \
               OR cluster_nodes.heartbeat_at < now() - make_interval(secs => $4)",
        )
        .bind(id)
        .bind(address)
        .bind(instance)
        .bind(secs(timeout))
        .execute(&self.pool)
        .await
        .map_err(db("registering the node"))?;
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
        sqlx::query(
            "INSERT INTO cluster_nodes (id, address, instance, draining) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), draining = $4",
        )
        .bind(id)
        .bind(address)
        .bind(instance)
        .bind(draining)
        .execute(&self.pool)
        .await
        .map_err(db("heartbeat"))?;
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
        sqlx::query("DELETE FROM cluster_nodes WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(db("removing the node"))?;
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
        sqlx::query(
            "DELETE FROM cluster_nodes n WHERE n.heartbeat_at < now() - make_interval(secs => $1) \
               AND NOT EXISTS (SELECT 1 FROM turn_leases l WHERE l.node_id = n.id)",
        )
        .bind(secs(timeout))
        .execute(&self.pool)
        .await
        .map_err(db("forgetting dead nodes"))?;
        sqlx::query(
            "DELETE FROM cluster_signals s \
             WHERE NOT EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.id = s.node_id)",
        )
        .execute(&self.pool)
        .await
        .map_err(db("forgetting dead nodes"))?;
        Ok(())
    }
}

pub(super) async fn notify(
    tx: &mut Transaction<'_, Postgres>,
    channel: &str,
    payload: &str,
) -> StoreResult<()> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(channel)
        .bind(payload)
        .execute(&mut **tx)
        .await
        .map_err(db("notifying other nodes"))?;
    Ok(())
}
