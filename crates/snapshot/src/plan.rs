//! Deciding what a restore must do: compare the current tree with the manifest.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use agentd_sandbox::confined::{self, Root};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::fsutil::{Content, gone, read_file, split};
use super::manifest::{Entry, EntryKind, Manifest, ancestors};
use super::{CheckpointError, SnapshotPolicy};

/// The restore's steps, each list in the order it must run.
#[derive(Default)]
pub(crate) struct Plan {
    /// Deepest first; `true` for directories.
    pub remove: Vec<(String, bool)>,
    /// Shallowest first.
    pub mkdir: Vec<String>,
    /// (path, hash, mode, size).
    pub files: Vec<(String, String, u32, u64)>,
    /// (path, target).
    pub links: Vec<(String, String)>,
    /// (path, mode): run last, children before parents, so a read-only dir
    /// does not block writing inside it.
    pub chmod: Vec<(String, u32)>,
}

/// What is at a path now.
enum Now {
    /// A directory, with its mode.
    Dir(u32),
    File(Entry),
    /// A symlink, with its target.
    Symlink(String),
    /// Something the scan did not capture (special, too large, unreadable).
    Other,
}

/// `keep_others`: a uid whose entries alone a restore may remove or
/// replace; anything another user owns stays as it is.
pub(crate) fn plan(
    root: &Root,
    policy: &SnapshotPolicy,
    m: &Manifest,
    keep_others: Option<u32>,
) -> Result<Plan, CheckpointError> {
    validate(m)?;
    let cur = super::scan::scan(root, policy)?;
    let foreign: HashSet<&str> = match keep_others {
        Some(uid) => cur
            .entries
            .keys()
            .filter(|path| owner_of(root, path).is_some_and(|owner| owner != uid))
            .map(String::as_str)
            .collect(),
        None => HashSet::new(),
    };
    let ignored = |p: &str| {
        p.split('/')
            .any(|c| policy.ignored_dirs.iter().any(|d| d == c))
    };
    let wanted: BTreeMap<&str, &Entry> = m
        .entries
        .iter()
        .filter(|(p, _)| !ignored(p) && !foreign.contains(p.as_str()))
        .map(|(p, e)| (p.as_str(), e))
        .collect();
    // Dirs that stay even when the manifest lacks them: they hold paths a
    // restore must not touch.
    let mut holders: HashSet<&str> = HashSet::new();
    for path in m.skipped.keys().chain(cur.skipped.keys()) {
        holders.extend(ancestors(path));
    }
    for path in &foreign {
        holders.extend(ancestors(path));
    }

    let mut plan = Plan::default();
    let mut removed: HashSet<&str> = HashSet::new();
    for (path, e) in cur.entries.iter().rev() {
        let want = wanted.get(path.as_str());
        if want.is_some_and(|w| same_kind(&w.kind, &e.kind))
            || m.is_skipped(path)
            || foreign.contains(path.as_str())
        {
            continue;
        }
        let is_dir = e.kind == EntryKind::Dir;
        if is_dir && holders.contains(path.as_str()) {
            if want.is_some() {
                return Err(conflict(
                    path,
                    "a directory holding ignored or skipped paths",
                ));
            }
            continue;
        }
        // A non-dir replacing a non-dir is renamed over it, not removed first.
        if want.is_some_and(|w| w.kind != EntryKind::Dir) && !is_dir {
            continue;
        }
        plan.remove.push((path.clone(), is_dir));
        removed.insert(path);
    }

    for (&path, w) in &wanted {
        let now = if removed.contains(path) {
            None
        } else {
            now_at(root, &cur, path)?
        };
        match &w.kind {
            EntryKind::Dir => match now {
                Some(Now::Dir(mode)) => {
                    if mode != w.mode {
                        plan.chmod.push((path.to_string(), w.mode));
                    }
                }
                Some(Now::File(_) | Now::Symlink(_)) | None => {
                    plan.mkdir.push(path.to_string());
                    plan.chmod.push((path.to_string(), w.mode));
                }
                Some(Now::Other) => {
                    plan.remove.push((path.to_string(), false));
                    plan.mkdir.push(path.to_string());
                    plan.chmod.push((path.to_string(), w.mode));
                }
            },
            // A file or a link where a directory stays.
            _ if matches!(now, Some(Now::Dir(_))) => {
                return Err(conflict(path, "a directory the scan could not see into"));
            }
            EntryKind::File { hash } => match now {
                Some(Now::File(entry)) if same_content(root, path, &entry, w, hash) => {
                    if entry.mode != w.mode {
                        plan.chmod.push((path.to_string(), w.mode));
                    }
                }
                _ => plan
                    .files
                    .push((path.to_string(), hash.clone(), w.mode, w.size)),
            },
            EntryKind::Symlink { target } => match now {
                Some(Now::Symlink(t)) if t == *target => {}
                _ => plan.links.push((path.to_string(), target.clone())),
            },
        }
    }
    // Reverse path order puts every child before its parent.
    plan.chmod.sort_by(|a, b| b.0.cmp(&a.0));
    Ok(plan)
}

/// What is at `path` now, by the scan `cur` (probed if the scan skipped it).
fn now_at(root: &Root, cur: &Manifest, path: &str) -> Result<Option<Now>, CheckpointError> {
    Ok(match cur.entries.get(path) {
        Some(e) => Some(match &e.kind {
            EntryKind::Dir => Now::Dir(e.mode),
            EntryKind::File { .. } => Now::File(e.clone()),
            EntryKind::Symlink { target } => Now::Symlink(target.clone()),
        }),
        None if cur.is_skipped(path) => probe(root, path)?,
        None => None,
    })
}

fn conflict(path: &str, what: &str) -> CheckpointError {
    CheckpointError::Conflict {
        path: path.to_string(),
        reason: format!("the checkpoint has a file here, the workspace has {what}"),
    }
}

fn same_kind(a: &EntryKind, b: &EntryKind) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// Whether the current file `now` holds the manifest's content: an identical
/// fingerprint says so without reading; otherwise equal size and hash.
fn same_content(root: &Root, path: &str, now: &Entry, want: &Entry, hash: &str) -> bool {
    if now.size != want.size {
        return false;
    }
    if !want.stat.is_zero() && want.stat == now.stat {
        return true;
    }
    matches!(read_file(root.fd(), path, want.size, want.size),
        Content::Read { hash: h, .. } if h == hash)
}

/// The owner of `path`, looked at through real directories only.
fn owner_of(root: &Root, path: &str) -> Option<u32> {
    let (dir, name) = split(path);
    let flags = OFlags::PATH | OFlags::DIRECTORY;
    let parent = confined::open_no_links(root.fd(), Path::new(dir), flags, Mode::empty()).ok()?;
    let stat = rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    Some(stat.st_uid)
}

/// lstat a path the scan did not capture, through real directories only: a
/// parent that is not one means nothing is there for us.
fn probe(root: &Root, path: &str) -> Result<Option<Now>, CheckpointError> {
    let (dir, name) = split(path);
    let parent = confined::open_no_links(
        root.fd(),
        Path::new(dir),
        OFlags::PATH | OFlags::DIRECTORY,
        Mode::empty(),
    );
    let stat = parent.and_then(|parent| {
        Ok(rustix::fs::statat(
            &parent,
            name,
            AtFlags::SYMLINK_NOFOLLOW,
        )?)
    });
    match stat {
        Ok(stat) if confined::file_type(&stat) == FileType::Directory => {
            Ok(Some(Now::Dir(stat.st_mode & 0o7777)))
        }
        Ok(_) => Ok(Some(Now::Other)),
        Err(e) if gone(&e) => Ok(None),
        Err(e) => Err(CheckpointError::io(&root.path().join(path), e)),
    }
}

/// Refuse manifests whose paths could escape the workspace or lack their
/// parent dirs (or have a file as a parent).
fn validate(m: &Manifest) -> Result<(), CheckpointError> {
    for path in m.entries.keys() {
        let bad = path.is_empty()
            || path.contains('\0')
            || path
                .split('/')
                .any(|c| c.is_empty() || c == "." || c == "..");
        // A snapshot lists every parent dir; anything else was not made by one.
        let orphan =
            ancestors(path).any(|a| m.entries.get(a).is_none_or(|e| e.kind != EntryKind::Dir));
        if bad || orphan {
            return Err(CheckpointError::Manifest(format!(
                "{path:?}: not a valid workspace-relative path"
            )));
        }
    }
    Ok(())
}
