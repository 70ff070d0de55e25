//! Walking a workspace: lstat only, never following a symlink, no file reads.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

use super::manifest::{Entry, EntryKind, Fingerprint, Manifest, SkipReason};
use super::{CheckpointError, SnapshotPolicy};

/// Directories read on the calling thread before helper threads start: most
/// workspaces are done by then, and starting threads costs more than it saves.
const INLINE_DIRS: usize = 32;

/// The tree under `root` as a manifest whose file hashes are still empty
/// (the caller hashes or reuses them). Symlinks are recorded, not followed.
/// Directories are read by a few threads at once: the cost is mostly one lstat
/// per entry, and those run in parallel.
pub(crate) fn scan(root: &Path, policy: &SnapshotPolicy) -> Result<Manifest, CheckpointError> {
    let threads = super::cores().min(4);
    let (m, truncated) = scan_with(root, policy, threads)?;
    if truncated && threads > 1 {
        // Which paths fit under max_files depends on the order of the walk:
        // walk again on one thread (in name order) so the answer is stable.
        return Ok(scan_with(root, policy, 1)?.0);
    }
    Ok(m)
}

/// The scan on `threads` threads, and whether it stopped at `max_files`.
fn scan_with(
    root: &Path,
    policy: &SnapshotPolicy,
    threads: usize,
) -> Result<(Manifest, bool), CheckpointError> {
    let queue = Queue::default();
    let count = AtomicUsize::new(0);
    let inline = if threads > 1 { INLINE_DIRS } else { usize::MAX };
    let mut parts = vec![worker(root, policy, &queue, &count, inline)];
    if queue.has_work() {
        parts.extend(std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| s.spawn(|| worker(root, policy, &queue, &count, usize::MAX)))
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    w.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect::<Vec<Part>>()
        }));
    }
    let mut m = Manifest::default();
    let mut abandoned = Vec::new();
    for part in parts {
        if let Some(e) = part.root_error {
            return Err(CheckpointError::io(root, e));
        }
        m.entries.extend(part.entries);
        m.skipped.extend(part.skipped);
        abandoned.extend(part.abandoned);
    }
    // Dirs listed but not read (past max_files, unreadable, vanished) are not
    // captured: their contents are unknown.
    for (dir, reason) in abandoned {
        m.entries.remove(&dir);
        if let Some(reason) = reason {
            m.skipped.insert(dir, reason);
        }
    }
    Ok((m, count.into_inner() >= policy.max_files))
}

/// What one worker found.
#[derive(Default)]
struct Part {
    entries: Vec<(String, Entry)>,
    skipped: Vec<(String, SkipReason)>,
    abandoned: Vec<(String, Option<SkipReason>)>,
    root_error: Option<io::Error>,
}

/// Reads directories from `queue` until it is done or `limit` were read.
fn worker(
    root: &Path,
    policy: &SnapshotPolicy,
    queue: &Queue,
    count: &AtomicUsize,
    limit: usize,
) -> Part {
    let mut part = Part::default();
    let mut read = 0;
    while read < limit
        && let Some(mut job) = queue.next()
    {
        read += 1;
        let dir = job.dir.clone();
        if !dir.is_empty() && count.load(Ordering::Relaxed) >= policy.max_files {
            part.abandoned.push((dir, Some(SkipReason::TooManyFiles)));
            continue;
        }
        let children = match list(root, &dir) {
            Ok(children) => children,
            Err(e) if dir.is_empty() => {
                part.root_error = Some(e);
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                part.abandoned.push((dir, None));
                continue;
            }
            Err(e) => {
                part.abandoned.push((dir, Some(unreadable(&e))));
                continue;
            }
        };
        for (name, entry) in children {
            let Some(name) = name.to_str() else {
                let lossy = join(&dir, &name.to_string_lossy());
                part.skipped.push((lossy, SkipReason::NonUtf8));
                continue;
            };
            let rel = join(&dir, name);
            if policy.ignored_dirs.iter().any(|d| d == name) {
                part.skipped.push((rel, SkipReason::Ignored));
                continue;
            }
            if count.fetch_add(1, Ordering::Relaxed) >= policy.max_files {
                part.skipped.push((rel, SkipReason::TooManyFiles));
                continue;
            }
            let meta = match entry.metadata() {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    part.skipped.push((rel, unreadable(&e)));
                    continue;
                }
            };
            match classify(root, &rel, &meta, policy) {
                Ok(e) => {
                    if e.kind == EntryKind::Dir {
                        job.found.push(rel.clone());
                    }
                    part.entries.push((rel, e));
                }
                Err(Some(reason)) => part.skipped.push((rel, reason)),
                Err(None) => {}
            }
        }
    }
    part
}

/// Directories waiting to be read, shared by the workers; the walk ends when
/// none is waiting and no worker is reading one (it could still find more).
struct Queue {
    state: Mutex<(Vec<String>, usize)>,
    ready: Condvar,
}

impl Default for Queue {
    fn default() -> Self {
        Self {
            state: Mutex::new((vec![String::new()], 0)),
            ready: Condvar::new(),
        }
    }
}

/// A directory being read; dropping it hands the subdirs found to the queue,
/// even on a panic, so no worker waits forever.
struct Job<'a> {
    queue: &'a Queue,
    dir: String,
    found: Vec<String>,
}

impl Queue {
    /// Directories left (only meaningful while no job is in flight).
    fn has_work(&self) -> bool {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        !state.0.is_empty()
    }

    fn next(&self) -> Option<Job<'_>> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(dir) = state.0.pop() {
                state.1 += 1;
                return Some(Job {
                    queue: self,
                    dir,
                    found: Vec::new(),
                });
            }
            if state.1 == 0 {
                return None;
            }
            state = self
                .ready
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Drop for Job<'_> {
    fn drop(&mut self) {
        let mut state = self
            .queue
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        state.1 -= 1;
        // Reversed so the stack pops them in name order.
        state.0.extend(self.found.drain(..).rev());
        drop(state);
        self.queue.ready.notify_all();
    }
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
