//! Checkpoints of session workspaces in the store: the engine's snapshot
//! core over the store's blobs, one checkpoint per turn that changes files,
//! and rewinding and forking from them.
//!
//! Manifests are stored as blobs: a full one (a keyframe) or a delta against
//! the latest keyframe, so a checkpoint of a large workspace where a few files
//! changed costs bytes in proportion to the change.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use agentd_engine::Checkpointer;
use agentd_sandbox::confined::{FsIdentity, Root};
use agentd_snapshot::{
    BlobStore, Manifest, SnapshotPolicy, Snapshotter, decode_manifest, encode_manifest, sha256_hex,
};
use agentd_store::{CheckpointRecord, LatestCheckpoints, Store, StoreError};
use async_trait::async_trait;

mod copy;

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

/// Blobs a checkpoint's snapshot puts, held back (up to a few, small) to be
/// stored with the checkpoint in one transaction; more go in as they come.
struct DeferredBlobs {
    store: StoreBlobs,
    held: Mutex<Vec<(String, Vec<u8>)>>,
}

/// What [`DeferredBlobs`] holds back at most.
const MAX_HELD_BLOBS: usize = 32;
const MAX_HELD_BYTES: usize = 1 << 20;

impl DeferredBlobs {
    fn held(&self) -> std::sync::MutexGuard<'_, Vec<(String, Vec<u8>)>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl BlobStore for DeferredBlobs {
    async fn missing(&self, hashes: &[String]) -> Result<Vec<String>, String> {
        self.store.missing(hashes).await
    }

    async fn put(&self, blobs: &[(String, Vec<u8>)]) -> Result<(), String> {
        {
            let mut held = self.held();
            let bytes: usize = held.iter().chain(blobs).map(|(_, data)| data.len()).sum();
            if held.len() + blobs.len() <= MAX_HELD_BLOBS && bytes <= MAX_HELD_BYTES {
                held.extend_from_slice(blobs);
                return Ok(());
            }
        }
        let earlier = std::mem::take(&mut *self.held());
        self.store.put(&earlier).await?;
        self.store.put(blobs).await
    }

    async fn get(&self, hash: &str) -> Result<Option<Vec<u8>>, String> {
        let held = self
            .held()
            .iter()
            .find(|(h, _)| h == hash)
            .map(|(_, d)| d.clone());
        match held {
            Some(data) => Ok(Some(data)),
            None => self.store.get(hash).await,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CheckpointFailure {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Checkpoint(#[from] agentd_snapshot::CheckpointError),
    #[error("checkpoint {0}: {1}")]
    Broken(String, String),
}

/// How many decoded manifests [`MANIFESTS`] keeps, the largest it keeps and
/// how many entries all of them may hold together (a few MB): a bigger
/// workspace's manifest is read back when needed.
const CACHED_MANIFESTS: usize = 32;
const MAX_CACHED_ENTRIES: usize = 20_000;
const MAX_TOTAL_ENTRIES: usize = 50_000;

/// (manifest blob hash, its base's blob hash): a delta decodes differently
/// against another base.
type ManifestKey = (String, Option<String>);

/// Decoded manifests, least recently used first. Blobs are content-addressed,
/// so an entry is never stale; a session's next checkpoint starts from the
/// manifest its last one made without reading and decoding it again.
static MANIFESTS: Mutex<VecDeque<(ManifestKey, Arc<Manifest>)>> = Mutex::new(VecDeque::new());

fn cached_manifest(key: &ManifestKey) -> Option<Arc<Manifest>> {
    let mut cache = MANIFESTS.lock().unwrap_or_else(PoisonError::into_inner);
    let index = cache.iter().position(|(k, _)| k == key)?;
    let entry = cache.remove(index)?;
    let manifest = entry.1.clone();
    cache.push_back(entry);
    Some(manifest)
}

fn remember_manifest(key: ManifestKey, manifest: Arc<Manifest>) {
    if manifest.entries.len() > MAX_CACHED_ENTRIES {
        return;
    }
    let mut cache = MANIFESTS.lock().unwrap_or_else(PoisonError::into_inner);
    cache.retain(|(k, _)| *k != key);
    let size = |cache: &VecDeque<(ManifestKey, Arc<Manifest>)>| {
        cache.iter().map(|(_, m)| m.entries.len()).sum::<usize>()
    };
    while cache.len() >= CACHED_MANIFESTS
        || (!cache.is_empty() && size(&cache) + manifest.entries.len() > MAX_TOTAL_ENTRIES)
    {
        cache.pop_front();
    }
    cache.push_back((key, manifest));
}

/// The manifest in blob `hash` (of checkpoint `owner`), decoded against
/// `base` (its blob hash and manifest) when it is a delta.
async fn decoded(
    store: &dyn Store,
    owner: &str,
    hash: &str,
    base: Option<(&str, &Manifest)>,
) -> Result<Arc<Manifest>, CheckpointFailure> {
    let key = (
        hash.to_string(),
        base.map(|(base_hash, _)| base_hash.to_string()),
    );
    if let Some(manifest) = cached_manifest(&key) {
        return Ok(manifest);
    }
    let bytes = store.get_blob(hash).await?.ok_or_else(|| {
        CheckpointFailure::Broken(owner.to_string(), format!("blob {hash} is missing"))
    })?;
    let manifest = Arc::new(decode_manifest(&bytes, base.map(|(_, base)| base))?);
    remember_manifest(key, manifest.clone());
    Ok(manifest)
}

/// Loads a checkpoint's manifest (decoding a delta against its keyframe).
pub async fn load_manifest(
    store: &dyn Store,
    record: &CheckpointRecord,
) -> Result<Arc<Manifest>, CheckpointFailure> {
    let base = match &record.base_checkpoint_id {
        Some(base_id) => Some(store.get_checkpoint(base_id).await?.ok_or_else(|| {
            CheckpointFailure::Broken(record.id.clone(), format!("its base {base_id} is gone"))
        })?),
        None => None,
    };
    decoded_record(store, record, base.as_ref()).await
}

/// `record`'s manifest, given its base record (`None` for a keyframe).
async fn decoded_record(
    store: &dyn Store,
    record: &CheckpointRecord,
    base: Option<&CheckpointRecord>,
) -> Result<Arc<Manifest>, CheckpointFailure> {
    let Some(base) = base else {
        return decoded(store, &record.id, &record.manifest_hash, None).await;
    };
    let base_manifest = decoded(store, &base.id, &base.manifest_hash, None).await?;
    decoded(
        store,
        &record.id,
        &record.manifest_hash,
        Some((&base.manifest_hash, &base_manifest)),
    )
    .await
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
    let latest = store.latest_checkpoints(session_id).await?;
    let root = open_root(workspace).await?;
    let reading = Reading {
        root,
        as_user: None,
    };
    checkpoint_on(
        store,
        session_id,
        turn_id,
        &reading,
        message_position,
        latest,
    )
    .await
}

/// [`create_checkpoint`] on the session's latest checkpoints as read before.
async fn checkpoint_on(
    store: &Arc<dyn Store>,
    session_id: &str,
    turn_id: Option<&str>,
    workspace: &Reading,
    message_position: i64,
    latest: LatestCheckpoints,
) -> Result<CheckpointRecord, CheckpointFailure> {
    let keyframe = latest.keyframe.as_ref();
    let base = match keyframe {
        Some(keyframe) => Some(decoded_record(store.as_ref(), keyframe, None).await?),
        None => None,
    };
    // The latest checkpoint is usually the keyframe or a delta against it:
    // its decoded manifest is reused rather than read again.
    let previous = match (latest.last.as_ref(), keyframe, &base) {
        (None, ..) => None,
        (Some(last), Some(keyframe), Some(base)) if last.id == keyframe.id => Some(base.clone()),
        (Some(last), Some(keyframe), Some(base))
            if last.base_checkpoint_id.as_deref() == Some(keyframe.id.as_str()) =>
        {
            let base = Some((keyframe.manifest_hash.as_str(), base.as_ref()));
            Some(decoded(store.as_ref(), &last.id, &last.manifest_hash, base).await?)
        }
        (Some(last), ..) => Some(load_manifest(store.as_ref(), last).await?),
    };
    let blobs = DeferredBlobs {
        store: StoreBlobs(store.clone()),
        held: Mutex::default(),
    };
    let (manifest, stats) = snapshotter()
        .snapshot_as(
            workspace.root.clone(),
            workspace.as_user,
            previous.as_deref(),
            &blobs,
        )
        .await?;
    let mut encoded = None;
    if let (Some(keyframe), Some(base)) = (keyframe, &base) {
        let delta = encode_manifest(&manifest, Some(base.as_ref()));
        if delta.len() <= MAX_DELTA_BYTES {
            encoded = Some((delta, Some(keyframe.id.clone())));
        }
    }
    let (bytes, base_checkpoint_id) =
        encoded.unwrap_or_else(|| (encode_manifest(&manifest, None), None));
    let manifest_hash = sha256_hex(&bytes);
    let manifest_bytes = bytes.len();
    let mut new_blobs = std::mem::take(&mut *blobs.held());
    new_blobs.push((manifest_hash.clone(), bytes));
    let skipped = manifest.skipped.len();
    let base_hash = base_checkpoint_id
        .as_ref()
        .and(keyframe)
        .map(|keyframe| keyframe.manifest_hash.clone());
    remember_manifest((manifest_hash.clone(), base_hash), Arc::new(manifest));
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
            "skipped": skipped,
        }),
        created_at: chrono::Utc::now(),
    };
    store
        .create_checkpoint_with_blobs(&record, &new_blobs)
        .await?;
    Ok(record)
}

fn snapshotter() -> Snapshotter {
    Snapshotter::new(SnapshotPolicy::default())
}

/// A workspace held open, and whom its files are read as (`None`: the
/// server; see [`crate::workspace_open::OpenWorkspace::reader`]).
#[derive(Debug, Clone)]
pub struct Reading {
    pub root: Root,
    pub as_user: Option<FsIdentity>,
}

async fn open_root(workspace: &Path) -> Result<Root, CheckpointFailure> {
    let path = workspace.to_path_buf();
    let opened = tokio::task::spawn_blocking(move || Root::open(&path))
        .await
        .map_err(std::io::Error::other)
        .and_then(|opened| opened);
    opened.map_err(|source| {
        let path = workspace.display().to_string();
        agentd_snapshot::CheckpointError::Io { path, source }.into()
    })
}

/// Restores `workspace` to the checkpoint's files, as `identity` (the
/// session owner's agent user) when given; returns the paths changed.
pub async fn restore_files(
    store: &Arc<dyn Store>,
    record: &CheckpointRecord,
    workspace: Root,
    identity: Option<FsIdentity>,
    keep_others: bool,
) -> Result<Vec<String>, CheckpointFailure> {
    let manifest = load_manifest(store.as_ref(), record).await?;
    let blobs = StoreBlobs(store.clone());
    Ok(snapshotter()
        .restore_into(workspace, &manifest, &blobs, identity, keep_others)
        .await?)
}

/// Fills the empty `target` with `source` as `record` (or, without one, as it
/// is now), then copies the ignored folders (`.git`, …) as they are now. All
/// of it goes by descriptors (the source's agent may be swapping paths for
/// links meanwhile), and what is written is written as `identity`, the
/// fork's owner's agent user, when given.
pub async fn copy_workspace(
    store: &Arc<dyn Store>,
    source: &Reading,
    target: &Path,
    record: Option<&CheckpointRecord>,
    identity: Option<FsIdentity>,
) -> Result<(), CheckpointFailure> {
    let blobs = StoreBlobs(store.clone());
    let manifest = match record {
        Some(record) => load_manifest(store.as_ref(), record).await?,
        None => {
            let (root, reader) = (source.root.clone(), source.as_user);
            Arc::new(
                snapshotter()
                    .snapshot_as(root, reader, None, &blobs)
                    .await?
                    .0,
            )
        }
    };
    snapshotter()
        .restore_as(target, &manifest, &blobs, identity)
        .await?;
    let (source, target) = (source.root.clone(), target.to_path_buf());
    let ignored = SnapshotPolicy::default().ignored_dirs;
    tokio::task::spawn_blocking(move || copy::copy_ignored(&source, &target, &ignored, identity))
        .await
        .map_err(|e| CheckpointFailure::Broken("fork".into(), e.to_string()))?
        .map_err(|e| CheckpointFailure::Broken("fork".into(), e.to_string()))
}

/// The engine's checkpoint hook for one turn of one session.
pub struct SessionCheckpointer {
    pub store: Arc<dyn Store>,
    pub session_id: String,
    pub workspace: Reading,
    /// The position the turn's user message takes, when the turn knows it
    /// (the last stored position at its start + 1; only the running turn
    /// appends to a session). Unset, it is read back from the store.
    pub turn_position: Arc<OnceLock<i64>>,
    /// The session's latest checkpoints, read while the turn starts; the
    /// turn's checkpoint (one a turn) takes them. Only the running turn adds
    /// checkpoints, and older bases would cost only a bigger delta.
    prefetched: Mutex<Option<tokio::task::JoinHandle<Result<LatestCheckpoints, StoreError>>>>,
}

impl SessionCheckpointer {
    /// Starts reading the session's latest checkpoints at once (on the
    /// current Tokio runtime; outside one, the checkpoint reads them), so the
    /// turn's first file-changing tool does not wait for the read.
    pub fn new(
        store: Arc<dyn Store>,
        session_id: String,
        workspace: Root,
        reader: Option<FsIdentity>,
        turn_position: Arc<OnceLock<i64>>,
    ) -> Self {
        let prefetched = tokio::runtime::Handle::try_current().ok().map(|runtime| {
            let (store, session_id) = (store.clone(), session_id.clone());
            runtime.spawn(async move { store.latest_checkpoints(&session_id).await })
        });
        Self {
            store,
            session_id,
            workspace: Reading {
                root: workspace,
                as_user: reader,
            },
            turn_position,
            prefetched: Mutex::new(prefetched),
        }
    }

    async fn latest(&self) -> Result<LatestCheckpoints, StoreError> {
        let prefetched = self
            .prefetched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(Ok(latest)) = match prefetched {
            Some(task) => task.await.ok(),
            None => None,
        } {
            return Ok(latest);
        }
        self.store.latest_checkpoints(&self.session_id).await
    }
}

impl Drop for SessionCheckpointer {
    fn drop(&mut self) {
        if let Some(task) = self
            .prefetched
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }
}

#[async_trait]
impl Checkpointer for SessionCheckpointer {
    async fn checkpoint(&self, turn_id: &str) -> Result<Option<(String, Vec<String>)>, String> {
        // Rewinding to this checkpoint removes the turn's user message and
        // everything after. Read back, it is stored by now (`needs_flush`).
        let position = match self.turn_position.get() {
            Some(position) => *position,
            None => self
                .store
                .turn_position(&self.session_id, turn_id)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("turn {turn_id} has no message in the transcript yet"))?,
        };
        let latest = self.latest().await.map_err(|e| e.to_string())?;
        let record = checkpoint_on(
            &self.store,
            &self.session_id,
            Some(turn_id),
            &self.workspace,
            position,
            latest,
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok(Some((record.id, record.files)))
    }

    fn needs_flush(&self) -> bool {
        self.turn_position.get().is_none()
    }
}

#[cfg(test)]
mod tests;
