//! Search indexing after the append (migration 0015): a stored message is
//! queued in `search_pending` by its insert's trigger, and indexed here in
//! batches: by `agentd serve`'s indexer task, and by each search before it
//! runs, so a search finds every message stored before it began.

use super::SqliteStore;
use super::writer::run_script;
use crate::dialect::sql;
use crate::records::db;
use crate::search::CATCH_UP_BATCHES;
use crate::{SEARCH_INDEX_BATCH, StoreResult};

/// The first `?1` queued messages' text into `search_docs` (and through its
/// trigger the FTS index). A message without text gets no row: its NULL body
/// is skipped by OR IGNORE, as before the queue. Nor does one whose content
/// is not the JSON agentd writes (a block list): its extraction would fail
/// the batch, and with it every search after, as the queue never moved.
const INDEX_PICKED: &str = "INSERT OR IGNORE INTO search_docs (session_id, message_id, body) \
     SELECT t.session_id, t.id, t.body \
     FROM (SELECT message_id FROM search_pending ORDER BY message_id LIMIT ?1) AS p \
     JOIN messages AS m ON m.id = p.message_id \
     JOIN message_search_text AS t ON t.id = p.message_id \
     WHERE json_valid(m.content) AND json_type(m.content, '$.content') = 'array' \
       AND NOT EXISTS (SELECT 1 FROM json_each(m.content, '$.content') AS b \
                       WHERE b.type <> 'object')";

/// The same messages off the queue: in the same write transaction, so the
/// same rows. One row back per message picked.
const UNQUEUE_PICKED: &str = "DELETE FROM search_pending WHERE message_id IN \
     (SELECT message_id FROM search_pending ORDER BY message_id LIMIT ?1) \
     RETURNING message_id";

sql!(
    /// One chunk in one round trip to the connection's thread (a begin, two
    /// statements and a commit sent one by one were four).
    INDEX_CHUNK = "BEGIN IMMEDIATE; ", INDEX_PICKED, "; ", UNQUEUE_PICKED, "; COMMIT;");

/// Messages indexed in one write transaction. A batch is taken a chunk at a
/// time so that an event commit (which queues for the same write lock) waits
/// for one chunk, a few milliseconds, not a whole batch (~20 ms for 256
/// replies of a few KiB).
const CHUNK: u32 = 32;

impl SqliteStore {
    pub(crate) async fn index_pending_search_impl(&self, limit: u32) -> StoreResult<u64> {
        let mut taken = 0;
        while taken < u64::from(limit) {
            let chunk = CHUNK.min(limit - taken as u32);
            let picked = self.index_chunk(chunk).await?;
            taken += picked;
            if picked < u64::from(chunk) {
                break;
            }
        }
        Ok(taken)
    }

    /// One chunk: [`INDEX_CHUNK`].
    async fn index_chunk(&self, limit: u32) -> StoreResult<u64> {
        const CTX: &str = "indexing messages for search";
        let _write = self.write_guard().await;
        let picked = run_script(
            self.writer(),
            sqlx::query(INDEX_CHUNK).bind(i64::from(limit)),
        )
        .await
        .map_err(db(CTX))?;
        Ok(picked.len() as u64)
    }

    /// Index what is queued before a search reads `search_docs`. The look at
    /// the queue is a read: a search with nothing queued takes no write lock.
    pub(crate) async fn catch_up_search(&self) -> StoreResult<()> {
        const CTX: &str = "looking for messages to index";
        let queued: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM search_pending)")
            .fetch_one(&self.pool)
            .await
            .map_err(db(CTX))?;
        if !queued {
            return Ok(());
        }
        for _ in 0..CATCH_UP_BATCHES {
            if self.index_pending_search_impl(SEARCH_INDEX_BATCH).await?
                < u64::from(SEARCH_INDEX_BATCH)
            {
                break;
            }
        }
        Ok(())
    }
}
