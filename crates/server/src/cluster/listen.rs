//! Notifications from the other nodes: new events (streams here read them from
//! the events table), queued turns and released leases (the claimer looks for
//! work), signals for this node (interrupts and answers for its turns).
//!
//! Notifications only wake us: every 2 s, and whenever the listening
//! connection was lost, streams are checked against `sessions.last_seq` and
//! signals are read anyway.

use std::collections::HashMap;
use std::time::Duration;

use agentd_store::postgres::cluster::PgListener;
use agentd_store::postgres::cluster::{EVENTS_CHANNEL, SIGNALS_CHANNEL, Signal, TURNS_CHANNEL};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Cluster;
use crate::approvals::Reply;
use crate::registry::Registry;

/// How often streams and signals are checked without a notification.
const SWEEP: Duration = Duration::from_secs(2);
/// Events read in one catch-up query at most.
const CATCH_UP_LIMIT: u32 = 4096;
/// An interrupt for a turn not started here yet is retried this many times,
/// 50 ms apart.
const INTERRUPT_RETRIES: u32 = 40;

enum Wake {
    /// `(session, first seq, last seq)` of an append.
    Events(String, u64, u64),
    Turns,
    Signals,
    /// The connection dropped: notifications may be lost.
    Lost,
}

pub(super) async fn run(
    cluster: Cluster,
    registry: Registry,
    listener: PgListener,
    stop: CancellationToken,
) {
    let (wakes, mut woken) = mpsc::unbounded_channel();
    // Its own task: `try_recv` is not cancel-safe, so it is never raced.
    let receiver = tokio::spawn(receive(listener, cluster.node_id().to_string(), wakes));
    let mut sweep = tokio::time::interval(SWEEP);
    loop {
        let first = tokio::select! {
            wake = woken.recv() => match wake {
                Some(wake) => wake,
                None => break,
            },
            _ = sweep.tick() => Wake::Lost,
            () = stop.cancelled() => break,
        };
        // Handle everything that is waiting as one batch.
        let mut appended: HashMap<String, (u64, u64)> = HashMap::new();
        let (mut turns, mut signals, mut lost) = (false, false, false);
        let mut next = Some(first);
        while let Some(wake) = next {
            match wake {
                Wake::Events(session, first, last) => {
                    let heard = last.saturating_sub(first).saturating_add(1);
                    let counter = &registry.metrics().events_heard;
                    counter.fetch_add(heard, std::sync::atomic::Ordering::Relaxed);
                    let range = appended.entry(session).or_insert((first, last));
                    range.0 = range.0.min(first);
                    range.1 = range.1.max(last);
                }
                Wake::Turns => turns = true,
                Wake::Signals => signals = true,
                Wake::Lost => lost = true,
            }
            next = woken.try_recv().ok();
        }
        if turns || lost {
            cluster.kick();
        }
        if signals || lost {
            take_signals(&cluster, &registry).await;
        }
        let mut ranges: Vec<(String, u64, u64)> = appended
            .into_iter()
            .map(|(session, (first, last))| (session, first.saturating_sub(1), last))
            .collect();
        if lost {
            ranges.extend(missed(&cluster, &registry).await);
        }
        catch_up(&cluster, &registry, ranges).await;
    }
    receiver.abort();
}

async fn receive(mut listener: PgListener, node_id: String, wakes: mpsc::UnboundedSender<Wake>) {
    loop {
        let wake = match listener.try_recv().await {
            Ok(Some(notification)) => match notification.channel() {
                EVENTS_CHANNEL => {
                    let mut parts = notification.payload().split(' ');
                    let (Some(session), Some(first), Some(last)) =
                        (parts.next(), parts.next(), parts.next())
                    else {
                        continue;
                    };
                    match (first.parse(), last.parse()) {
                        (Ok(first), Ok(last)) => Wake::Events(session.to_string(), first, last),
                        _ => continue,
                    }
                }
                TURNS_CHANNEL => Wake::Turns,
                SIGNALS_CHANNEL if notification.payload() == node_id => Wake::Signals,
                _ => continue,
            },
            Ok(None) => {
                tracing::warn!("lost the cluster notification connection; reconnecting");
                Wake::Lost
            }
            Err(err) => {
                tracing::warn!(%err, "cluster notifications failed; retrying in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
                Wake::Lost
            }
        };
        if wakes.send(wake).is_err() {
            return;
        }
    }
}

/// Publish each session's events in `(after, upto]` to its streams here, in
/// one query for all of them; sessions nobody here watches, or whose turn runs
/// here (its worker publishes), are left out.
async fn catch_up(cluster: &Cluster, registry: &Registry, ranges: Vec<(String, u64, u64)>) {
    let mut merged: HashMap<String, (u64, u64)> = HashMap::new();
    for (session, after, upto) in ranges {
        let range = merged.entry(session).or_insert((after, upto));
        *range = (range.0.min(after), range.1.max(upto));
    }
    let mut handles = HashMap::new();
    let mut wanted = Vec::new();
    for (session, (after, upto)) in merged {
        let Some(handle) = registry.watched(&session) else {
            continue;
        };
        let after = handle.published().max(after);
        if handle.runs_here() || after >= upto {
            continue;
        }
        wanted.push((session.clone(), after, upto));
        handles.insert(session, handle);
    }
    if wanted.is_empty() {
        return;
    }
    match cluster
        .store()
        .events_in_ranges(&wanted, CATCH_UP_LIMIT)
        .await
    {
        Ok(events) => {
            for envelope in &events {
                if let Some(handle) = handles.get(&envelope.session_id) {
                    handle.publish(envelope);
                }
            }
        }
        Err(err) => tracing::warn!(%err, "cannot read events for live streams"),
    }
}

/// Streams whose session moved on without a notification reaching us: the
/// latest event each (one past a gap sends a stream to the store for the
/// rest).
async fn missed(cluster: &Cluster, registry: &Registry) -> Vec<(String, u64, u64)> {
    let watched = registry.watched_sessions();
    if watched.is_empty() {
        return Vec::new();
    }
    let ids: Vec<String> = watched.iter().map(|(id, _)| id.clone()).collect();
    let seqs = match cluster.store().last_seqs(&ids).await {
        Ok(seqs) => seqs,
        Err(err) => {
            tracing::warn!(%err, "cannot check live streams");
            return Vec::new();
        }
    };
    let published: HashMap<String, u64> = watched.into_iter().collect();
    // Deleted (on another node): end the streams here too.
    let present: std::collections::HashSet<&str> = seqs.iter().map(|(id, _)| id.as_str()).collect();
    for gone in published.keys().filter(|id| !present.contains(id.as_str())) {
        if let Some(handle) = registry.watched(gone) {
            handle.closed.cancel();
        }
    }
    seqs.into_iter()
        .filter(|(session, last)| published.get(session).is_some_and(|p| p < last))
        .map(|(session, last)| (session, last - 1, last))
        .collect()
}

async fn take_signals(cluster: &Cluster, registry: &Registry) {
    let signals = match cluster.store().take_signals(cluster.node_id()).await {
        Ok(signals) => signals,
        Err(err) => {
            tracing::warn!(%err, "cannot read signals");
            return;
        }
    };
    for signal in signals {
        apply(registry, &signal);
    }
}

fn apply(registry: &Registry, signal: &Signal) {
    let data: Value = serde_json::from_str(&signal.data).unwrap_or(Value::Null);
    let delivered = match signal.kind.as_str() {
        "interrupt" => {
            let turn_id = data["turn_id"].as_str().unwrap_or_default().to_string();
            if !registry.interrupt_turn(&signal.target, &turn_id) {
                // Taken a moment ago and not started yet: try again shortly.
                let (registry, session) = (registry.clone(), signal.target.clone());
                tokio::spawn(async move {
                    for _ in 0..INTERRUPT_RETRIES {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        if registry.interrupt_turn(&session, &turn_id) {
                            return;
                        }
                    }
                    tracing::info!(%session, %turn_id, "interrupt arrived after its turn");
                });
            }
            true
        }
        kind => Reply::from_signal(kind, &data)
            .is_some_and(|reply| registry.runtime().approvals.deliver(&signal.target, reply)),
    };
    if !delivered {
        // Its turn ended meanwhile; the answer has nobody to go to.
        tracing::info!(kind = %signal.kind, target = %signal.target, "signal arrived after its turn");
    }
}
