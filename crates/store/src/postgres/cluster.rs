//! What several `agentd serve` nodes sharing one database coordinate through
//! (migration 0004): node heartbeats, the queue of accepted turns,
//! the lease of each running turn, signals to the owner of a turn, and where
//! each session's workspace was last saved.
//!
//! Every table is the source of truth; NOTIFY on the channels below only wakes
//! nodes up, so a lost notification costs latency, never work.

use std::time::Duration;

pub use sqlx::postgres::PgListener;
use sqlx::postgres::PgPool;
use sqlx::{Postgres, Row, Transaction};

use agentd_protocol::EventEnvelope;

use super::PostgresStore;
use super::events::envelope_from_row;
use super::util::db;
use crate::{StoreError, StoreResult};

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
        sqlx::query(
            "INSERT INTO turn_queue (turn_id, session_id, text, client_request_id) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(&turn.turn_id)
        .bind(&turn.session_id)
        .bind(&turn.text)
        .bind(&turn.client_request_id)
        .execute(&mut *tx)
        .await
        .map_err(db("enqueueing a turn"))?;
        if !busy {
            // Running from now on for every node, not only once one takes it.
            sqlx::query(
                "UPDATE sessions SET status = 'running', \
                   updated_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint \
                 WHERE id = $1",
            )
            .bind(&turn.session_id)
            .execute(&mut *tx)
            .await
            .map_err(db("enqueueing a turn"))?;
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
        sqlx::query("DELETE FROM turn_queue WHERE seq = $1")
            .bind(queue_seq)
            .execute(&mut *tx)
            .await
            .map_err(db("claiming a turn"))?;
        tx.commit().await.map_err(db("claiming a turn"))?;
        let lease = Lease {
            session_id: turn.session_id.clone(),
            turn_id: turn.turn_id.clone(),
            node_id: node_id.to_string(),
            start_seq: u64::try_from(start_seq).unwrap_or_default(),
        };
        Ok(Some((turn, lease)))
    }

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
        sqlx::query(
            "DELETE FROM turn_leases WHERE session_id = $1 AND turn_id = $2 AND node_id = $3",
        )
        .bind(session_id)
        .bind(turn_id)
        .bind(node_id)
        .execute(&mut *tx)
        .await
        .map_err(db("releasing a lease"))?;
        sqlx::query(
            "UPDATE sessions SET status = 'running' WHERE id = $1 \
               AND EXISTS (SELECT 1 FROM turn_queue WHERE session_id = $1)",
        )
        .bind(session_id)
        .execute(&mut *tx)
        .await
        .map_err(db("releasing a lease"))?;
        notify(&mut tx, TURNS_CHANNEL, "").await?;
        tx.commit().await.map_err(db("releasing a lease"))?;
        Ok(())
    }

    pub async fn lease(&self, session_id: &str) -> StoreResult<Option<Lease>> {
        let row = sqlx::query(
            "SELECT session_id, turn_id, node_id, start_seq FROM turn_leases WHERE session_id = $1",
        )
        .bind(session_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db("reading a lease"))?;
        row.map(|row| lease_from(&row)).transpose()
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
        let rows = sqlx::query(
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
        .bind(secs(timeout))
        .fetch_all(&self.pool)
        .await
        .map_err(db("taking over dead leases"))?;
        rows.iter().map(lease_from).collect()
    }

    /// The leases `node_id` holds (at start-up: left by its previous life).
    pub async fn leases_of(&self, node_id: &str) -> StoreResult<Vec<Lease>> {
        let rows = sqlx::query(
            "SELECT session_id, turn_id, node_id, start_seq FROM turn_leases WHERE node_id = $1",
        )
        .bind(node_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db("reading the node's leases"))?;
        rows.iter().map(lease_from).collect()
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

    /// Leave a signal for `node_id` and wake it.
    pub async fn send_signal(&self, node_id: &str, signal: &Signal) -> StoreResult<()> {
        let mut tx = self.pool.begin().await.map_err(db("sending a signal"))?;
        sqlx::query(
            "INSERT INTO cluster_signals (node_id, kind, target, data) VALUES ($1, $2, $3, $4)",
        )
        .bind(node_id)
        .bind(&signal.kind)
        .bind(&signal.target)
        .bind(&signal.data)
        .execute(&mut *tx)
        .await
        .map_err(db("sending a signal"))?;
        notify(&mut tx, SIGNALS_CHANNEL, node_id).await?;
        tx.commit().await.map_err(db("sending a signal"))?;
        Ok(())
    }

    /// The signals waiting for `node_id`, oldest first; they are deleted.
    pub async fn take_signals(&self, node_id: &str) -> StoreResult<Vec<Signal>> {
        let rows = sqlx::query(
            "DELETE FROM cluster_signals WHERE node_id = $1 RETURNING id, kind, target, data",
        )
        .bind(node_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db("reading signals"))?;
        let mut signals = rows
            .iter()
            .map(|row| {
                let id: i64 = row.try_get("id")?;
                Ok((
                    id,
                    Signal {
                        kind: row.try_get("kind")?,
                        target: row.try_get("target")?,
                        data: row.try_get("data")?,
                    },
                ))
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(db("reading signals"))?;
        signals.sort_by_key(|(id, _)| *id);
        Ok(signals.into_iter().map(|(_, signal)| signal).collect())
    }

    /// The manifest hash of the session's workspace as last saved.
    pub async fn workspace(&self, session_id: &str) -> StoreResult<Option<String>> {
        let row = sqlx::query("SELECT manifest_hash FROM session_workspaces WHERE session_id = $1")
            .bind(session_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("reading the saved workspace"))?;
        row.map(|row| row.try_get(0))
            .transpose()
            .map_err(db("reading the saved workspace"))
    }

    /// Point the session's shared workspace at `manifest_hash`. With
    /// `lease_turn`, only while `node_id` still holds that turn's lease (a
    /// node that lost it must not overwrite newer work); `false` if not saved.
    pub async fn save_workspace(
        &self,
        session_id: &str,
        manifest_hash: &str,
        node_id: &str,
        lease_turn: Option<&str>,
    ) -> StoreResult<bool> {
        let saved = sqlx::query(
            "INSERT INTO session_workspaces (session_id, manifest_hash, saved_by) \
             SELECT $1, $2, $3 WHERE $4::text IS NULL OR EXISTS (SELECT 1 FROM turn_leases \
               WHERE session_id = $1 AND turn_id = $4 AND node_id = $3) \
             ON CONFLICT (session_id) DO UPDATE \
             SET manifest_hash = $2, saved_by = $3, saved_at = now()",
        )
        .bind(session_id)
        .bind(manifest_hash)
        .bind(node_id)
        .bind(lease_turn)
        .execute(&self.pool)
        .await
        .map_err(db("saving the workspace"))?;
        Ok(saved.rows_affected() == 1)
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
        sqlx::query_scalar("SELECT id FROM turns WHERE session_id = $1 ORDER BY id DESC LIMIT 1")
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

    /// The events of several sessions in one round trip: for each `(session,
    /// after, upto)`, those with `after < seq <= upto`, ordered by session and
    /// `seq`. At most `limit` in all (a stream past the cut reads the rest from
    /// the store when it sees the gap).
    pub async fn events_in_ranges(
        &self,
        ranges: &[(String, u64, u64)],
        limit: u32,
    ) -> StoreResult<Vec<EventEnvelope>> {
        let sessions: Vec<&str> = ranges.iter().map(|(s, _, _)| s.as_str()).collect();
        let seq = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let after: Vec<i64> = ranges.iter().map(|(_, a, _)| seq(*a)).collect();
        let upto: Vec<i64> = ranges.iter().map(|(_, _, u)| seq(*u)).collect();
        let rows = sqlx::query(
            "SELECT e.session_id, e.seq, e.data, e.created_at \
             FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS w(session_id, after, upto) \
             JOIN events e ON e.session_id = w.session_id AND e.seq > w.after AND e.seq <= w.upto \
             ORDER BY e.session_id, e.seq LIMIT $4",
        )
        .bind(&sessions)
        .bind(&after)
        .bind(&upto)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(db("reading events"))?;
        rows.iter()
            .map(|row| {
                let session: String = row.try_get("session_id").map_err(db("reading events"))?;
                envelope_from_row(&session, row)
            })
            .collect()
    }

    /// `(session, last_seq)` of the given sessions, for streams that may have
    /// missed a notification.
    pub async fn last_seqs(&self, session_ids: &[String]) -> StoreResult<Vec<(String, u64)>> {
        let rows = sqlx::query("SELECT id, last_seq FROM sessions WHERE id = ANY($1)")
            .bind(session_ids)
            .fetch_all(&self.pool)
            .await
            .map_err(db("reading sessions"))?;
        rows.iter()
            .map(|row| {
                let seq: i64 = row.try_get("last_seq")?;
                Ok((row.try_get("id")?, u64::try_from(seq).unwrap_or_default()))
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(db("reading sessions"))
    }
}

/// A turn runs (its lease has no `turn.finished` after its start) or waits.
const BUSY: &str = "SELECT EXISTS (SELECT 1 FROM turn_queue WHERE session_id = $1) \
    OR EXISTS (SELECT 1 FROM turn_leases l WHERE l.session_id = $1 AND NOT EXISTS (\
      SELECT 1 FROM events e WHERE e.session_id = $1 AND e.seq > l.start_seq \
        AND e.type = 'turn.finished'))";

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

async fn notify(
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
