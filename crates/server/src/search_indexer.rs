//! On PostgreSQL a stored message is indexed for search after its append,
//! not inside it (the store's `search_index`): this task of `agentd serve`
//! indexes the queue every half second, in batches, until the server stops.
//! Every node runs one; each skips what another is indexing. A search
//! catches up first, so it never waits for this task to find a message.

use std::sync::Arc;
use std::time::Duration;

use agentd_store::Store;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

const INTERVAL: Duration = Duration::from_millis(500);
/// Messages per statement.
const BATCH: u32 = 256;

pub(crate) fn start(store: Arc<dyn Store>, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(INTERVAL);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
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
