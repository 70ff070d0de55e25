//! On PostgreSQL a stored message is indexed for search after its append,
//! not inside it (the store's `search_index`): this task of `agentd serve`
//! indexes the queue every half second, in batches, until the server stops.
//! Every node runs one; each skips what another is indexing. A search
//! catches up first, so it never waits for this task to find a message.
//!
//! Indexing is background work: while this node's turns are storing events
//! it takes a small batch a tick, so that the database's CPU goes to the
//! appends clients are waiting to see (a long reply costs milliseconds of
//! `to_tsvector`, more than all of its turn's appends). The batch grows while
//! a backlog remains, so a node that is never quiet still keeps up; once the
//! turns go quiet, the rest is indexed, until they start again.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agentd_store::Store;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

const INTERVAL: Duration = Duration::from_millis(500);
/// Messages per statement.
const BATCH: u32 = 256;
/// A busy tick's first batch, and how much each next one grows while a
/// backlog remains.
const BUSY_STEP: u32 = 8;

pub(crate) fn start(store: Arc<dyn Store>, metrics: Arc<Metrics>, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(INTERVAL);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let events = || metrics.events.load(Ordering::Relaxed);
        let mut pacing = Pacing::default();
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Some(batch) = pacing.busy_batch(events()) {
                if let Some(taken) = index(store.as_ref(), batch).await {
                    pacing.busy_took(taken);
                }
                continue;
            }
            // Quiet: everything queued, unless the turns start again.
            while index(store.as_ref(), BATCH).await == Some(u64::from(BATCH)) {
                if stop.is_cancelled() || pacing.busy_batch(events()).is_some() {
                    break;
                }
            }
        }
    });
}

/// Up to `batch` queued messages indexed: how many were taken (`None`: the
/// database refused; tried again next tick).
async fn index(store: &dyn Store, batch: u32) -> Option<u64> {
    match store.index_pending_search(batch).await {
        Ok(taken) => Some(taken),
        Err(err) => {
            tracing::warn!(%err, "indexing messages for search failed (tried again)");
            None
        }
    }
}

/// How much to index: a growing batch a tick while the node's stored-event
/// count moves, everything while it does not.
#[derive(Debug)]
struct Pacing {
    events_seen: u64,
    batch: u32,
}

impl Default for Pacing {
    fn default() -> Self {
        Self {
            events_seen: 0,
            batch: BUSY_STEP,
        }
    }
}

impl Pacing {
    /// This tick's batch while busy (the count moved since the last look);
    /// `None` when the node is quiet.
    fn busy_batch(&mut self, events: u64) -> Option<u32> {
        if std::mem::replace(&mut self.events_seen, events) == events {
            self.batch = BUSY_STEP;
            return None;
        }
        Some(self.batch)
    }

    /// A busy tick took `taken`: a full batch means more is queued, so the
    /// next is larger; otherwise it shrinks back.
    fn busy_took(&mut self, taken: u64) {
        self.batch = if taken >= u64::from(self.batch) {
            (self.batch + BUSY_STEP).min(BATCH)
        } else {
            self.batch.saturating_sub(BUSY_STEP).max(BUSY_STEP)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_node_indexes_a_small_batch_and_a_quiet_one_everything() {
        let mut pacing = Pacing::default();
        assert_eq!(pacing.busy_batch(0), None, "an idle node");
        assert_eq!(
            pacing.busy_batch(40),
            Some(BUSY_STEP),
            "events stored since the last look"
        );
        assert_eq!(pacing.busy_batch(90), Some(BUSY_STEP));
        assert_eq!(pacing.busy_batch(90), None, "the turns went quiet");
    }

    #[test]
    fn a_busy_batch_grows_while_a_backlog_remains_and_shrinks_after() {
        let mut pacing = Pacing::default();
        let mut events = 0;
        let mut busy_tick = |pacing: &mut Pacing, queued: &mut u64| {
            events += 100;
            let batch = pacing.busy_batch(events).expect("busy");
            let taken = (*queued).min(u64::from(batch));
            *queued -= taken;
            pacing.busy_took(taken);
            batch
        };
        // 100 messages queued a tick: the batch grows until it keeps up.
        let mut queued = 0;
        let mut batches = Vec::new();
        for _ in 0..60 {
            queued += 100;
            batches.push(busy_tick(&mut pacing, &mut queued));
        }
        assert_eq!(&batches[..4], [8, 16, 24, 32]);
        assert!(queued < 800, "the backlog stopped growing: {queued} queued");
        assert!(batches[59] <= 112, "no larger than it must be: {batches:?}");
        // Nothing more queued: back down to the first step.
        for _ in 0..40 {
            busy_tick(&mut pacing, &mut queued);
        }
        assert_eq!(queued, 0);
        assert_eq!(pacing.batch, BUSY_STEP);
    }
}
