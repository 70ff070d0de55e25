//! Search indexing after the append (migration 0015): a stored message is
//! queued in `search_pending` by its insert's trigger, and indexed here in
//! batches: by `agentd serve`'s indexer task, which skips what another node
//! is indexing, and by each search before it runs, which waits for that, so
//! a search finds every message stored before it began.

use super::PostgresStore;
use crate::records::{Columns, db};
use crate::search::CATCH_UP_BATCHES;
use crate::{SEARCH_INDEX_BATCH, StoreResult};

/// Take up to `$1` queued messages (waiting for locked rows or `SKIP
/// LOCKED`) and index their text. Each message row is locked before its
/// queue row, as a deletion of messages locks them (then cascades to the
/// queue): locked the other way round, the index's foreign-key check on a
/// message being deleted would deadlock with the deletion. The picked
/// messages are read one index lookup each (the `LATERAL … LIMIT 1`): joined,
/// a backlog of thousands made PostgreSQL hash-join a scan of every message.
macro_rules! index_pending_sql {
    ($wait:literal) => {
        concat!(
            "WITH picked AS (DELETE FROM search_pending WHERE message_id IN (\
               SELECT p.message_id FROM search_pending AS p \
               JOIN messages AS m ON m.id = p.message_id ORDER BY p.message_id LIMIT $1 \
               FOR KEY SHARE OF m ",
            $wait,
            " FOR UPDATE OF p ",
            $wait,
            ") RETURNING message_id), \
             indexed AS (INSERT INTO search_docs (session_id, message_id, body) \
               SELECT m.session_id, m.id, t.body FROM picked AS p \
               CROSS JOIN LATERAL (SELECT session_id, id, content FROM messages \
                 WHERE id = p.message_id LIMIT 1) AS m \
               CROSS JOIN LATERAL (SELECT agentd_message_search_text(m.content) AS body OFFSET 0) AS t \
               WHERE t.body IS NOT NULL ON CONFLICT DO NOTHING RETURNING 1) \
             SELECT (SELECT count(*) FROM picked) AS picked, \
               (SELECT count(*) FROM indexed) AS indexed"
        )
    };
}

/// For the indexer task: what another node is indexing is left to it.
const INDEX_PENDING_SKIPPING: &str = index_pending_sql!("SKIP LOCKED");
/// For a search: what is being indexed elsewhere is waited for (then gone
/// from the queue), so it is in `search_docs` when the search reads it.
const INDEX_PENDING_WAITING: &str = index_pending_sql!("");

impl PostgresStore {
    pub(crate) async fn index_pending_search_impl(&self, limit: u32) -> StoreResult<u64> {
        self.index_pending(INDEX_PENDING_SKIPPING, limit).await
    }

    /// Index what is queued before a search reads `search_docs`.
    pub(crate) async fn catch_up_search(&self) -> StoreResult<()> {
        for _ in 0..CATCH_UP_BATCHES {
            if self
                .index_pending(INDEX_PENDING_WAITING, SEARCH_INDEX_BATCH)
                .await?
                < u64::from(SEARCH_INDEX_BATCH)
            {
                break;
            }
        }
        Ok(())
    }

    async fn index_pending(&self, sql: &'static str, limit: u32) -> StoreResult<u64> {
        let row = sqlx::query(sql)
            .bind(i64::from(limit))
            .fetch_one(&self.pool)
            .await
            .map_err(db("indexing messages for search"))?;
        row.count("picked")
    }
}
