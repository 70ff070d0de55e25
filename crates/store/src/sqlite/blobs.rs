//! Content-addressed blobs: file contents and manifests of checkpoints. Blob
//! writes are transactions of their own (with the checkpoint they belong to,
//! at most), never part of an event batch.

use std::fmt::Write;

use super::SqliteStore;
use super::writer::run_script;
use crate::dialect::sql;
use crate::prelude::*;
use crate::queries::checkpoints::{INSERT_CHECKPOINT, bind_checkpoint};
use crate::records::insert_error;
use crate::records::{db, execute, now, to_json, to_ms};
use crate::{CheckpointRecord, StoreError, StoreResult};

const INSERT_BLOBS: &str = "INSERT INTO blobs (hash, size, data, created_at) VALUES ";

/// A stored hash is not rewritten: content-addressed, same data.
const KEEP_STORED: &str = " ON CONFLICT (hash) DO NOTHING";

sql!(INSERT_BLOB = INSERT_BLOBS, "($1, $2, $3, $4)", KEEP_STORED);

/// Lookups of at most this many hashes run on the asking thread.
const LOOKUP_HERE_MAX: usize = 64;
const LOOKUP: &str = "SELECT hash FROM blobs WHERE hash IN (SELECT value FROM json_each($1))";

impl SqliteStore {
    pub(super) async fn put_blobs_impl(&self, blobs: &[(String, Vec<u8>)]) -> StoreResult<()> {
        let ctx = "storing blobs";
        if blobs.is_empty() {
            return Ok(());
        }
        let at = to_ms(now());
        let _write = self.write_guard().await;
        let mut tx = self.begin_write().await.map_err(db(ctx))?;
        for (hash, data) in blobs {
            let size = i64::try_from(data.len())
                .map_err(|_| StoreError::Database(format!("{ctx}: blob {hash} is too large")))?;
            let query = sqlx::query(INSERT_BLOB)
                .bind(hash)
                .bind(size)
                .bind(data.as_slice())
                .bind(at);
            execute(&mut *tx, query, ctx).await?;
        }
        tx.commit().await.map_err(db(ctx))
    }

    /// The blobs and the checkpoint in one round trip and one transaction;
    /// more blobs than one statement should bind go first, on their own.
    pub(super) async fn create_checkpoint_with_blobs_impl(
        &self,
        r: &CheckpointRecord,
        blobs: &[(String, Vec<u8>)],
    ) -> StoreResult<()> {
        const MAX_INLINE_BLOBS: usize = 64;
        if blobs.len() > MAX_INLINE_BLOBS {
            self.put_blobs_impl(blobs).await?;
            return self.create_checkpoint(r).await;
        }
        let ctx = "storing a checkpoint";
        let files = to_json(&r.files, "checkpoint files")?;
        let stats = to_json(&r.stats, "checkpoint stats")?;
        let at = to_ms(now());
        // The checkpoint's values are `$1`–`$9`, the blobs' come after.
        let mut sql = String::from("BEGIN IMMEDIATE;\n");
        if !blobs.is_empty() {
            sql.push_str(INSERT_BLOBS);
            for i in 0..blobs.len() {
                let n = 10 + 4 * i;
                let sep = if i > 0 { ", " } else { "" };
                let _ = write!(sql, "{sep}(${}, ${}, ${}, ${})", n, n + 1, n + 2, n + 3);
            }
            sql.push_str(KEEP_STORED);
            sql.push_str(";\n");
        }
        sql.push_str(INSERT_CHECKPOINT);
        sql.push_str(";\nCOMMIT;");
        let mut query = bind_checkpoint!(sqlx::query(&sql), r, files, stats);
        for (hash, data) in blobs {
            let size = i64::try_from(data.len())
                .map_err(|_| StoreError::Database(format!("{ctx}: blob {hash} is too large")))?;
            query = query.bind(hash).bind(size).bind(data.as_slice()).bind(at);
        }
        let _write = self.write_guard().await;
        run_script(&self.writes, query)
            .await
            .map_err(insert_error(ctx, &r.session_id, &r.id))?;
        Ok(())
    }

    /// The hashes of `batch` that are stored. One bound JSON array: SQLite
    /// limits bound parameters, not the length of one.
    pub(super) async fn stored_blobs_impl(&self, batch: &[String]) -> StoreResult<Vec<String>> {
        let (context, hashes) = ("looking blobs up", to_json(&batch, "blob hashes")?);
        let hash = |row: &rusqlite::Row<'_>| crate::records::Columns::text(row, "hash");
        // A workspace's first checkpoint asks about thousands: not on the
        // asking thread, which runs other turns too.
        if batch.len() <= LOOKUP_HERE_MAX
            && let Some(stored) = self.read_here(LOOKUP, &[&hashes], context, hash)
        {
            return stored;
        }
        sqlx::query_scalar(LOOKUP)
            .bind(hashes)
            .fetch_all(&self.pool)
            .await
            .map_err(db(context))
    }
}
