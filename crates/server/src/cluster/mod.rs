//! Several `agentd serve` nodes sharing one PostgreSQL. Any node
//! accepts any request; the database decides who runs what:
//!
//! - a message becomes a row of the shared turn queue; a node with room takes
//!   the oldest turn of a session nobody runs (`SKIP LOCKED`) and holds its
//!   lease until the turn is recorded ([`leases`] keeps it alive);
//! - events are stored by the owner and reach streams on other nodes through
//!   `NOTIFY` + a read of the events table ([`listen`]);
//! - interrupts and answers posted to another node reach the owner as signals;
//! - a node silent for `lease_timeout_s` is dead: another finishes its turns
//!   as `interrupted` and the sessions go on anywhere;
//! - the workspace is saved to the blob store at each turn end and restored by
//!   a node that lacks it before the turn starts ([`workspace`]).
//!
//! With SQLite (one node) none of this exists: the server runs
//! [`crate::coordination::Alone`]; a node runs this as its
//! [`crate::coordination::Coordination`].

mod coordination;
mod leases;
mod listen;
mod workspace;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentd_store::SessionRecord;
use agentd_store::postgres::cluster::{ClusterStore, Enqueued, QueuedTurn};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::config::ClusterConfig;
use crate::registry::{Accepted, PendingTurn, Registry, Submission, SubmitError};

pub use workspace::localize;

/// This node's part of the cluster. Cheap to clone.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    node_id: String,
    /// The id was set in the config (not kept in the data dir): another live
    /// process with it is a mistake, not this node's previous life.
    configured_id: bool,
    /// Random per process.
    instance: String,
    store: ClusterStore,
    lease_timeout: Duration,
    max_running: usize,
    /// Turns this node has taken and not yet released.
    running: AtomicUsize,
    /// Wakes the claimer: a turn was queued or a lease released.
    kick: Notify,
    /// Set by `drain`: take no new turns, exit when the running ones end.
    draining: CancellationToken,
    /// Released a turn while draining: maybe the last one.
    released: Notify,
    address: std::sync::Mutex<String>,
    workspaces: workspace::Synced,
    /// The last turn this node ran, per session.
    last_turns: LastTurns,
}

/// Attempts at saving a workspace at a turn end.
const SAVE_TRIES: u32 = 3;

/// Session → the last turn this node ran of it (bounded, like `Synced`).
#[derive(Default)]
struct LastTurns(std::sync::Mutex<HashMap<String, String>>);

impl LastTurns {
    fn get(&self, session_id: &str) -> Option<String> {
        self.0.lock().ok()?.get(session_id).cloned()
    }

    fn set(&self, session_id: &str, turn_id: &str) {
        if let Ok(mut map) = self.0.lock() {
            if map.len() >= 4096 {
                map.clear();
            }
            map.insert(session_id.to_string(), turn_id.to_string());
        }
    }
}

impl Cluster {
    pub fn new(store: ClusterStore, config: &ClusterConfig, node_id: String) -> Self {
        Self {
            inner: Arc::new(Inner {
                node_id,
                configured_id: config.node_id.is_some(),
                instance: uuid::Uuid::new_v4().simple().to_string(),
                store,
                lease_timeout: Duration::from_secs(config.lease_timeout_s),
                max_running: config.max_running_turns,
                running: AtomicUsize::new(0),
                kick: Notify::new(),
                draining: CancellationToken::new(),
                released: Notify::new(),
                address: std::sync::Mutex::new(String::new()),
                workspaces: workspace::Synced::default(),
                last_turns: LastTurns::default(),
            }),
        }
    }

    pub fn node_id(&self) -> &str {
        &self.inner.node_id
    }

    pub fn store(&self) -> &ClusterStore {
        &self.inner.store
    }

    pub fn lease_timeout(&self) -> Duration {
        self.inner.lease_timeout
    }

    /// Join: recover what this node's previous life left, then start the
    /// listener, the heartbeat (with failover) and the claimer. They stop
    /// when `stop` is cancelled.
    pub async fn start(
        &self,
        registry: Registry,
        address: &str,
        stop: CancellationToken,
    ) -> anyhow::Result<()> {
        if let Ok(mut slot) = self.inner.address.lock() {
            *slot = address.to_string();
        }
        let store = &self.inner.store;
        let (id, instance) = (&self.inner.node_id, &self.inner.instance);
        let registered = store
            .register_node(id, address, instance, self.inner.lease_timeout)
            .await?;
        if !registered && self.inner.configured_id {
            return Err(anyhow::anyhow!(
                "another agentd node with id {id:?} heartbeated less than {}s ago: give each \
                 node its own [cluster] node_id (or none), or wait for the old one to time out",
                self.inner.lease_timeout.as_secs()
            ));
        }
        if !registered {
            // Our own data dir's id: this is a restart after a crash.
            store
                .register_node(id, address, instance, Duration::ZERO)
                .await?;
        }
        leases::recover_own(self, &registry).await?;
        let listener = store.listener().await?;
        tracing::info!(node_id = %self.inner.node_id, "joined the cluster");
        tokio::spawn(listen::run(
            self.clone(),
            registry.clone(),
            listener,
            stop.clone(),
        ));
        tokio::spawn(leases::heartbeat(
            self.clone(),
            registry.clone(),
            stop.clone(),
        ));
        tokio::spawn(self.clone().claim_loop(registry, stop));
        Ok(())
    }

    fn instance(&self) -> &str {
        &self.inner.instance
    }

    fn address(&self) -> String {
        self.inner
            .address
            .lock()
            .map(|a| a.clone())
            .unwrap_or_default()
    }

    /// Accept a message: queue it in the database for whichever node takes it.
    async fn enqueue(
        &self,
        session: &SessionRecord,
        submission: Submission,
    ) -> Result<Accepted, SubmitError> {
        let turn = QueuedTurn {
            turn_id: uuid::Uuid::now_v7().to_string(),
            session_id: session.id.clone(),
            text: submission.kind.to_queue_text(),
            client_request_id: submission.client_request_id,
        };
        let accepted = match self
            .inner
            .store
            .enqueue_turn(&turn, submission.queue)
            .await?
        {
            Enqueued::Started => Accepted::Started(turn.turn_id),
            Enqueued::Queued => Accepted::Queued(turn.turn_id),
            Enqueued::Duplicate(id) => return Ok(Accepted::Duplicate(id)),
            Enqueued::Busy => return Err(SubmitError::Busy),
        };
        // Take it here if there is room (the NOTIFY wakes the other nodes).
        self.inner.kick.notify_one();
        Ok(accepted)
    }

    /// Take queued turns while there is room, on every kick and every second
    /// (in case a notification was lost).
    async fn claim_loop(self, registry: Registry, stop: CancellationToken) {
        loop {
            while !self.is_draining()
                && !registry.is_stopping()
                && self.inner.running.load(Ordering::SeqCst) < self.inner.max_running
            {
                match self.claim(&registry, None).await {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(err) => {
                        tracing::warn!(%err, "cannot take queued turns");
                        break;
                    }
                }
            }
            tokio::select! {
                () = self.inner.kick.notified() => {}
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
                () = stop.cancelled() => return,
            }
        }
    }

    /// Take the oldest queued turn (of `session`, if given) and start it;
    /// its id. Counted as running before it is taken, so a drain never sees
    /// zero while a claim is in flight.
    async fn claim(
        &self,
        registry: &Registry,
        session: Option<&str>,
    ) -> anyhow::Result<Option<String>> {
        self.inner.running.fetch_add(1, Ordering::SeqCst);
        let claimed = self
            .inner
            .store
            .claim_turn(&self.inner.node_id, session, self.inner.lease_timeout)
            .await;
        let Ok(Some((turn, lease))) = claimed else {
            self.inner.running.fetch_sub(1, Ordering::SeqCst);
            self.inner.released.notify_waiters();
            return Ok(claimed.map(|_| None)?);
        };
        tracing::debug!(session_id = %lease.session_id, turn_id = %lease.turn_id, "took a turn");
        registry.start_claimed(
            &turn.session_id,
            PendingTurn {
                turn_id: turn.turn_id.clone(),
                kind: crate::registry::TurnKind::from_queue_text(turn.text),
                client_request_id: turn.client_request_id,
                by: None,
            },
        );
        Ok(Some(turn.turn_id))
    }

    /// Wake the claimer (a `TURNS` notification came).
    pub(crate) fn kick(&self) {
        self.inner.kick.notify_one();
    }

    /// Stop taking turns; [`Cluster::drained`] resolves once the running ones
    /// are released.
    pub fn drain(&self) {
        if !self.inner.draining.is_cancelled() {
            tracing::info!(node_id = %self.inner.node_id, "draining: finishing running turns, taking no new ones");
        }
        self.inner.draining.cancel();
    }

    pub fn is_draining(&self) -> bool {
        self.inner.draining.is_cancelled()
    }
}

/// `[cluster] node_id`, else the id kept in `<data_dir>/node_id` (made on the
/// first start: the host name and a random suffix), so a restarted node
/// recognises the leases its previous life left.
pub fn node_id(configured: Option<&str>, data_dir: &Path) -> std::io::Result<String> {
    if let Some(id) = configured {
        return Ok(id.to_string());
    }
    let file = data_dir.join("node_id");
    if let Ok(id) = std::fs::read_to_string(&file)
        && !id.trim().is_empty()
    {
        return Ok(id.trim().to_string());
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".into());
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let id = format!("{host}-{suffix}");
    std::fs::create_dir_all(data_dir)?;
    let mut private = std::fs::OpenOptions::new();
    std::os::unix::fs::OpenOptionsExt::mode(&mut private, 0o600);
    let mut out = private
        .write(true)
        .create(true)
        .truncate(true)
        .open(&file)?;
    std::io::Write::write_all(&mut out, format!("{id}\n").as_bytes())?;
    Ok(id)
}
