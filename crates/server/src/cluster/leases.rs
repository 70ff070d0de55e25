//! Keeping this node's leases alive and taking over those of dead nodes.
//!
//! A node beats its heart every `lease_timeout / 10` and looks for dead nodes
//! at each beat, so a dead node's turns end within 1.1 timeouts, and a node
//! stopped for half a timeout (a GC-like pause) still beats well before it.
//! A node silent for a whole `lease_timeout` is dead: the first live node to
//! notice takes its leases
//! (`SKIP LOCKED`, re-checked against the current owner, so only one does) and
//! finishes their turns as `interrupted`, the way a restart does for a single
//! node. Three guards keep a live node's work from being taken or doubled:
//! - a node takes others' leases only after beating steadily for a whole
//!   timeout itself (after a database outage every heartbeat is stale);
//! - a node whose heartbeats fail for most of a timeout stops its own turns
//!   (others will consider it dead), and one that finds a lease of its turn
//!   taken stops that turn;
//! - releases and workspace saves name the node, so a node that lost a lease
//!   cannot release or overwrite the new owner's.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use agentd_protocol::{ErrorCode, ErrorInfo};
use agentd_store::StoreResult;
use agentd_store::postgres::cluster::{HeldLease, Lease};
use tokio_util::sync::CancellationToken;

use super::Cluster;
use crate::registry::Registry;

/// Heartbeats (and looks for dead nodes) per lease timeout.
const BEATS_PER_TIMEOUT: u32 = 10;
/// The shortest heartbeat interval, whatever the lease timeout.
const MIN_BEAT: Duration = Duration::from_millis(200);

/// At start-up: the leases this node id still holds are from its previous
/// life (it has taken nothing yet), and turns recorded as running that no
/// lease covers were left by a single-node server. Finish both now.
pub(super) async fn recover_own(cluster: &Cluster, registry: &Registry) -> StoreResult<()> {
    let restarted = || ErrorInfo {
        code: ErrorCode::ServerRestarted,
        message: "agentd stopped while this turn was running.".into(),
        retryable: true,
    };
    for lease in cluster.store().leases_of(cluster.node_id()).await? {
        finish_lost(cluster, registry, &lease, restarted()).await?;
    }
    for (session_id, turn_id) in cluster.store().orphan_turns().await? {
        registry
            .runtime()
            .finish_lost_turn(&session_id, &turn_id, restarted(), true)
            .await?;
    }
    Ok(())
}

pub(super) async fn heartbeat(cluster: Cluster, registry: Registry, stop: CancellationToken) {
    let timeout = cluster.lease_timeout();
    let every = (timeout / BEATS_PER_TIMEOUT).max(MIN_BEAT);
    let mut last_ok = Instant::now();
    // Beating without a gap since then; `None` right after a failure.
    let mut steady_since = Some(Instant::now());
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = stop.cancelled() => return,
        }
        // Taken before the leases are read: a turn taken meanwhile has its
        // lease already and must not look lost.
        let running = registry.running_turns();
        let beat = cluster
            .store()
            .heartbeat(
                cluster.node_id(),
                &cluster.address(),
                cluster.instance(),
                cluster.is_draining(),
            )
            .await;
        let held = match beat {
            Ok(held) => held,
            Err(err) => {
                tracing::warn!(%err, "heartbeat failed");
                steady_since = None;
                if last_ok.elapsed() > timeout * 4 / 5 {
                    stop_all(
                        &registry,
                        "its heartbeats failed for most of the lease timeout",
                    );
                }
                continue;
            }
        };
        last_ok = Instant::now();
        let steady = *steady_since.get_or_insert_with(Instant::now);
        stop_lost_turns(&registry, running, &held);
        let orphans = orphan_leases(&registry, &held, every);
        let dead = if steady.elapsed() >= timeout {
            match cluster
                .store()
                .take_dead_leases(cluster.node_id(), timeout)
                .await
            {
                Ok(leases) => leases,
                Err(err) => {
                    tracing::warn!(%err, "cannot look for dead nodes");
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        if !orphans.is_empty() || !dead.is_empty() {
            // Its own task: recording many turns must not delay the next beat.
            tokio::spawn(finish_all(cluster.clone(), registry.clone(), orphans, dead));
        }
        if let Err(err) = cluster.store().forget_dead_nodes(timeout * 4).await {
            tracing::warn!(%err, "cannot forget dead nodes");
        }
    }
}

async fn finish_all(
    cluster: Cluster,
    registry: Registry,
    orphans: Vec<HeldLease>,
    dead: Vec<Lease>,
) {
    for held in orphans {
        // Read again: it may have been released or taken meanwhile.
        let lease = match cluster.store().lease(&held.session_id).await {
            Ok(Some(lease))
                if lease.turn_id == held.turn_id && lease.node_id == cluster.node_id() =>
            {
                lease
            }
            Ok(_) => continue,
            Err(err) => {
                tracing::warn!(%err, "cannot read a lease");
                continue;
            }
        };
        tracing::error!(session_id = %lease.session_id, turn_id = %lease.turn_id,
            "a lease of this node has no turn running here; finishing it");
        let error = ErrorInfo {
            code: ErrorCode::TurnLost,
            message: "this turn stopped on its node without being recorded.".into(),
            retryable: true,
        };
        if let Err(err) = finish_lost(&cluster, &registry, &lease, error).await {
            tracing::error!(%err, "could not finish a lost turn; retrying at the next heartbeat");
        }
    }
    for lease in dead {
        tracing::warn!(
            session_id = %lease.session_id,
            turn_id = %lease.turn_id,
            dead_node = %lease.node_id,
            "a node stopped heartbeating; finishing its turn as interrupted"
        );
        let error = ErrorInfo {
            code: ErrorCode::NodeLost,
            message: format!(
                "the agentd node running this turn ({}) stopped responding.",
                lease.node_id
            ),
            retryable: true,
        };
        if let Err(err) = finish_lost(&cluster, &registry, &lease, error).await {
            // The lease is ours now: the next heartbeat finds it orphaned.
            tracing::error!(%err, "could not finish a dead node's turn");
        }
    }
}

/// Turns running here whose lease another node took: stop them.
fn stop_lost_turns(registry: &Registry, running: Vec<(String, String)>, held: &[HeldLease]) {
    let held: HashSet<(&str, &str)> = held
        .iter()
        .map(|l| (l.session_id.as_str(), l.turn_id.as_str()))
        .collect();
    for (session_id, turn_id) in running {
        if !held.contains(&(session_id.as_str(), turn_id.as_str()))
            && registry.interrupt_turn(&session_id, &turn_id)
        {
            tracing::error!(%session_id, %turn_id, "this node lost the turn's lease; stopped it");
        }
    }
}

/// Stop every turn here: the others will soon take their leases.
fn stop_all(registry: &Registry, why: &str) {
    for (session_id, turn_id) in registry.running_turns() {
        if registry.interrupt_turn(&session_id, &turn_id) {
            tracing::error!(%session_id, %turn_id, "stopped the turn: {why}");
        }
    }
}

/// This node's leases with no turn here (running, finishing or queued):
/// a worker that died, or a claim whose answer was lost. Young leases are
/// left alone: their turn may be starting.
fn orphan_leases(registry: &Registry, held: &[HeldLease], grace: Duration) -> Vec<HeldLease> {
    let grace_ms = i64::try_from(grace.as_millis() * 2).unwrap_or(i64::MAX);
    held.iter()
        .filter(|l| l.age_ms > grace_ms && !registry.knows_turn(&l.session_id, &l.turn_id))
        .cloned()
        .collect()
}

/// Record a lost turn as interrupted (unless its end is already stored),
/// then release its lease so the session's next turn can start anywhere.
async fn finish_lost(
    cluster: &Cluster,
    registry: &Registry,
    lease: &Lease,
    error: ErrorInfo,
) -> StoreResult<()> {
    let store = cluster.store();
    let already = store
        .finished_since(&lease.session_id, lease.start_seq)
        .await?;
    registry
        .runtime()
        .finish_lost_turn(&lease.session_id, &lease.turn_id, error, !already)
        .await?;
    store
        .release_lease(&lease.session_id, &lease.turn_id, cluster.node_id())
        .await?;
    cluster.kick();
    Ok(())
}
