//! Checkpoints of session workspaces in the store: the engine's snapshot
//! core over the store's blobs, one checkpoint per turn that changes files,
//! and rewinding and forking from them.
//!
//! Manifests are stored as blobs: a full one (a keyframe) or a delta against
//! the latest keyframe, so a checkpoint of a large workspace where a few files
//! changed costs bytes in proportion to the change.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentd_engine::Checkpointer;
use agentd_engine::checkpoint::{
    BlobStore, Manifest, SnapshotPolicy, Snapshotter, decode_manifest, encode_manifest, sha256_hex,
};
use agentd_store::{CheckpointRecord, Store, StoreError};
use async_trait::async_trait;

/// A delta manifest larger than this is stored as a new keyframe instead.
const MAX_DELTA_BYTES: usize = 64 * 1024;

/// The store's blob table as the snapshot core's [`BlobStore`].
pub struct StoreBlobs(pub Arc<dyn Store>);

#[async_trait]
impl BlobStore for StoreBlobs {
    async fn missing(&self, hashes: &[String]) -> Result<Vec<String>, String> {
        self.0
            .missing_blobs(hashes)
            .await
            .map_err(|e| e.to_string())
    }

    async fn put(&self, blobs: &[(String, Vec<u8>)]) -> Result<(), String> {
        self.0.put_blobs(blobs).await.map_err(|e| e.to_string())
    }

    async fn get(&self, hash: &str) -> Result<Option<Vec<u8>>, String> {
        self.0.get_blob(hash).await.map_err(|e| e.to_string())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CheckpointFailure {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Checkpoint(#[from] agentd_engine::checkpoint::CheckpointError),
    #[error("checkpoint {0}: {1}")]
    Broken(String, String),
}

/// Loads a checkpoint's manifest (decoding a delta against its keyframe).
pub async fn load_manifest(
    store: &dyn Store,
    record: &CheckpointRecord,
) -> Result<Manifest, CheckpointFailure> {
    let blob = |hash: String| async move {
        store.get_blob(&hash).await?.ok_or_else(|| {
            CheckpointFailure::Broken(record.id.clone(), format!("blob {hash} is missing"))
        })
    };
    let base = match &record.base_checkpoint_id {
        Some(base_id) => {
            let base = store.get_checkpoint(base_id).await?.ok_or_else(|| {
                CheckpointFailure::Broken(record.id.clone(), format!("its base {base_id} is gone"))
            })?;
            Some(decode_manifest(
                &blob(base.manifest_hash.clone()).await?,
                None,
            )?)
        }
        None => None,
    };
    Ok(decode_manifest(
        &blob(record.manifest_hash.clone()).await?,
        base.as_ref(),
    )?)
}

/// Snapshot `workspace` against the session's latest checkpoint and store it
/// as a new checkpoint at `message_position`.
pub async fn create_checkpoint(
    store: &Arc<dyn Store>,
    session_id: &str,
    turn_id: Option<&str>,
    workspace: &Path,
    message_position: i64,
) -> Result<CheckpointRecord, CheckpointFailure> {
    let existing = store.list_checkpoints(session_id).await?;
    let keyframe = existing
        .iter()
        .rev()
        .find(|c| c.base_checkpoint_id.is_none());
    // The keyframe is read once: the latest checkpoint is usually it or a
    // delta against it.
    let base = match keyframe {
        Some(keyframe) => Some(load_manifest(store.as_ref(), keyframe).await?),
        None => None,
    };
    let previous = match (existing.last(), keyframe, &base) {
        (None, ..) => None,
        (Some(last), Some(keyframe), Some(base)) if last.id == keyframe.id => Some(base.clone()),
        (Some(last), Some(keyframe), Some(base))
            if last.base_checkpoint_id.as_deref() == Some(keyframe.id.as_str()) =>
        {
            let blob = store.get_blob(&last.manifest_hash).await?.ok_or_else(|| {
                CheckpointFailure::Broken(
                    last.id.clone(),
                    format!("blob {} is missing", last.manifest_hash),
                )
            })?;
            Some(decode_manifest(&blob, Some(base))?)
        }
        (Some(last), ..) => Some(load_manifest(store.as_ref(), last).await?),
    };
    let blobs = StoreBlobs(store.clone());
    let (manifest, stats) = snapshotter()
        .snapshot(workspace, previous.as_ref(), &blobs)
        .await?;
    let mut encoded = None;
    if let (Some(keyframe), Some(base)) = (keyframe, &base) {
        let delta = encode_manifest(&manifest, Some(base));
        if delta.len() <= MAX_DELTA_BYTES {
            encoded = Some((delta, Some(keyframe.id.clone())));
        }
    }
    let (bytes, base_checkpoint_id) =
        encoded.unwrap_or_else(|| (encode_manifest(&manifest, None), None));
    let manifest_hash = sha256_hex(&bytes);
    let manifest_bytes = bytes.len();
    store.put_blobs(&[(manifest_hash.clone(), bytes)]).await?;
    let record = CheckpointRecord {
        id: uuid::Uuid::now_v7().to_string(),
        session_id: session_id.to_string(),
        turn_id: turn_id.map(str::to_string),
        message_position,
        manifest_hash,
        base_checkpoint_id,
        files: stats.changed.clone(),
        stats: serde_json::json!({
            "files": stats.files,
            "hashed_files": stats.hashed_files,
            "new_blobs": stats.new_blobs,
            "new_bytes": stats.new_bytes,
            "manifest_bytes": manifest_bytes,
            "skipped": manifest.skipped.len(),
        }),
        created_at: chrono::Utc::now(),
    };
    store.create_checkpoint(&record).await?;
    Ok(record)
}

fn snapshotter() -> Snapshotter {
    Snapshotter::new(SnapshotPolicy::default())
}

/// Restores `workspace` to the checkpoint's files; returns the paths changed.
pub async fn restore_files(
    store: &Arc<dyn Store>,
    record: &CheckpointRecord,
    workspace: &Path,
) -> Result<Vec<String>, CheckpointFailure> {
    let manifest = load_manifest(store.as_ref(), record).await?;
    Ok(snapshotter()
        .restore(workspace, &manifest, &StoreBlobs(store.clone()))
        .await?)
}

/// Fills the empty `target` with `source` as `record` (or, without one, as it
/// is now), then copies the ignored folders (`.git`, …) as they are now.
pub async fn copy_workspace(
    store: &Arc<dyn Store>,
    source: &Path,
    target: &Path,
    record: Option<&CheckpointRecord>,
) -> Result<(), CheckpointFailure> {
    let blobs = StoreBlobs(store.clone());
    let manifest = match record {
        Some(record) => load_manifest(store.as_ref(), record).await?,
        None => snapshotter().snapshot(source, None, &blobs).await?.0,
    };
    snapshotter().restore(target, &manifest, &blobs).await?;
    let (source, target) = (source.to_path_buf(), target.to_path_buf());
    let ignored = SnapshotPolicy::default().ignored_dirs;
    tokio::task::spawn_blocking(move || copy_ignored(&source, &target, &ignored))
        .await
        .map_err(|e| CheckpointFailure::Broken("fork".into(), e.to_string()))?
        .map_err(|e| CheckpointFailure::Broken("fork".into(), e.to_string()))
}

/// Copies the top-level ignored folders of `source` into `target`, symlinks
/// as symlinks.
fn copy_ignored(source: &Path, target: &Path, ignored: &[String]) -> std::io::Result<()> {
    for name in ignored {
        let from = source.join(name);
        if std::fs::symlink_metadata(&from).is_ok_and(|m| m.is_dir()) {
            copy_tree(&from, &target.join(name))?;
        }
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &PathBuf) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_file() {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// The engine's checkpoint hook for one turn of one session.
pub struct SessionCheckpointer {
    pub store: Arc<dyn Store>,
    pub session_id: String,
    pub workspace: PathBuf,
}

#[async_trait]
impl Checkpointer for SessionCheckpointer {
    async fn checkpoint(&self, turn_id: &str) -> Result<Option<(String, Vec<String>)>, String> {
        // The turn's user message is stored by now; rewinding to this
        // checkpoint removes it and everything after.
        let position = self
            .store
            .turn_position(&self.session_id, turn_id)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("turn {turn_id} has no message in the transcript yet"))?;
        let record = create_checkpoint(
            &self.store,
            &self.session_id,
            Some(turn_id),
            &self.workspace,
            position,
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok(Some((record.id, record.files)))
    }
}
