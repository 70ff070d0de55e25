//! Running a restore: removals and new dirs, then file contents fetched from the
//! blob store in bounded batches, then symlinks and modes. Every step works
//! beneath descriptors of the workspace's directories ([`Tree`]), on a blocking
//! thread that acts as the workspace's user when one is given, so what is
//! created belongs to it and nothing it could not write is written.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

use agentd_sandbox::confined::{FsIdentity, Root};
use futures::{StreamExt, TryStreamExt};

use super::fsutil::Tree;
use super::manifest::{Manifest, sha256_hex};
use super::plan::{Plan, plan};
use super::{BATCH_BYTES, BlobStore, CheckpointError, SnapshotPolicy, batches, blocking};

/// Blob reads in flight at once.
const FETCH_CONCURRENCY: usize = 16;

type FileWrite = (String, String, u32, u64);

pub(crate) async fn restore(
    policy: &SnapshotPolicy,
    root: Root,
    manifest: &Manifest,
    blobs: &dyn BlobStore,
    identity: Option<FsIdentity>,
    keep_others: bool,
) -> Result<Vec<String>, CheckpointError> {
    let workspace = root.path().to_path_buf();
    let keep_others = identity
        .filter(|_| keep_others)
        .map(|identity| identity.uid);
    let (policy, manifest) = (policy.clone(), manifest.clone());
    let (plan, mut tree) = blocking(move || {
        as_identity(identity, &workspace, || {
            let plan = plan(&root, &policy, &manifest, keep_others)?;
            let mut tree = Tree::new(root);
            prepare(&plan, &mut tree)?;
            Ok((plan, tree))
        })
    })
    .await?;
    let mut changed: BTreeSet<String> = plan.remove.into_iter().map(|(p, _)| p).collect();
    changed.extend(plan.mkdir);
    changed.extend(plan.files.iter().map(|f| f.0.clone()));
    changed.extend(plan.links.iter().map(|l| l.0.clone()));
    changed.extend(plan.chmod.iter().map(|c| c.0.clone()));

    for batch in batches(plan.files, |f| f.3, BATCH_BYTES) {
        let mut seen = HashSet::new();
        let hashes: Vec<String> = batch
            .iter()
            .filter(|f| seen.insert(f.1.as_str()))
            .map(|f| f.1.clone())
            .collect();
        let fetched: Vec<(String, Option<Vec<u8>>)> = futures::stream::iter(hashes)
            .map(|hash| async move { blobs.get(&hash).await.map(|bytes| (hash, bytes)) })
            .buffered(FETCH_CONCURRENCY)
            .try_collect()
            .await
            .map_err(CheckpointError::Blobs)?;
        let workspace = tree.path().to_path_buf();
        let write = move || write_batch(tree, batch, fetched);
        tree = blocking(move || as_identity(identity, &workspace, write)).await?;
    }
    let workspace = tree.path().to_path_buf();
    let finish = move || finish(tree, plan.links, plan.chmod);
    blocking(move || as_identity(identity, &workspace, finish)).await?;
    Ok(changed.into_iter().collect())
}

/// The workspace held open, made first when missing (by the server: the
/// workspace's own user may not write where it goes).
pub(crate) fn open_root(workspace: &Path) -> Result<Root, CheckpointError> {
    if std::fs::symlink_metadata(workspace).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    {
        std::fs::create_dir_all(workspace).map_err(|e| CheckpointError::io(workspace, e))?;
    }
    Root::open(workspace).map_err(|e| CheckpointError::io(workspace, e))
}

/// Run `work` on this thread as `identity`, if any.
fn as_identity<T>(
    identity: Option<FsIdentity>,
    workspace: &Path,
    work: impl FnOnce() -> Result<T, CheckpointError>,
) -> Result<T, CheckpointError> {
    match identity {
        Some(identity) => identity
            .run(work)
            .map_err(|e| CheckpointError::io(workspace, e))?,
        None => work(),
    }
}

/// Removals (children first), then new directories (parents first).
fn prepare(plan: &Plan, tree: &mut Tree) -> Result<(), CheckpointError> {
    for (path, is_dir) in &plan.remove {
        tree.remove(path, *is_dir)?;
    }
    for path in &plan.mkdir {
        tree.mkdir(path)?;
    }
    Ok(())
}

fn write_batch(
    mut tree: Tree,
    batch: Vec<FileWrite>,
    fetched: Vec<(String, Option<Vec<u8>>)>,
) -> Result<Tree, CheckpointError> {
    let contents: HashMap<String, Option<Vec<u8>>> = fetched.into_iter().collect();
    let mut verified: HashSet<&str> = HashSet::new();
    for (path, hash, mode, _) in &batch {
        let Some(Some(bytes)) = contents.get(hash) else {
            return Err(CheckpointError::MissingBlob {
                path: path.clone(),
                hash: hash.clone(),
            });
        };
        // The store is trusted with nothing: a wrong blob must not become a file.
        if !verified.contains(hash.as_str()) {
            if sha256_hex(bytes) != *hash {
                return Err(CheckpointError::CorruptBlob {
                    path: path.clone(),
                    hash: hash.clone(),
                });
            }
            verified.insert(hash);
        }
        tree.write_file(path, bytes, *mode)?;
    }
    Ok(tree)
}

fn finish(
    mut tree: Tree,
    links: Vec<(String, String)>,
    chmod: Vec<(String, u32)>,
) -> Result<(), CheckpointError> {
    for (path, target) in &links {
        tree.write_symlink(path, target)?;
    }
    for (path, mode) in &chmod {
        // A link is left alone: chmod would follow it.
        tree.chmod(path, *mode)?;
    }
    Ok(())
}
