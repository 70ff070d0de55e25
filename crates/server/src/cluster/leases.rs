//! Keeping this node's leases alive and taking over those of dead nodes.
//!
//! A node beats its heart every `lease_timeout / 10` (timed from each beat's
//! start) and, in a task beside the beats, looks for dead nodes after each
//! one, so a dead node's turns end within 1.1 timeouts, and a node stopped
//! for half a timeout (a GC-like pause) still beats well before it.
//! A node silent for a whole `lease_timeout` is dead: the first live node to
//! notice takes its leases
//! (`SKIP LOCKED`, re-checked against the current owner, so only one does) and
//! finishes their turns as `interrupted`, the way a restart does for a single
//! node. Three guards keep a live node's work from being taken or doubled:
//! - a node takes others' leases only after beating steadily (no failure, no
//!   gap or beat over a quarter timeout) for a whole timeout itself (after a
//!   database outage or a pause of its own every heartbeat is stale);
//! - a node whose last good beat was sent most of a timeout ago (4/5) stops
//!   its own turns (others will consider it dead); each beat is bounded to a
//!   quarter timeout so a hung one cannot delay this; and one that finds a
//!   lease of its turn taken stops that turn;
//! - releases and workspace saves name the node, so a node that lost a lease
//!   cannot release or overwrite the new owner's; and so do a leased turn's
//!   writes: its events and messages (`turn.finished` included), its row
//!   started and finished, and its session's status and totals (at its
//!   start and end, while it waits for an answer, and the end the worker
//!   records for a turn that could not run). Each carries the
//!   [`agentd_store::Fence`] of `Runtime::fence_for` (the turn's
//!   `StoreSink`, `crate::turn_writes`, the approver) and PostgreSQL writes
//!   it only while the lease row, locked `FOR SHARE` first in the write's
//!   own statement (a message: its transaction, which may idle one lease
//!   timeout at most), still names this node and turn. A takeover
//!   (`FOR UPDATE SKIP LOCKED`) skips a lease a write holds, and a write
//!   after a takeover finds the new owner and is refused (`LeaseLost`). A
//!   node that wakes after a pause past the timeout thus writes nothing more
//!   of the turn it lost: no event, no turn row or status, no session
//!   status; the survivor's `turn.finished` (`interrupted`) is the last of
//!   it. Its compaction records are fenced likewise. Not fenced: its pending
//!   requests and session allow rules, checkpoints. The survivor finishes a
//!   taken turn unfenced (the lease is its own then).

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
    // The longest one beat (or other database call here) may take.
    let bound = timeout / 4;
    let mut beats = Beats::new(timeout, Instant::now());
    // Beats are timed from each one's start, and looking for dead nodes runs
    // beside them: a slow takeover must not push the next beat past the
    // point where this node stops its own turns.
    let mut ticks = tokio::time::interval_at((Instant::now() + every).into(), every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut upkeep: Option<tokio::task::JoinHandle<()>> = None;
    let mut beat_count: u32 = 0;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = stop.cancelled() => return,
        }
        // Taken before the leases are read: a turn taken meanwhile has its
        // lease already and must not look lost.
        let running = registry.running_turns();
        // The database stamps the beat at its start: so does `last_ok`.
        let address = cluster.address();
        let sent = Instant::now();
        let beat = tokio::time::timeout(
            bound,
            cluster.store().heartbeat(
                cluster.node_id(),
                &address,
                cluster.instance(),
                cluster.is_draining(),
            ),
        );
        tokio::pin!(beat);
        // Checked at every beat, and while one hangs: the others may take
        // this node's leases once its last good beat is a timeout old.
        let mut stopped = false;
        let beat = tokio::select! {
            beat = &mut beat => beat,
            () = tokio::time::sleep_until(beats.stop_at().into()) => {
                stop_all(&registry, STOP_WHY);
                stopped = true;
                beat.await
            }
        };
        let held = match beat {
            Ok(Ok(held)) => held,
            failed => {
                match failed {
                    Ok(Err(err)) => tracing::warn!(%err, "heartbeat failed"),
                    _ => tracing::warn!("heartbeat timed out"),
                }
                beats.failed();
                if !stopped && beats.must_stop(Instant::now()) {
                    stop_all(&registry, STOP_WHY);
                }
                continue;
            }
        };
        beats.ok(sent, Instant::now());
        stop_lost_turns(&registry, running, &held);
        // A claim's lease is committed before the claimer hands its turn
        // over: a pause in between must not make a live turn look orphaned.
        let orphans = orphan_leases(&held, timeout, |session_id, turn_id| {
            registry.knows_turn(session_id, turn_id)
        });
        beat_count = beat_count.wrapping_add(1);
        // One upkeep at a time; what this beat found is found again next.
        if upkeep.as_ref().is_none_or(|task| task.is_finished()) {
            let chores = Upkeep {
                take: beats.steady(Instant::now()),
                // Nodes are forgotten after four timeouts: once a timeout
                // is often enough to look.
                forget: beat_count.is_multiple_of(BEATS_PER_TIMEOUT),
                bound,
            };
            upkeep = Some(tokio::spawn(chores.run(
                cluster.clone(),
                registry.clone(),
                orphans,
            )));
        }
    }
}

/// What a beat leaves to a task beside the heartbeat.
struct Upkeep {
    /// Take dead nodes' leases (this node beats steadily).
    take: bool,
    /// Forget nodes silent for four timeouts.
    forget: bool,
    /// The longest each database call may take.
    bound: Duration,
}

impl Upkeep {
    async fn run(self, cluster: Cluster, registry: Registry, orphans: Vec<HeldLease>) {
        let timeout = cluster.lease_timeout();
        let dead = if self.take {
            let take = cluster.store().take_dead_leases(cluster.node_id(), timeout);
            match tokio::time::timeout(self.bound, take).await {
                Ok(Ok(leases)) => leases,
                Ok(Err(err)) => {
                    tracing::warn!(%err, "cannot look for dead nodes");
                    Vec::new()
                }
                Err(_) => {
                    // Any it took are ours: later beats find them orphaned.
                    tracing::warn!("looking for dead nodes timed out");
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        if !orphans.is_empty() || !dead.is_empty() {
            // Its own task: recording many turns must not delay the next upkeep.
            tokio::spawn(finish_all(cluster.clone(), registry, orphans, dead));
        }
        if self.forget {
            let forget = cluster.store().forget_dead_nodes(timeout * 4);
            match tokio::time::timeout(self.bound, forget).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => tracing::warn!(%err, "cannot forget dead nodes"),
                Err(_) => tracing::warn!("forgetting dead nodes timed out"),
            }
        }
    }
}

const STOP_WHY: &str = "its heartbeats failed for most of the lease timeout";

/// What the heartbeat knows of its own beats.
struct Beats {
    timeout: Duration,
    /// When the last beat that succeeded was sent (the database stamps it
    /// at its start, so others count this node's silence from about then).
    last_ok: Instant,
    /// Beating without a gap since then; `None` right after a failure.
    steady_since: Option<Instant>,
}

impl Beats {
    fn new(timeout: Duration, now: Instant) -> Self {
        Self {
            timeout,
            last_ok: now,
            steady_since: Some(now),
        }
    }

    /// A beat sent at `sent` succeeded at `done`. A long gap since the last
    /// good beat, or a slow beat, means this node was paused or its database
    /// stalled: what it saw of the others' beats is not to be trusted yet.
    fn ok(&mut self, sent: Instant, done: Instant) {
        let gap = self.timeout / 4;
        if sent.saturating_duration_since(self.last_ok) > gap
            || done.saturating_duration_since(sent) > gap
        {
            self.steady_since = None;
        }
        self.last_ok = sent;
        self.steady_since.get_or_insert(done);
    }

    fn failed(&mut self) {
        self.steady_since = None;
    }

    /// When this node stops its own turns unless a beat succeeds: most of a
    /// timeout after the last good one, before any other may take them.
    fn stop_at(&self) -> Instant {
        self.last_ok + self.timeout * 4 / 5
    }

    fn must_stop(&self, now: Instant) -> bool {
        now > self.stop_at()
    }

    /// May take dead nodes' leases: beating steadily for a whole timeout.
    fn steady(&self, now: Instant) -> bool {
        self.steady_since
            .is_some_and(|since| now.saturating_duration_since(since) >= self.timeout)
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
        // Its claim may have been handed over meanwhile.
        if registry.knows_turn(&lease.session_id, &lease.turn_id) {
            continue;
        }
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

/// This node's leases with no turn here (running, finishing or queued,
/// per `knows`): a worker that died, or a claim whose answer was lost.
/// Leases younger than `grace` are left alone: their turn may be starting.
fn orphan_leases(
    held: &[HeldLease],
    grace: Duration,
    knows: impl Fn(&str, &str) -> bool,
) -> Vec<HeldLease> {
    let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    held.iter()
        .filter(|l| l.age_ms > grace_ms && !knows(&l.session_id, &l.turn_id))
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

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(4);

    #[test]
    fn last_ok_is_when_the_beat_was_sent_and_stopping_comes_before_the_timeout() {
        let t0 = Instant::now();
        let mut beats = Beats::new(T, t0);
        let sent = t0 + T / 10;
        beats.ok(sent, sent + T / 5);
        assert_eq!(beats.last_ok, sent, "not when it returned");
        assert!(beats.stop_at() < sent + T);
        assert!(!beats.must_stop(sent + T / 2));
        beats.failed();
        assert!(!beats.must_stop(beats.stop_at()));
        assert!(beats.must_stop(beats.stop_at() + T / 100));
        assert!(beats.must_stop(sent + T), "before the others may take over");
    }

    #[test]
    fn steady_needs_a_whole_timeout_of_regular_beats() {
        let t0 = Instant::now();
        let step = T / 10;
        let mut beats = Beats::new(T, t0);
        let mut at = t0;
        for _ in 0..9 {
            at += step;
            beats.ok(at, at);
            assert!(!beats.steady(at));
        }
        at += step;
        beats.ok(at, at);
        assert!(beats.steady(at));

        // A failed beat restarts the count.
        beats.failed();
        at += step;
        beats.ok(at, at);
        assert!(!beats.steady(at + T / 2));
        assert!(beats.steady(at + T));
    }

    /// Beats every tenth of a timeout, for a whole timeout, from `at`.
    fn beat_steadily(beats: &mut Beats, at: &mut Instant) {
        for _ in 0..10 {
            *at += T / 10;
            beats.ok(*at, *at);
        }
        assert!(beats.steady(*at));
    }

    #[test]
    fn a_gap_or_a_slow_beat_restarts_the_count() {
        let mut at = Instant::now();
        let mut beats = Beats::new(T, at);
        beat_steadily(&mut beats, &mut at);
        // Paused: the next beat comes a third of a timeout later.
        at += T / 3;
        beats.ok(at, at);
        assert!(!beats.steady(at + T / 2));
        beat_steadily(&mut beats, &mut at);

        // The database stalled: the beat itself took a third of a timeout.
        at += T / 10;
        beats.ok(at, at + T / 3);
        assert!(!beats.steady(at + T / 2));
        assert!(beats.steady(at + T / 3 + T));
    }

    fn lease(turn: &str, age: Duration) -> HeldLease {
        HeldLease {
            session_id: "s".into(),
            turn_id: turn.into(),
            age_ms: i64::try_from(age.as_millis()).unwrap_or(i64::MAX),
        }
    }

    #[test]
    fn orphans_are_unknown_leases_older_than_the_grace() {
        let held = [
            lease("young", T / 2),
            lease("known", T * 2),
            lease("orphan", T * 2),
        ];
        let orphans = orphan_leases(&held, T, |_, turn| turn == "known");
        let turns: Vec<_> = orphans.iter().map(|l| l.turn_id.as_str()).collect();
        assert_eq!(turns, ["orphan"]);
    }
}
