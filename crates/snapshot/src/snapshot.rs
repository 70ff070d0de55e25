//! Taking a snapshot: scan, reuse hashes of files whose stat is unchanged, hash
//! and store the rest in bounded batches.

use std::collections::{BTreeMap, HashSet};
use std::time::{SystemTime, UNIX_EPOCH};

use agentd_sandbox::confined::{FsIdentity, Root};

use super::fsutil::{Content, read_file};
use super::manifest::{Entry, EntryKind, Fingerprint, Manifest, SkipReason};
use super::{
    BATCH_BYTES, BlobStore, CheckpointError, SnapshotPolicy, SnapshotStats, batches, blocking,
    encode_manifest,
};

/// The snapshot of the workspace held open as `root`, every file looked at
/// and read as `identity` when given (on one thread: the switch is per thread).
pub(crate) async fn snapshot(
    policy: &SnapshotPolicy,
    root: Root,
    identity: Option<FsIdentity>,
    previous: Option<&Manifest>,
    blobs: &dyn BlobStore,
) -> Result<(Manifest, SnapshotStats), CheckpointError> {
    let now = now_ns();
    let scan_policy = policy.clone();
    let (root, mut manifest) = blocking(move || {
        let manifest = match identity {
            None => super::scan::scan(&root, &scan_policy)?,
            Some(identity) => identity
                .run(|| super::scan::scan_on(&root, &scan_policy, 1))
                .map_err(|e| CheckpointError::io(root.path(), e))??,
        };
        Ok((root, manifest))
    })
    .await?;

    let to_hash = reuse_hashes(&mut manifest, previous);

    let mut stats = SnapshotStats::default();
    for batch in batches(to_hash, |f| f.1, BATCH_BYTES) {
        let (read_root, max) = (root.clone(), policy.max_file_bytes);
        let read = blocking(move || match identity {
            None => Ok(read_batch(&read_root, batch, max, super::cores().min(8))),
            Some(identity) => identity
                .run(|| read_batch(&read_root, batch, max, 1))
                .map_err(|e| CheckpointError::io(read_root.path(), e)),
        })
        .await?;
        let mut fresh: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        for (_, content) in &read {
            if let Content::Read { hash, .. } = content
                && seen.insert(hash.as_str())
            {
                fresh.push(hash.clone());
            }
        }
        let mut missing: HashSet<String> = if fresh.is_empty() {
            HashSet::new()
        } else {
            blobs
                .missing(&fresh)
                .await
                .map_err(CheckpointError::Blobs)?
                .into_iter()
                .collect()
        };
        let mut put = Vec::new();
        for (path, content) in read {
            let Some(entry) = manifest.entries.get_mut(&path) else {
                continue;
            };
            let skip = match content {
                Content::Read { hash, bytes } => {
                    stats.hashed_files += 1;
                    entry.size = bytes.len() as u64;
                    if missing.remove(&hash) {
                        stats.new_blobs += 1;
                        stats.new_bytes += bytes.len() as u64;
                        put.push((hash.clone(), bytes));
                    }
                    entry.kind = EntryKind::File { hash };
                    continue;
                }
                Content::TooLarge(size) => Some(SkipReason::TooLarge { size }),
                // Changed kind or vanished since the scan: the next snapshot sees it as it is.
                Content::NotAFile | Content::Gone => None,
                Content::Unreadable(e) => Some(super::scan::unreadable(&e)),
            };
            manifest.entries.remove(&path);
            if let Some(reason) = skip {
                manifest.skipped.insert(path, reason);
            }
        }
        if !put.is_empty() {
            blobs.put(&put).await.map_err(CheckpointError::Blobs)?;
        }
    }

    for entry in manifest.entries.values_mut() {
        if racy(&entry.stat, now) {
            entry.stat = Fingerprint::default();
        }
    }
    stats.files = manifest.file_count();
    stats.changed = changed(previous.map(|p| &p.entries), &manifest.entries);
    match previous {
        Some(base) => stats.manifest_bytes = encode_manifest(&manifest, Some(base)).len() as u64,
        None => {
            // A full encoding of a big tree takes a while: off the async thread.
            let (m, len) = blocking(move || {
                let len = encode_manifest(&manifest, None).len() as u64;
                Ok((manifest, len))
            })
            .await?;
            manifest = m;
            stats.manifest_bytes = len;
        }
    }
    Ok((manifest, stats))
}

/// Give each file whose stat is unchanged since `previous` its known hash; the
/// rest (path, size) are to be read and hashed.
fn reuse_hashes(manifest: &mut Manifest, previous: Option<&Manifest>) -> Vec<(String, u64)> {
    let mut to_hash: Vec<(String, u64)> = Vec::new();
    for (path, entry) in manifest.entries.iter_mut() {
        let EntryKind::File { hash } = &mut entry.kind else {
            continue;
        };
        match previous.and_then(|p| p.entries.get(path)) {
            Some(Entry {
                kind: EntryKind::File { hash: known },
                stat,
                ..
            }) if !stat.is_zero() && *stat == entry.stat => hash.clone_from(known),
            _ => to_hash.push((path.clone(), entry.size)),
        }
    }
    to_hash
}

/// Read and hash a batch, split over the available cores (reads are mostly
/// syscalls and sha256, both parallel).
fn read_batch(
    root: &Root,
    batch: Vec<(String, u64)>,
    max: u64,
    threads: usize,
) -> Vec<(String, Content)> {
    let read_one =
        |(path, size): &(String, u64)| (path.clone(), read_file(root.fd(), path, max, *size));
    if threads == 1 || batch.len() < 64 {
        return batch.iter().map(read_one).collect();
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = batch
            .chunks(batch.len().div_ceil(threads))
            .map(|part| s.spawn(move || part.iter().map(read_one).collect::<Vec<_>>()))
            .collect();
        let joined = handles.into_iter().map(|handle| handle.join());
        joined
            .flat_map(|part| part.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    })
}

/// Whether a later edit of the same size could leave this stat unchanged: the
/// file changed within a timestamp tick of the scan (git's "racily clean").
/// Such entries lose their fingerprint, so the next snapshot re-hashes them.
fn racy(stat: &Fingerprint, now_ns: i64) -> bool {
    if stat.is_zero() {
        return false;
    }
    let newest = stat.mtime_ns.max(stat.ctime_ns);
    // Whole-second stamps suggest a coarse filesystem (ext3, FAT, some network
    // mounts): allow two seconds. Otherwise the kernel's coarse clock ticks within
    // 10 ms; 50 ms leaves room.
    let whole_seconds = stat.mtime_ns % 1_000_000_000 == 0 && stat.ctime_ns % 1_000_000_000 == 0;
    let window = if whole_seconds {
        2_000_000_000
    } else {
        50_000_000
    };
    now_ns.saturating_sub(newest) < window
}

pub(crate) fn now_ns() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_nanos()).unwrap_or(i64::MAX)
}

/// Paths added, removed, or changed in kind, content or mode.
fn changed(
    previous: Option<&BTreeMap<String, Entry>>,
    current: &BTreeMap<String, Entry>,
) -> Vec<String> {
    let Some(previous) = previous else {
        return current.keys().cloned().collect();
    };
    let same = |a: &Entry, b: &Entry| a.kind == b.kind && a.mode == b.mode;
    let mut out: Vec<String> = current
        .iter()
        .filter(|(path, e)| previous.get(*path).is_none_or(|p| !same(p, e)))
        .map(|(path, _)| path.clone())
        .collect();
    out.extend(
        previous
            .keys()
            .filter(|p| !current.contains_key(*p))
            .cloned(),
    );
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_stamps_are_racy() {
        let now = 1_700_000_000_123_456_789;
        let stat = |mtime_ns: i64| Fingerprint {
            mtime_ns,
            ctime_ns: mtime_ns,
            inode: 1,
            size: 1,
        };
        assert!(racy(&stat(now - 10_000_000), now));
        assert!(
            racy(&stat(now + 5_000_000_000), now),
            "stamps in the future"
        );
        assert!(!racy(&stat(now - 60_000_000), now));
        // Whole seconds: a coarse filesystem, so a wider window.
        assert!(racy(&stat(1_699_999_999_000_000_000), now));
        assert!(!racy(&stat(1_699_999_990_000_000_000), now));
        assert!(!racy(&Fingerprint::default(), now));
    }
}
