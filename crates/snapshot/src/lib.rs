//! Workspace checkpoints: cheap snapshots of a workspace into a content-addressed
//! blob store, and byte-exact restores (rewind, fork).
//!
//! A snapshot is a [`Manifest`]: every captured path with its kind, size, mode,
//! content hash (files) or target (symlinks), and the stat fingerprint (mtime ns,
//! ctime ns, inode, size) the next snapshot compares against: a file whose
//! fingerprint is unchanged reuses its previous hash and is not read. Contents go
//! into a [`BlobStore`] by sha256; only blobs the store lacks are written.
//!
//! # Policy
//!
//! - **Ignored dirs** (`.git`, `node_modules`, `target` by default): any path
//!   component with one of these names, whatever its type, is neither captured
//!   nor touched by a restore (nor is anything under it). They are listed in
//!   [`Manifest::skipped`] as `ignored`.
//! - **Size cap** (`max_file_bytes`, 10 MiB): a larger file is not captured; it
//!   is listed as `too_large`, and a restore leaves that path alone (it is not
//!   deleted, and a file there is not rewritten). A file captured while small is
//!   restored even if it has grown past the cap since: its bytes are stored.
//! - **File count** (`max_files`, 100 000 entries including dirs and symlinks):
//!   past it, the remaining paths (a dir standing for its subtree) are listed as
//!   `too_many_files` and left alone by a restore.
//! - **Symlinks** are recorded as symlinks (their target, verbatim, even if it
//!   points outside the workspace) and never followed, neither by the scan nor by
//!   a restore. The agent's commands may swap any directory or file for a link
//!   while either runs, so no path is trusted twice: both work by descriptors.
//!   The scan opens each directory `O_NOFOLLOW` beneath its parent's descriptor
//!   and looks at entries through it; files are read through real directories
//!   only (`RESOLVE_NO_SYMLINKS`), opened `O_PATH` and checked to be regular
//!   before they are read. A restore opens every parent of what it writes or
//!   deletes the same way (a link there is a conflict), creates files
//!   `O_EXCL | O_NOFOLLOW` in that directory and renames them into place, which
//!   replaces a symlink rather than writing through it, and changes modes
//!   through a descriptor of the entry itself.
//! - **Special files** (fifos, sockets, devices), unreadable paths and names (or
//!   link targets) that are not UTF-8 are listed in `skipped` with the reason;
//!   a restore does not delete them. Nothing ever opens one for reading.
//! - Timestamps are not restored; contents, kinds, modes (`0o7777`) and empty
//!   dirs are. A restore assumes the workspace's directories are writable by
//!   its owner.
//!
//! A file modified within a timestamp tick of a snapshot could later be
//! rewritten with the same size and the same stamps; such entries are stored
//! with a zero fingerprint so the next snapshot re-hashes them (git's "racily
//! clean" rule).

mod blobs;
mod encode;
mod fsutil;
mod manifest;
mod plan;
mod restore;
mod scan;
mod snapshot;

use std::path::Path;
use std::sync::OnceLock;

use agentd_sandbox::confined::{FsIdentity, Root};
use serde::{Deserialize, Serialize};

pub use blobs::{BlobStore, MemoryBlobs};
pub use encode::{decode_manifest, encode_manifest};
pub use manifest::{Entry, EntryKind, Fingerprint, Manifest, SkipReason, sha256_hex};

/// What a snapshot captures; see the module docs for the policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SnapshotPolicy {
    /// Names that exclude a path component (and everything under it).
    pub ignored_dirs: Vec<String>,
    /// Files larger than this are skipped.
    pub max_file_bytes: u64,
    /// At most this many entries (files, symlinks, dirs) are captured.
    pub max_files: usize,
}

impl Default for SnapshotPolicy {
    fn default() -> Self {
        Self {
            ignored_dirs: [".git", "node_modules", "target"]
                .map(String::from)
                .to_vec(),
            max_file_bytes: 10 << 20,
            max_files: 100_000,
        }
    }
}

/// What one snapshot cost and found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SnapshotStats {
    /// Regular files captured.
    pub files: usize,
    /// Files read and hashed (the rest reused the previous hash).
    pub hashed_files: usize,
    /// Blobs the store did not have, and their bytes.
    pub new_blobs: usize,
    pub new_bytes: u64,
    /// Size of `encode_manifest(&manifest, previous)`.
    pub manifest_bytes: u64,
    /// Paths added, removed, or changed in kind, content or mode since
    /// `previous` (every path when there is none), sorted.
    pub changed: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("blob store: {0}")]
    Blobs(String),
    #[error("{path}: blob {hash} is not in the blob store")]
    MissingBlob { path: String, hash: String },
    #[error("{path}: blob {hash} does not match its hash (corrupt store)")]
    CorruptBlob { path: String, hash: String },
    #[error("{path}: {reason}")]
    Conflict { path: String, reason: String },
    #[error("manifest: {0}")]
    Manifest(String),
    #[error("checkpoint task: {0}")]
    Task(String),
}

impl CheckpointError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        CheckpointError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Snapshotter {
    pub policy: SnapshotPolicy,
}

impl Snapshotter {
    pub fn new(policy: SnapshotPolicy) -> Self {
        Self { policy }
    }

    /// Scan `workspace`; files whose stat fingerprint equals `previous`'s entry
    /// reuse its hash (not read); others are hashed (sha256) and stored if
    /// missing. File I/O runs on blocking threads.
    pub async fn snapshot(
        &self,
        workspace: &Path,
        previous: Option<&Manifest>,
        blobs: &dyn BlobStore,
    ) -> Result<(Manifest, SnapshotStats), CheckpointError> {
        let path = workspace.to_path_buf();
        // Held open from here on: every file is reached beneath it.
        let root =
            blocking(move || Root::open(&path).map_err(|e| CheckpointError::io(&path, e))).await?;
        snapshot::snapshot(&self.policy, root, None, previous, blobs).await
    }

    /// [`Snapshotter::snapshot`] of the workspace the caller holds open, as
    /// `identity` when given: what that user cannot read is skipped
    /// (`unreadable`) rather than read by the server for it.
    pub async fn snapshot_as(
        &self,
        workspace: Root,
        identity: Option<FsIdentity>,
        previous: Option<&Manifest>,
        blobs: &dyn BlobStore,
    ) -> Result<(Manifest, SnapshotStats), CheckpointError> {
        snapshot::snapshot(&self.policy, workspace, identity, previous, blobs).await
    }

    /// Make `workspace` (created if missing) match `manifest` byte for byte and
    /// mode for mode, leaving ignored and skipped paths alone (module docs).
    /// Returns the paths changed, sorted.
    pub async fn restore(
        &self,
        workspace: &Path,
        manifest: &Manifest,
        blobs: &dyn BlobStore,
    ) -> Result<Vec<String>, CheckpointError> {
        self.restore_as(workspace, manifest, blobs, None).await
    }

    /// [`Snapshotter::restore`] done as `identity` (the workspace's user;
    /// `None`: the server's own), so what it creates belongs to that user and
    /// nothing that user could not write is written. The workspace itself is
    /// opened (and made, when missing) by the server.
    pub async fn restore_as(
        &self,
        workspace: &Path,
        manifest: &Manifest,
        blobs: &dyn BlobStore,
        identity: Option<FsIdentity>,
    ) -> Result<Vec<String>, CheckpointError> {
        let path = workspace.to_path_buf();
        let root = blocking(move || restore::open_root(&path)).await?;
        restore::restore(&self.policy, root, manifest, blobs, identity, false).await
    }

    /// [`Snapshotter::restore_as`] into the workspace the caller holds open.
    /// With `keep_others` (and an `identity`), only what that user owns is
    /// removed or replaced: in a directory people share, a file someone
    /// else made or changed since stays as it is.
    pub async fn restore_into(
        &self,
        workspace: Root,
        manifest: &Manifest,
        blobs: &dyn BlobStore,
        identity: Option<FsIdentity>,
        keep_others: bool,
    ) -> Result<Vec<String>, CheckpointError> {
        restore::restore(
            &self.policy,
            workspace,
            manifest,
            blobs,
            identity,
            keep_others,
        )
        .await
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, CheckpointError> + Send + 'static,
) -> Result<T, CheckpointError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CheckpointError::Task(e.to_string()))?
}

/// Bytes of file content held in memory at once while snapshotting or restoring.
const BATCH_BYTES: u64 = 64 << 20;

/// Split `items` into runs of at most about `limit` bytes (an item larger than
/// `limit` is a batch of its own).
fn batches<T>(items: Vec<T>, size: impl Fn(&T) -> u64, limit: u64) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    let mut batch = Vec::new();
    let mut bytes = 0u64;
    for item in items {
        let n = size(&item);
        if !batch.is_empty() && bytes.saturating_add(n) > limit {
            out.push(std::mem::take(&mut batch));
            bytes = 0;
        }
        bytes = bytes.saturating_add(n);
        batch.push(item);
    }
    if !batch.is_empty() {
        out.push(batch);
    }
    out
}

/// The cores to spread scans and reads over; read once, since std reads the
/// cgroup files (mountinfo included) on every call.
pub(crate) fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
