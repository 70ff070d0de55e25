//! Content-addressed blobs: file contents and manifests of checkpoints. Blob
//! writes are transactions of their own, never part of an event batch.

use std::collections::HashSet;

use super::SqliteStore;
use super::util::{db, now, to_json, to_ms};
use crate::records::{BLOB_LOOKUP_BATCH, missing_in_order};
use crate::{StoreError, StoreResult};

impl SqliteStore {
    pub(super) async fn put_blobs_impl(&self, blobs: &[(String, Vec<u8>)]) -> StoreResult<()> {
        let ctx = "storing blobs";
        if blobs.is_empty() {
            return Ok(());
        }
        let at = to_ms(now());
        let _write = self.write_guard().await;
        let mut tx = self
            .writes
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db(ctx))?;
        for (hash, data) in blobs {
            let size = i64::try_from(data.len())
                .map_err(|_| StoreError::Database(format!("{ctx}: blob {hash} is too large")))?;
            // A stored hash is not rewritten: content-addressed, same data.
            sqlx::query(
                "INSERT INTO blobs (hash, size, data, created_at) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (hash) DO NOTHING",
            )
            .bind(hash)
            .bind(size)
            .bind(data.as_slice())
            .bind(at)
            .execute(&mut *tx)
            .await
            .map_err(db(ctx))?;
        }
        tx.commit().await.map_err(db(ctx))
    }

    /// One bound JSON array per batch: SQLite limits bound parameters, not
    /// the length of one.
    pub(super) async fn missing_blobs_impl(&self, hashes: &[String]) -> StoreResult<Vec<String>> {
        let mut present = HashSet::new();
        for batch in hashes.chunks(BLOB_LOOKUP_BATCH) {
            let found: Vec<String> = sqlx::query_scalar(
                "SELECT hash FROM blobs WHERE hash IN (SELECT value FROM json_each(?))",
            )
            .bind(to_json(&batch, "blob hashes")?)
            .fetch_all(&self.pool)
            .await
            .map_err(db("looking blobs up"))?;
            present.extend(found);
        }
        Ok(missing_in_order(hashes, &present))
    }

    pub(super) async fn get_blob_impl(&self, hash: &str) -> StoreResult<Option<Vec<u8>>> {
        sqlx::query_scalar("SELECT data FROM blobs WHERE hash = ?")
            .bind(hash)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("reading a blob"))
    }
}
