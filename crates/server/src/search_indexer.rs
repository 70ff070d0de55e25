//! A stored message is indexed for search after its append, not inside it
//! (the stores' `search_index`): this task of `agentd serve`
//! indexes the queue every half second, in batches, until the server stops.
//! On PostgreSQL every node runs one; each skips what another is indexing. A search
//! catches up first, so it never waits for this task to find a message.
//!
//! Indexing is background work: while turns are storing events (this
//! node's, or in a cluster any node's) it waits, so that the database's CPU
//! goes to the appends clients are waiting to see (a long reply costs
//! milliseconds of PostgreSQL's `to_tsvector` or of SQLite's FTS writes,
//! more than all of its turn's appends, and on SQLite holds the one write
//! lock the appends wait for). Once they have stored events for a few
//! seconds it indexes a small batch a tick, growing while a backlog
//! remains, so a node that is never quiet still keeps up; once the turns go
//! quiet, the rest is indexed, until they start again.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agentd_store::{SEARCH_INDEX_BATCH as BATCH, Store};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

const INTERVAL: Duration = Duration::from_millis(500);
/// A busy tick's first batch after the grace, and how much it grows each
/// tick while a backlog remains.
const BUSY_STEP: u32 = 8;
/// Busy ticks (5 s) that index nothing: a burst of turns pays no indexing;
/// a node that is never quiet still keeps up after it.
const GRACE_TICKS: u32 = 10;

pub(crate) fn start(store: Arc<dyn Store>, metrics: Arc<Metrics>, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(INTERVAL);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // Its own appends and, in a cluster, the other nodes'.
        let events = || {
            let heard = metrics.events_heard.load(Ordering::Relaxed);
            metrics.events.load(Ordering::Relaxed).wrapping_add(heard)
        };
        let mut pacing = Pacing::default();
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Some(batch) = pacing.busy_batch(events()) {
                if batch == 0 {
                    continue;
                }
                if let Some(taken) = index(store.as_ref(), batch).await {
                    pacing.busy_took(batch, taken);
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

/// How much to index: nothing for the first [`GRACE_TICKS`] ticks the count
/// of events stored (by this node, or heard of from others) moves, then a
/// small batch a tick, growing while the batches come back full; everything
/// while the count does not move.
#[derive(Debug, Default)]
struct Pacing {
    events_seen: u64,
    /// Busy ticks in a row (counted up to the grace).
    busy_ticks: u32,
    /// Steps the batch has grown: one more per full batch, one less per
    /// batch that was not.
    steps: u32,
}

impl Pacing {
    /// This tick's batch while busy (the count moved since the last look;
    /// 0 during the grace); `None` when the node is quiet.
    fn busy_batch(&mut self, events: u64) -> Option<u32> {
        if std::mem::replace(&mut self.events_seen, events) == events {
            (self.busy_ticks, self.steps) = (0, 0);
            return None;
        }
        self.busy_ticks = (self.busy_ticks + 1).min(GRACE_TICKS + 1);
        if self.busy_ticks <= GRACE_TICKS {
            return Some(0);
        }
        Some(((1 + self.steps) * BUSY_STEP).min(BATCH))
    }

    /// A busy tick's `batch` took `taken`: full means more is queued.
    fn busy_took(&mut self, batch: u32, taken: u64) {
        // No step past the largest batch, so it starts shrinking as soon
        // as the backlog is gone.
        const MOST: u32 = BATCH / BUSY_STEP - 1;
        if batch == 0 {
            return;
        }
        self.steps = if taken >= u64::from(batch) {
            (self.steps + 1).min(MOST)
        } else {
            self.steps.saturating_sub(1)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_node_waits_then_indexes_a_small_batch_and_a_quiet_one_everything() {
        let mut pacing = Pacing::default();
        assert_eq!(pacing.busy_batch(0), None, "an idle node");
        let mut events = 0;
        for _ in 0..GRACE_TICKS {
            events += 40;
            assert_eq!(
                pacing.busy_batch(events),
                Some(0),
                "a burst's first seconds"
            );
        }
        assert_eq!(pacing.busy_batch(events + 40), Some(BUSY_STEP));
        assert_eq!(pacing.busy_batch(events + 40), None, "the turns went quiet");
        assert_eq!(
            pacing.busy_batch(events + 80),
            Some(0),
            "a new burst waits again"
        );
    }

    #[test]
    fn a_busy_batch_grows_once_a_backlog_lasts_and_shrinks_after() {
        let mut pacing = Pacing::default();
        let mut events = 0;
        let mut busy_tick = |pacing: &mut Pacing, queued: &mut u64| {
            events += 100;
            let batch = pacing.busy_batch(events).expect("busy");
            let taken = (*queued).min(u64::from(batch));
            *queued -= taken;
            pacing.busy_took(batch, taken);
            batch
        };
        // 100 messages queued a tick: nothing for the grace, then batches
        // growing until they keep up.
        let mut queued = 0;
        let mut batches = Vec::new();
        for _ in 0..80 {
            queued += 100;
            batches.push(busy_tick(&mut pacing, &mut queued));
        }
        assert_eq!(batches[..10], [0; 10]);
        assert_eq!(batches[10..13], [BUSY_STEP, 16, 24]);
        assert!(
            queued < 2000,
            "the backlog stopped growing: {queued} queued"
        );
        assert!(batches[79] <= 120, "no larger than it must be: {batches:?}");
        // Nothing more queued: back down to the first step.
        for _ in 0..40 {
            busy_tick(&mut pacing, &mut queued);
        }
        assert_eq!(queued, 0);
        assert_eq!(busy_tick(&mut pacing, &mut queued), BUSY_STEP);
        // Far more than the largest batch for a long time: once the backlog
        // is gone it shrinks a step a tick, not after as many ticks again.
        for _ in 0..300 {
            queued += 1000;
            assert!(busy_tick(&mut pacing, &mut queued) <= BATCH);
        }
        queued = 0;
        for _ in 0..(BATCH / BUSY_STEP) {
            busy_tick(&mut pacing, &mut queued);
        }
        assert_eq!(busy_tick(&mut pacing, &mut queued), BUSY_STEP);
    }
}
