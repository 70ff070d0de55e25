//! Notifications from the other nodes: new events (streams here read them from
//! the events table), queued turns and released leases (the claimer looks for
//! work), signals for this node (interrupts and answers for its turns).
//!
//! Notifications only wake us: every 2 s, and whenever the listening
//! connection was lost, streams are checked against `sessions.last_seq` and
//! signals are read anyway.

use std::collections::HashMap;
use std::time::Duration;

use agentd_engine::{Answer, Decision, QuestionAnswer};
use agentd_store::postgres::cluster::PgListener;
use agentd_store::postgres::cluster::{EVENTS_CHANNEL, SIGNALS_CHANNEL, Signal, TURNS_CHANNEL};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Cluster;
use crate::registry::Registry;

/// How often streams and signals are checked without a notification.
const SWEEP: Duration = Duration::from_secs(2);
/// Events read per query when a stream catches up.
const PAGE: u32 = 256;

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
        for (session, (first, last)) in appended {
            catch_up(&registry, &session, first.saturating_sub(1), last).await;
        }
        if lost {
            sweep_streams(&cluster, &registry).await;
        }
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

/// Publish the session's events after `after` (up to at least `last`) to its
/// streams here, unless nobody here watches or the turn runs here (its worker
/// publishes them).
async fn catch_up(registry: &Registry, session_id: &str, after: u64, last: u64) {
    let Some(handle) = registry.watched(session_id) else {
        return;
    };
    if handle.runs_here() {
        return;
    }
    let store = &registry.runtime().store;
    let mut from = handle.published().max(after);
    while from < last {
        let page = match store.events_after(session_id, from, PAGE).await {
            Ok(page) => page,
            Err(err) => {
                tracing::warn!(%err, session_id, "cannot read events for live streams");
                return;
            }
        };
        let Some(end) = page.last().map(|e| e.seq) else {
            return;
        };
        for envelope in &page {
            handle.publish(envelope);
        }
        from = end;
    }
}

/// Streams whose session moved on without a notification reaching us get the
/// latest event; one past a gap sends them back to the store for the rest.
async fn sweep_streams(cluster: &Cluster, registry: &Registry) {
    let watched = registry.watched_sessions();
    if watched.is_empty() {
        return;
    }
    let ids: Vec<String> = watched.iter().map(|(id, _)| id.clone()).collect();
    let seqs = match cluster.store().last_seqs(&ids).await {
        Ok(seqs) => seqs,
        Err(err) => {
            tracing::warn!(%err, "cannot check live streams");
            return;
        }
    };
    let published: HashMap<String, u64> = watched.into_iter().collect();
    for (session, last) in seqs {
        if published.get(&session).is_some_and(|&p| p < last) {
            catch_up(registry, &session, last - 1, last).await;
        }
    }
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
    let by = data["by"].as_str().unwrap_or("user").to_string();
    let approvals = &registry.runtime().approvals;
    let delivered = match signal.kind.as_str() {
        "interrupt" => {
            let turn_id = data["turn_id"].as_str().unwrap_or_default();
            registry.interrupt_turn(&signal.target, turn_id)
        }
        "permission" => match serde_json::from_value::<Decision>(data["decision"].clone()) {
            Ok(decision) => approvals.answer(&signal.target, Answer::new(decision, by)),
            Err(_) => false,
        },
        "question" => {
            let answers = Some(data["answers"].clone()).filter(|a| !a.is_null());
            approvals.answer_question(&signal.target, QuestionAnswer { answers, by })
        }
        _ => false,
    };
    if !delivered {
        // Its turn ended meanwhile; the answer has nobody to go to.
        tracing::info!(kind = %signal.kind, target = %signal.target, "signal arrived after its turn");
    }
}
