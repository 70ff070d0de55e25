//! Walking a workspace: lstat only, never following a symlink, no file reads.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::manifest::{Entry, EntryKind, Fingerprint, Manifest, SkipReason};
use super::{CheckpointError, SnapshotPolicy};

/// The tree under `root` as a manifest whose file hashes are still empty
/// (the caller hashes or reuses them). Symlinks are recorded, not followed.
pub(crate) fn scan(root: &Path, policy: &SnapshotPolicy) -> Result<Manifest, CheckpointError> {
    let mut m = Manifest::default();
    let mut count = 0usize;
    let mut full = false;
    // Directories to read, as workspace-relative paths ("" is the root).
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        if full {
            // Its entry was counted, but its contents will not be: skip the whole subtree.
            m.entries.remove(&dir);
            m.skipped.insert(dir, SkipReason::TooManyFiles);
            continue;
        }
        let children = match list(root, &dir) {
            Ok(children) => children,
            Err(e) if dir.is_empty() => return Err(CheckpointError::io(root, e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                m.entries.remove(&dir);
                continue;
            }
            Err(e) => {
                m.entries.remove(&dir);
                m.skipped.insert(dir, unreadable(&e));
                continue;
            }
        };
        let mut subdirs = Vec::new();
        for (name, entry) in children {
            let Some(name) = name.to_str() else {
                let lossy = join(&dir, &name.to_string_lossy());
                m.skipped.insert(lossy, SkipReason::NonUtf8);
                continue;
            };
            let rel = join(&dir, name);
            if policy.ignored_dirs.iter().any(|d| d == name) {
                m.skipped.insert(rel, SkipReason::Ignored);
                continue;
            }
            if count >= policy.max_files {
                full = true;
                m.skipped.insert(rel, SkipReason::TooManyFiles);
                continue;
            }
            let meta = match entry.metadata() {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    m.skipped.insert(rel, unreadable(&e));
                    continue;
                }
            };
            match classify(root, &rel, &meta, policy) {
                Ok(e) => {
                    count += 1;
                    if e.kind == EntryKind::Dir {
                        subdirs.push(rel.clone());
                    }
                    m.entries.insert(rel, e);
                }
                Err(Some(reason)) => {
                    m.skipped.insert(rel, reason);
                }
                Err(None) => {}
            }
        }
        // Reversed so the stack pops them in name order.
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(m)
}

/// One directory's entries, sorted by name.
fn list(root: &Path, dir: &str) -> io::Result<Vec<(std::ffi::OsString, fs::DirEntry)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(root.join(dir))? {
        let entry = entry?;
        out.push((entry.file_name(), entry));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The entry for one lstat result; `Err(None)` when it vanished meanwhile.
fn classify(
    root: &Path,
    rel: &str,
    meta: &fs::Metadata,
    policy: &SnapshotPolicy,
) -> Result<Entry, Option<SkipReason>> {
    let ft = meta.file_type();
    let mode = meta.mode() & 0o7777;
    if ft.is_dir() {
        return Ok(Entry {
            kind: EntryKind::Dir,
            size: 0,
            mode,
            stat: Fingerprint::default(),
        });
    }
    if ft.is_symlink() {
        let target = match fs::read_link(root.join(rel)) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(None),
            Err(e) => return Err(Some(unreadable(&e))),
        };
        let target = target.into_os_string().into_string();
        let target = target.map_err(|_| Some(SkipReason::NonUtf8))?;
        // Re-read every scan (one readlink), so no fingerprint is kept.
        return Ok(Entry {
            size: target.len() as u64,
            kind: EntryKind::Symlink { target },
            mode,
            stat: Fingerprint::default(),
        });
    }
    if !ft.is_file() {
        return Err(Some(SkipReason::Special));
    }
    if meta.len() > policy.max_file_bytes {
        return Err(Some(SkipReason::TooLarge { size: meta.len() }));
    }
    Ok(Entry {
        kind: EntryKind::File {
            hash: String::new(),
        },
        size: meta.len(),
        mode,
        stat: fingerprint(meta),
    })
}

pub(crate) fn fingerprint(meta: &fs::Metadata) -> Fingerprint {
    let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
    Fingerprint {
        mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
        ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        inode: meta.ino(),
        size: meta.len(),
    }
}

pub(crate) fn unreadable(e: &io::Error) -> SkipReason {
    SkipReason::Unreadable {
        error: e.to_string(),
    }
}

pub(crate) fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}
