//! Running a restore: removals and new dirs, then file contents fetched from the
//! blob store in bounded batches, then symlinks and modes.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use futures::{StreamExt, TryStreamExt};

use super::fsutil::{SafeDirs, write_file, write_symlink};
use super::manifest::{Manifest, sha256_hex};
use super::plan::{Plan, plan};
use super::{BATCH_BYTES, BlobStore, CheckpointError, SnapshotPolicy, batches, blocking};

/// Blob reads in flight at once.
const FETCH_CONCURRENCY: usize = 16;

type FileWrite = (String, String, u32, u64);

pub(crate) async fn restore(
    policy: &SnapshotPolicy,
    workspace: &Path,
    manifest: &Manifest,
    blobs: &dyn BlobStore,
) -> Result<Vec<String>, CheckpointError> {
    let root = workspace.to_path_buf();
    let (policy, manifest) = (policy.clone(), manifest.clone());
    let (plan, mut safe) = blocking(move || {
        let plan = plan(&root, &policy, &manifest)?;
        let mut safe = SafeDirs::new(root);
        prepare(&plan, &mut safe)?;
        Ok((plan, safe))
    })
    .await?;
    let Plan {
        remove,
        mkdir,
        files,
        links,
        chmod,
    } = plan;
    let mut changed: BTreeSet<String> = remove.into_iter().map(|(p, _)| p).collect();
    changed.extend(mkdir);
    changed.extend(files.iter().map(|f| f.0.clone()));
    changed.extend(links.iter().map(|l| l.0.clone()));
    changed.extend(chmod.iter().map(|c| c.0.clone()));

    for batch in batches(files, |f| f.3, BATCH_BYTES) {
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
        safe = blocking(move || write_batch(safe, batch, fetched)).await?;
    }
    blocking(move || finish(safe, links, chmod)).await?;
    Ok(changed.into_iter().collect())
}

/// Removals (children first), then new directories (parents first).
fn prepare(plan: &Plan, safe: &mut SafeDirs) -> Result<(), CheckpointError> {
    for (path, is_dir) in &plan.remove {
        safe.check_parent(path)?;
        let abs = safe.abs(path);
        let result = if *is_dir {
            fs::remove_dir(&abs)
        } else {
            fs::remove_file(&abs)
        };
        match result {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(CheckpointError::io(&abs, e)),
        }
        if *is_dir {
            safe.forget(path);
        }
    }
    for path in &plan.mkdir {
        safe.check_parent(path)?;
        let abs = safe.abs(path);
        match fs::create_dir(&abs) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && is_real_dir(&abs) => {}
            Err(e) => return Err(CheckpointError::io(&abs, e)),
        }
    }
    Ok(())
}

fn write_batch(
    mut safe: SafeDirs,
    batch: Vec<FileWrite>,
    fetched: Vec<(String, Option<Vec<u8>>)>,
) -> Result<SafeDirs, CheckpointError> {
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
        safe.check_parent(path)?;
        let abs = safe.abs(path);
        write_file(&abs, bytes, *mode).map_err(|e| CheckpointError::io(&abs, e))?;
    }
    Ok(safe)
}

fn finish(
    mut safe: SafeDirs,
    links: Vec<(String, String)>,
    chmod: Vec<(String, u32)>,
) -> Result<(), CheckpointError> {
    for (path, target) in &links {
        safe.check_parent(path)?;
        let abs = safe.abs(path);
        write_symlink(&abs, target).map_err(|e| CheckpointError::io(&abs, e))?;
    }
    for (path, mode) in &chmod {
        safe.check_parent(path)?;
        let abs = safe.abs(path);
        // chmod follows symlinks: only ever apply it to what lstat says is not one.
        let meta = fs::symlink_metadata(&abs).map_err(|e| CheckpointError::io(&abs, e))?;
        if meta.file_type().is_symlink() {
            continue;
        }
        fs::set_permissions(&abs, fs::Permissions::from_mode(*mode))
            .map_err(|e| CheckpointError::io(&abs, e))?;
    }
    Ok(())
}

fn is_real_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_dir())
}
