//! The stop of `agentd serve`, under one deadline (`[server]
//! shutdown_deadline_s`): whatever a step waits for (turns that cannot be
//! recorded, a database that went away, clients that keep streams open), the
//! sequence ends in time and says what it left undone.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::registry::Registry;

/// Longest wait for interrupted turns to be recorded.
const TURNS_GRACE: Duration = Duration::from_secs(10);
/// Kept back from the deadline for what the process does after `serve`
/// (stopping the turn runtime, killing what it started).
const EXIT_RESERVE: Duration = Duration::from_secs(1);

/// How `serve` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// Every turn recorded, the cluster left, every connection closed.
    Clean,
    /// Something was given up on at the deadline: what, for the log.
    Incomplete { pending: Vec<String> },
}

/// What the stop acts on.
pub(super) struct Stopping {
    pub registry: Registry,
    pub cluster_stop: CancellationToken,
    /// Cancelled first: no new connections; idle ones close.
    pub accepting: CancellationToken,
    /// Cancelled once turns are recorded: event streams end.
    pub streams: CancellationToken,
    /// The accept loop, done once every connection has closed.
    pub connections: JoinHandle<()>,
    /// Closes every connection at once, at the deadline.
    pub cut: CancellationToken,
}

impl Stopping {
    /// Stop within `deadline` (measured from now): accept nothing more,
    /// interrupt turns and give them most of the time to be recorded, end
    /// streams, stop helpers, leave the cluster, wait for connections.
    pub(super) async fn run(mut self, deadline: Duration) -> Stopped {
        let started = Instant::now();
        let end = started + deadline.saturating_sub(EXIT_RESERVE).max(deadline / 2);
        let mut pending = Vec::new();
        self.accepting.cancel();

        let turns_grace = TURNS_GRACE.min((end - started) * 3 / 4);
        if !self.registry.shutdown(turns_grace).await {
            let turns = self.registry.gauges().turns_running;
            pending.push(format!(
                "{turns} turn(s) not recorded as interrupted (the next start records them)"
            ));
        }
        let unrecorded = self.registry.unrecorded_turns();
        if unrecorded > 0 {
            pending.push(format!(
                "recording {unrecorded} turn(s) as interrupted: the store did not take it \
                 (the next start records them)"
            ));
        }
        // Turns are recorded (or given up on): streams end, so their
        // connections close while the rest is stopped.
        self.streams.cancel();
        let registry = self.registry.clone();
        let runtime = registry.runtime();
        step(
            end,
            &mut pending,
            "stopping MCP servers",
            runtime.mcp.shutdown(),
        )
        .await;
        step(
            end,
            &mut pending,
            "killing background commands",
            runtime.background.shutdown(),
        )
        .await;
        // The proxies of network allowlists, and their socket directory.
        runtime.egress.shutdown();
        step(
            end,
            &mut pending,
            "stopping claude-code CLIs",
            runtime.claude.shutdown(),
        )
        .await;
        runtime.model_gateway.shutdown().await;
        self.cluster_stop.cancel();
        let what = "leaving the cluster (the database did not answer)";
        if step(end, &mut pending, what, runtime.coordination.leave()).await == Some(false) {
            pending.push(what.to_string());
        }
        if tokio::time::timeout_at(end, &mut self.connections)
            .await
            .is_err()
        {
            let open = self
                .registry
                .metrics()
                .connections_open
                .load(std::sync::atomic::Ordering::Relaxed);
            pending.push(format!("{open} connection(s) still open, closed"));
            self.cut.cancel();
            self.connections.abort();
        }
        if pending.is_empty() {
            tracing::info!(elapsed = ?started.elapsed(), "shut down cleanly");
            Stopped::Clean
        } else {
            for what in &pending {
                tracing::warn!(deadline = ?deadline, "shutdown gave up on: {what}");
            }
            Stopped::Incomplete { pending }
        }
    }
}

/// Run `work` until `end`; past it, note `what` as pending.
async fn step<T>(
    end: Instant,
    pending: &mut Vec<String>,
    what: &str,
    work: impl Future<Output = T>,
) -> Option<T> {
    let done = tokio::time::timeout_at(end, work).await.ok();
    if done.is_none() {
        pending.push(what.to_string());
    }
    done
}
