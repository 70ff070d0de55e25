//! WAL checkpoints off the event writer. SQLite checkpoints inside the
//! commit that grows the WAL past `wal_autocheckpoint` pages: on the writer's
//! connection, while it holds the store's write lock, so every append queued
//! behind it waited for the copy and its `fsync`s. Here the writer nudges
//! after each commit and a PASSIVE checkpoint (it takes no write lock and
//! waits for no reader) runs on a reader's connection, at most every
//! [`EVERY`]. `wal_autocheckpoint` stays on at [`FALLBACK_PAGES`], so the WAL
//! stays bounded if this falls behind.

use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::SqlitePool;
use tokio::sync::Notify;

/// At most one checkpoint per this long while appends come.
const EVERY: Duration = Duration::from_millis(200);

/// The writer's own checkpoint threshold, in pages, when this one runs
/// (SQLite's default is 1 000): only reached if checkpoints here fall behind.
pub(in crate::sqlite) const FALLBACK_PAGES: u32 = 10_000;

/// Asks for a checkpoint soon; cheap to call after every commit.
#[derive(Clone, Default)]
pub(super) struct Nudge(Arc<Notify>);

impl Nudge {
    pub(super) fn commit_done(&self) {
        self.0.notify_one();
    }
}

/// Checkpoint `pool`'s database after nudges, until the pool closes. Never
/// returns while it is open.
pub(super) async fn run(pool: SqlitePool, nudge: Nudge) {
    loop {
        nudge.0.notified().await;
        // Commits in the meantime are covered by this one checkpoint.
        tokio::time::sleep(EVERY).await;
        if pool.is_closed() {
            break;
        }
        match sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_optional(&pool)
            .await
        {
            Ok(_) => {}
            Err(sqlx::Error::PoolClosed) => break,
            Err(err) => tracing::debug!(%err, "a WAL checkpoint failed; the next one retries"),
        }
    }
    std::future::pending::<()>().await;
}
