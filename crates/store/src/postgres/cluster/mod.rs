//! What several `agentd serve` nodes sharing one database coordinate through
//! (migration 0004): node heartbeats, the queue of accepted turns,
//! the lease of each running turn, signals to the owner of a turn, and where
//! each session's workspace was last saved.
//!
//! Every table is the source of truth; NOTIFY on the channels below only wakes
//! nodes up, so a lost notification costs latency, never work.

mod leases;
mod nodes;
mod queue;
mod sessions;
mod signals;

use std::time::Duration;

pub use queue::LAST_TURN;
pub use sessions::EVENTS_IN_RANGES;
pub use sqlx::postgres::PgListener;
use sqlx::postgres::PgPool;
use sqlx::{Postgres, Transaction};

use super::PostgresStore;
use crate::StoreResult;
use crate::records::{db, execute};

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
}

/// Wake the nodes listening on `channel` when `tx` commits.
pub(super) async fn notify(
    tx: &mut Transaction<'_, Postgres>,
    channel: &str,
    payload: &str,
) -> StoreResult<()> {
    let query = sqlx::query("SELECT pg_notify($1, $2)")
        .bind(channel)
        .bind(payload);
    execute(&mut **tx, query, "notifying other nodes").await?;
    Ok(())
}
