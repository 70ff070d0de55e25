//! [`CheckpointStore`](crate::CheckpointStore): checkpoints and the
//! content-addressed blobs they refer to. Storing and looking blobs up is
//! each backend's own (`put_blobs_impl`, `stored_blobs_impl`,
//! `create_checkpoint_with_blobs_impl`): PostgreSQL binds arrays, SQLite
//! JSON and rows of values.

use crate::dialect::sql;
use crate::records::CHECKPOINT_COLUMNS;

sql!(
    /// Bound by `bind_checkpoint!`.
    pub(crate) INSERT_CHECKPOINT = "INSERT INTO checkpoints (", CHECKPOINT_COLUMNS,
     ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)");

sql!(pub(crate) LIST = "SELECT ", CHECKPOINT_COLUMNS,
     " FROM checkpoints WHERE session_id = $1 ORDER BY created_at, id");

sql!(
    /// The session's latest checkpoint (`which` = 0) and latest keyframe (one
    /// with no base, `which` = 1), in one query; `which` a 64-bit integer in
    /// both schemas.
    pub(crate) LATEST = "SELECT * FROM (SELECT ", CHECKPOINT_COLUMNS, ", CAST(0 AS BIGINT) AS which \
     FROM checkpoints WHERE session_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1) AS c0 \
     UNION ALL SELECT * FROM (SELECT ", CHECKPOINT_COLUMNS, ", CAST(1 AS BIGINT) AS which \
     FROM checkpoints WHERE session_id = $1 AND base_checkpoint_id IS NULL \
     ORDER BY created_at DESC, id DESC LIMIT 1) AS c1");

sql!(pub(crate) GET = "SELECT ", CHECKPOINT_COLUMNS, " FROM checkpoints WHERE id = $1");

pub(crate) const GET_BLOB: &str = "SELECT data FROM blobs WHERE hash = $1";

/// Binds a checkpoint row's columns in [`INSERT_CHECKPOINT`]'s order (`files`
/// and `stats` as JSON text).
macro_rules! bind_checkpoint {
    ($query:expr, $r:expr, $files:expr, $stats:expr) => {
        $query
            .bind(&$r.id)
            .bind(&$r.session_id)
            .bind(&$r.turn_id)
            .bind($r.message_position)
            .bind(&$r.manifest_hash)
            .bind(&$r.base_checkpoint_id)
            .bind($files)
            .bind($stats)
            .bind($crate::records::to_ms($r.created_at))
    };
}
pub(crate) use bind_checkpoint;

macro_rules! checkpoint_store {
    ($store:ty) => {
        const _: () = {
            use $crate::queries::checkpoints as q;
            use $crate::records::{
                checkpoint, db, fetch_all, fetch_optional, insert_error, ranked_checkpoint, to_json,
            };
            use $crate::{CheckpointRecord, LatestCheckpoints, StoreResult};

            #[async_trait::async_trait]
            impl $crate::CheckpointStore for $store {
                async fn put_blobs(&self, blobs: &[(String, Vec<u8>)]) -> StoreResult<()> {
                    self.put_blobs_impl(blobs).await
                }

                async fn missing_blobs(&self, hashes: &[String]) -> StoreResult<Vec<String>> {
                    let mut present = std::collections::HashSet::new();
                    for batch in hashes.chunks($crate::records::BLOB_LOOKUP_BATCH) {
                        present.extend(self.stored_blobs_impl(batch).await?);
                    }
                    let mut seen = std::collections::HashSet::new();
                    Ok(hashes
                        .iter()
                        .filter(|h| !present.contains(*h) && seen.insert(h.as_str()))
                        .cloned()
                        .collect())
                }

                async fn get_blob(&self, hash: &str) -> StoreResult<Option<Vec<u8>>> {
                    sqlx::query_scalar(q::GET_BLOB)
                        .bind(hash)
                        .fetch_optional(&self.pool)
                        .await
                        .map_err(db("reading a blob"))
                }

                async fn create_checkpoint(&self, r: &CheckpointRecord) -> StoreResult<()> {
                    let files = to_json(&r.files, "checkpoint files")?;
                    let stats = to_json(&r.stats, "checkpoint stats")?;
                    let _write = self.write_guard().await;
                    q::bind_checkpoint!(sqlx::query(q::INSERT_CHECKPOINT), r, files, stats)
                        .execute(self.writer())
                        .await
                        .map_err(insert_error("storing a checkpoint", &r.session_id, &r.id))?;
                    Ok(())
                }

                async fn create_checkpoint_with_blobs(
                    &self,
                    record: &CheckpointRecord,
                    blobs: &[(String, Vec<u8>)],
                ) -> StoreResult<()> {
                    self.create_checkpoint_with_blobs_impl(record, blobs).await
                }

                async fn list_checkpoints(
                    &self,
                    session_id: &str,
                ) -> StoreResult<Vec<CheckpointRecord>> {
                    let query = sqlx::query(q::LIST).bind(session_id);
                    fetch_all(&self.pool, query, "listing checkpoints", checkpoint).await
                }

                async fn latest_checkpoints(
                    &self,
                    session_id: &str,
                ) -> StoreResult<LatestCheckpoints> {
                    let context = "reading the latest checkpoints";
                    let here = self.read_here(q::LATEST, &[&session_id], context, |row| {
                        ranked_checkpoint(row)
                    });
                    let rows = match here {
                        Some(rows) => rows?,
                        None => {
                            let query = sqlx::query(q::LATEST).bind(session_id);
                            fetch_all(&self.pool, query, context, ranked_checkpoint).await?
                        }
                    };
                    let mut latest = LatestCheckpoints::default();
                    for (which, record) in rows {
                        if which == 0 {
                            latest.last = Some(record);
                        } else {
                            latest.keyframe = Some(record);
                        }
                    }
                    Ok(latest)
                }

                async fn get_checkpoint(&self, id: &str) -> StoreResult<Option<CheckpointRecord>> {
                    let query = sqlx::query(q::GET).bind(id);
                    fetch_optional(&self.pool, query, "reading a checkpoint", checkpoint).await
                }
            }
        };
    };
}
pub(crate) use checkpoint_store;
