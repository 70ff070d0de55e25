//! Content-addressed blobs: file contents and manifests of checkpoints.

use super::PostgresStore;
use crate::prelude::*;
use crate::records::{db, execute, now, to_ms};
use crate::{CheckpointRecord, StoreResult};

/// Rows per INSERT statement, and bytes: one statement carries its blobs as
/// two array parameters, which must stay well below PostgreSQL's 1 GiB
/// message limit.
const INSERT_BATCH: usize = 1_000;
const INSERT_BATCH_BYTES: usize = 32 * 1024 * 1024;

impl PostgresStore {
    pub(super) async fn put_blobs_impl(&self, blobs: &[(String, Vec<u8>)]) -> StoreResult<()> {
        let ctx = "storing blobs";
        if blobs.is_empty() {
            return Ok(());
        }
        let at = to_ms(now());
        let mut tx = self.pool.begin().await.map_err(db(ctx))?;
        let mut rest = blobs;
        while !rest.is_empty() {
            // At least one blob per statement, however large.
            let mut bytes = 0;
            let n = rest
                .iter()
                .take(INSERT_BATCH)
                .take_while(|(_, data)| {
                    bytes += data.len();
                    bytes <= INSERT_BATCH_BYTES
                })
                .count()
                .max(1);
            let (batch, tail) = rest.split_at(n);
            rest = tail;
            let hashes: Vec<&str> = batch.iter().map(|(h, _)| h.as_str()).collect();
            let data: Vec<&[u8]> = batch.iter().map(|(_, d)| d.as_slice()).collect();
            // A stored hash is not rewritten: content-addressed, same data.
            // DO NOTHING also skips a hash given twice in one batch.
            let query = sqlx::query(
                "INSERT INTO blobs (hash, size, data, created_at) \
                 SELECT v.hash, length(v.data), v.data, $3 \
                 FROM unnest($1::text[], $2::bytea[]) AS v(hash, data) \
                 ON CONFLICT (hash) DO NOTHING",
            )
            .bind(&hashes)
            .bind(&data)
            .bind(at);
            execute(&mut *tx, query, ctx).await?;
        }
        tx.commit().await.map_err(db(ctx))
    }

    /// The hashes of `batch` that are stored.
    pub(super) async fn stored_blobs_impl(&self, batch: &[String]) -> StoreResult<Vec<String>> {
        sqlx::query_scalar("SELECT hash FROM blobs WHERE hash = ANY($1::text[])")
            .bind(batch)
            .fetch_all(&self.pool)
            .await
            .map_err(db("looking blobs up"))
    }

    /// No round trip to gain by sending them together: the blobs, then the
    /// checkpoint.
    pub(super) async fn create_checkpoint_with_blobs_impl(
        &self,
        record: &CheckpointRecord,
        blobs: &[(String, Vec<u8>)],
    ) -> StoreResult<()> {
        self.put_blobs_impl(blobs).await?;
        self.create_checkpoint(record).await
    }
}
