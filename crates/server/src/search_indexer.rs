//! On PostgreSQL a stored message is indexed for search after its append,
//! not inside it (the store's `search_index`): this task of `agentd serve`
//! indexes the queue every half second, in batches, until the server stops.
//! Every node runs one; each skips what another is indexing. A search
//! catches up first, so it never waits for this task to find a message.
//!
//! Indexing is background work: while this node's turns are storing events
//! it takes a few messages a tick ([`BUSY_BATCH`]), so that the database's
//! CPU goes to the appends clients are waiting to see (a long reply costs
//! milliseconds of `to_tsvector`, more than all of its turn's appends), and
//! the rest once they go quiet.

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
/// Messages a tick while the node's turns store events.
const BUSY_BATCH: u32 = 8;

pub(crate) fn start(store: Arc<dyn Store>, metrics: Arc<Metrics>, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(INTERVAL);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut activity = Activity::default();
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let busy = activity.moved(metrics.events.load(Ordering::Relaxed));
            let batch = if busy { BUSY_BATCH } else { BATCH };
            loop {
                match store.index_pending_search(batch).await {
                    // A whole batch: more may be queued.
                    Ok(taken) if taken == u64::from(batch) && !busy => {}
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

/// Whether a count (the node's stored events) moved since the last look.
#[derive(Debug, Default)]
struct Activity {
    seen: u64,
}

impl Activity {
    fn moved(&mut self, count: u64) -> bool {
        std::mem::replace(&mut self.seen, count) != count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_busy_while_its_event_count_moves() {
        let mut activity = Activity::default();
        assert!(!activity.moved(0), "an idle node");
        assert!(activity.moved(40), "events stored since the last look");
        assert!(activity.moved(90));
        assert!(!activity.moved(90), "the turns went quiet");
    }
}
