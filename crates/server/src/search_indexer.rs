//! On PostgreSQL a stored message is indexed for search after its append,
//! not inside it (the store's `search_index`): this task of `agentd serve`
//! indexes the queue every half second, in batches, until the server stops.
//! Every node runs one; each skips what another is indexing. A search
//! catches up first, so it never waits for this task to find a message.
//!
//! Indexing is background work: while this node's turns are storing events,
//! it waits (up to [`MAX_WAIT`]) so that the database's CPU goes to the
//! appends clients are waiting to see. A long reply costs milliseconds of
//! `to_tsvector`, more than all of its turn's appends.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use agentd_store::Store;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

const INTERVAL: Duration = Duration::from_millis(500);
/// Longest indexing waits for a node's turns to go quiet.
const MAX_WAIT: Duration = Duration::from_secs(5);
/// Messages per statement.
const BATCH: u32 = 256;

pub(crate) fn start(store: Arc<dyn Store>, metrics: Arc<Metrics>, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(INTERVAL);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut pacing = Pacing::new(MAX_WAIT);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            if !pacing.may_index(metrics.events.load(Ordering::Relaxed), Instant::now()) {
                continue;
            }
            loop {
                match store.index_pending_search(BATCH).await {
                    // A whole batch: more may be queued.
                    Ok(taken) if taken == u64::from(BATCH) => {}
                    Ok(_) => break,
                    Err(err) => {
                        tracing::warn!(%err, "indexing messages for search failed (tried again)");
                        break;
                    }
                }
            }
        }
    });
}

/// When to index: not while the node's stored-event count is moving, unless
/// indexing has waited `max_wait` already.
#[derive(Debug)]
struct Pacing {
    max_wait: Duration,
    events_seen: u64,
    waiting_since: Option<Instant>,
}

impl Pacing {
    fn new(max_wait: Duration) -> Self {
        Self {
            max_wait,
            events_seen: 0,
            waiting_since: None,
        }
    }

    fn may_index(&mut self, events: u64, now: Instant) -> bool {
        let busy = events != self.events_seen;
        self.events_seen = events;
        let waiting_since = *self.waiting_since.get_or_insert(now);
        if busy && now.duration_since(waiting_since) < self.max_wait {
            return false;
        }
        self.waiting_since = None;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexing_waits_while_events_are_stored_then_runs() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut pacing = Pacing::new(Duration::from_secs(5));
        assert!(pacing.may_index(0, at(0)), "an idle node indexes");
        assert!(
            !pacing.may_index(40, at(500)),
            "events stored since the last look"
        );
        assert!(!pacing.may_index(90, at(1000)));
        assert!(pacing.may_index(90, at(1500)), "the turns went quiet");
        assert!(pacing.may_index(90, at(2000)));
    }

    #[test]
    fn indexing_waits_no_longer_than_its_bound() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut pacing = Pacing::new(Duration::from_secs(5));
        let mut events = 0;
        let mut indexed_at = Vec::new();
        for ms in (500..=12_000).step_by(500) {
            events += 100;
            if pacing.may_index(events, at(ms)) {
                indexed_at.push(ms);
            }
        }
        assert_eq!(indexed_at, [5500, 11_000], "every 5 s under a steady load");
    }
}
