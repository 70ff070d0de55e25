//! Keeping this node's leases alive and taking over those of dead nodes.
//!
//! A node beats its heart every `lease_timeout / 5`. A node silent for a whole
//! `lease_timeout` is dead: the first live node to notice takes its leases
//! (`SKIP LOCKED`, so only one does) and finishes their turns as
//! `interrupted`, the way a restart does for a single node. A node that finds
//! one of its leases taken (it was paused, not dead) stops that turn.

use std::collections::HashSet;
use std::time::Duration;

use agentd_protocol::ErrorInfo;
use agentd_store::StoreResult;
use agentd_store::postgres::cluster::Lease;
use tokio_util::sync::CancellationToken;

use super::Cluster;
use crate::registry::Registry;

/// The shortest heartbeat interval, whatever the lease timeout.
const MIN_BEAT: Duration = Duration::from_millis(200);

/// At start-up: the leases this node id still holds are from its previous
/// life (it has taken nothing yet). Finish their turns now rather than after
/// a timeout.
pub(super) async fn recover_own(cluster: &Cluster, registry: &Registry) -> StoreResult<()> {
    let leases = cluster.store().leases_of(cluster.node_id()).await?;
    for lease in leases {
        let error = ErrorInfo {
            code: "server_restarted".into(),
            message: "agentd stopped while this turn was running.".into(),
            retryable: true,
        };
        finish_lost(cluster, registry, &lease, error).await?;
    }
    Ok(())
}

pub(super) async fn heartbeat(cluster: Cluster, registry: Registry, stop: CancellationToken) {
    let timeout = cluster.lease_timeout();
    let every = (timeout / 5).max(MIN_BEAT);
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = stop.cancelled() => return,
        }
        let address = cluster.address();
        // Taken before the leases are read: a turn taken meanwhile has its
        // lease already and must not look lost.
        let running = registry.running_turns();
        match cluster
            .store()
            .heartbeat(cluster.node_id(), &address, cluster.is_draining())
            .await
        {
            Ok(held) => stop_lost_turns(&registry, running, &held.into_iter().collect()),
            Err(err) => {
                tracing::warn!(%err, "heartbeat failed");
                continue;
            }
        }
        match cluster
            .store()
            .take_dead_leases(cluster.node_id(), timeout)
            .await
        {
            Ok(leases) => {
                for lease in leases {
                    tracing::warn!(
                        session_id = %lease.session_id,
                        turn_id = %lease.turn_id,
                        dead_node = %lease.node_id,
                        "a node stopped heartbeating; finishing its turn as interrupted"
                    );
                    let error = ErrorInfo {
                        code: "node_lost".into(),
                        message: format!(
                            "the agentd node running this turn ({}) stopped responding.",
                            lease.node_id
                        ),
                        retryable: true,
                    };
                    if let Err(err) = finish_lost(&cluster, &registry, &lease, error).await {
                        // Our lease now: another node retries once we are silent.
                        tracing::error!(%err, "could not finish a dead node's turn");
                    }
                }
            }
            Err(err) => tracing::warn!(%err, "cannot look for dead nodes"),
        }
        if let Err(err) = cluster.store().forget_dead_nodes(timeout * 4).await {
            tracing::warn!(%err, "cannot forget dead nodes");
        }
    }
}

/// Turns running here whose lease another node took: stop them.
fn stop_lost_turns(registry: &Registry, running: Vec<(String, String)>, held: &HashSet<String>) {
    for (session_id, turn_id) in running {
        if !held.contains(&session_id) && registry.interrupt_turn(&session_id, &turn_id) {
            tracing::error!(%session_id, %turn_id, "this node lost the turn's lease; stopped it");
        }
    }
}

/// Record a lost turn as interrupted (unless its end is already stored),
/// then release its lease so the session's next turn can start anywhere.
async fn finish_lost(
    cluster: &Cluster,
    registry: &Registry,
    lease: &Lease,
    error: ErrorInfo,
) -> StoreResult<()> {
    let already = cluster
        .store()
        .finished_since(&lease.session_id, lease.start_seq)
        .await?;
    registry
        .runtime()
        .finish_lost_turn(&lease.session_id, &lease.turn_id, error, !already)
        .await?;
    cluster
        .store()
        .release_lease(&lease.session_id, &lease.turn_id)
        .await?;
    cluster.kick();
    Ok(())
}
