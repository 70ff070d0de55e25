//! Walking a workspace: lstat only, never following a symlink, no file reads.
//! The walk goes by descriptors: each directory is opened `O_NOFOLLOW` beneath
//! its parent's descriptor and listed through its own, and each entry is
//! looked at (`fstatat`, `readlinkat`) through that, so a directory swapped
//! for a link while the walk runs is refused, never entered.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

use agentd_sandbox::confined::{self, Root};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use super::fsutil::gone;
use super::manifest::{Entry, EntryKind, Fingerprint, Manifest, SkipReason};
use super::{CheckpointError, SnapshotPolicy};

/// Directories read on the calling thread before helper threads start: most
/// workspaces are done by then, and starting threads costs more than it saves.
const INLINE_DIRS: usize = 32;

/// Directories nested deeper are skipped: the walk holds a descriptor for
/// each level still to be read, and an agent can nest directories without
/// end (`mkdir 0 1; cd 0` in a loop) to exhaust the server's descriptors.
pub(crate) const MAX_DEPTH: usize = 128;

/// The tree under `root` as a manifest whose file hashes are still empty
/// (the caller hashes or reuses them). Symlinks are recorded, not followed.
/// Directories are read by a few threads at once: the cost is mostly one lstat
/// per entry, and those run in parallel.
pub(crate) fn scan(root: &Root, policy: &SnapshotPolicy) -> Result<Manifest, CheckpointError> {
    scan_on(root, policy, super::cores().min(4))
}

/// [`scan`] on at most `threads` threads.
pub(crate) fn scan_on(
    root: &Root,
    policy: &SnapshotPolicy,
    threads: usize,
) -> Result<Manifest, CheckpointError> {
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
    root: &Root,
    policy: &SnapshotPolicy,
    threads: usize,
) -> Result<(Manifest, bool), CheckpointError> {
    let root_path = root.path();
    let root = root.fd();
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
            return Err(CheckpointError::io(root_path, e));
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
    root: BorrowedFd<'_>,
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
        let listed = open_dir(root, &job).and_then(|fd| {
            let children = list(&fd)?;
            Ok((fd, children))
        });
        let (fd, children) = match listed {
            Ok(listed) => listed,
            Err(e) if dir.is_empty() => {
                part.root_error = Some(e);
                continue;
            }
            // Gone, or no longer a directory (a link swapped in): not captured.
            Err(e) => {
                part.abandoned
                    .push((dir, (!gone(&e)).then(|| unreadable(&e))));
                continue;
            }
        };
        let fd = Arc::new(fd);
        for (name, stat) in children {
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
            let stat = match stat {
                Ok(stat) => stat,
                Err(Errno::NOENT) => continue,
                Err(e) => {
                    part.skipped.push((rel, unreadable(&e.into())));
                    continue;
                }
            };
            match classify(fd.as_fd(), name, &stat, policy) {
                Ok(e) => {
                    if e.kind == EntryKind::Dir && rel.matches('/').count() + 1 >= MAX_DEPTH {
                        // Each level still to be read holds its parent open.
                        let error = format!("nested deeper than {MAX_DEPTH} directories");
                        part.skipped.push((rel, SkipReason::Unreadable { error }));
                        continue;
                    }
                    if e.kind == EntryKind::Dir {
                        job.found.push(Pending {
                            dir: rel.clone(),
                            parent: Some(Arc::clone(&fd)),
                        });
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

/// A directory waiting to be read: its path and the descriptor of its parent
/// (`None` for the root), which it is opened beneath. Siblings share their
/// parent's descriptor, so the walk holds about one per level of depth.
struct Pending {
    dir: String,
    parent: Option<Arc<OwnedFd>>,
}

/// Directories waiting to be read, shared by the workers; the walk ends when
/// none is waiting and no worker is reading one (it could still find more).
struct Queue {
    state: Mutex<(Vec<Pending>, usize)>,
    ready: Condvar,
}

impl Default for Queue {
    fn default() -> Self {
        let root = Pending {
            dir: String::new(),
            parent: None,
        };
        Self {
            state: Mutex::new((vec![root], 0)),
            ready: Condvar::new(),
        }
    }
}

/// A directory being read; dropping it hands the subdirs found to the queue,
/// even on a panic, so no worker waits forever.
struct Job<'a> {
    queue: &'a Queue,
    dir: String,
    parent: Option<Arc<OwnedFd>>,
    found: Vec<Pending>,
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
            if let Some(Pending { dir, parent }) = state.0.pop() {
                state.1 += 1;
                return Some(Job {
                    queue: self,
                    dir,
                    parent,
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

/// Open the job's directory for reading: its last name beneath its parent's
/// descriptor, `O_NOFOLLOW` (a link swapped in fails with `ENOTDIR`/`ELOOP`),
/// non-blocking.
fn open_dir(root: BorrowedFd<'_>, job: &Job<'_>) -> io::Result<OwnedFd> {
    let flags =
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let (parent, name) = match &job.parent {
        Some(parent) => (parent.as_fd(), super::fsutil::split(&job.dir).1),
        None => (root, "."),
    };
    Ok(rustix::fs::openat(parent, name, flags, Mode::empty())?)
}

/// One directory's entries with their own lstat (through the directory's
/// descriptor), sorted by name.
fn list(dir: &OwnedFd) -> io::Result<Vec<(OsString, Result<Stat, Errno>)>> {
    let mut out = Vec::new();
    let mut listing = rustix::fs::Dir::read_from(dir)?;
    while let Some(entry) = listing.read() {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        let stat = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW);
        let name = std::ffi::OsStr::from_bytes(name.to_bytes()).to_os_string();
        out.push((name, stat));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The entry for one lstat result of `name` in `dir`; `Err(None)` when it
/// vanished meanwhile.
fn classify(
    dir: BorrowedFd<'_>,
    name: &str,
    stat: &Stat,
    policy: &SnapshotPolicy,
) -> Result<Entry, Option<SkipReason>> {
    let mode = stat.st_mode & 0o7777;
    let size = stat.st_size.max(0) as u64;
    match confined::file_type(stat) {
        FileType::Directory => Ok(Entry {
            kind: EntryKind::Dir,
            size: 0,
            mode,
            stat: Fingerprint::default(),
        }),
        FileType::Symlink => {
            let target = match rustix::fs::readlinkat(dir, name, Vec::new()) {
                Ok(t) => t,
                // Gone, or swapped for something else since the lstat.
                Err(Errno::NOENT | Errno::INVAL) => return Err(None),
                Err(e) => return Err(Some(unreadable(&e.into()))),
            };
            let target =
                String::from_utf8(target.into_bytes()).map_err(|_| Some(SkipReason::NonUtf8))?;
            // Re-read every scan (one readlink), so no fingerprint is kept.
            Ok(Entry {
                size: target.len() as u64,
                kind: EntryKind::Symlink { target },
                mode,
                stat: Fingerprint::default(),
            })
        }
        FileType::RegularFile if size > policy.max_file_bytes => {
            Err(Some(SkipReason::TooLarge { size }))
        }
        FileType::RegularFile => Ok(Entry {
            kind: EntryKind::File {
                hash: String::new(),
            },
            size,
            mode,
            stat: fingerprint(stat),
        }),
        _ => Err(Some(SkipReason::Special)),
    }
}

// The stat fields' integer types differ between architectures.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn fingerprint(stat: &Stat) -> Fingerprint {
    let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
    Fingerprint {
        mtime_ns: ns(stat.st_mtime as i64, stat.st_mtime_nsec as i64),
        ctime_ns: ns(stat.st_ctime as i64, stat.st_ctime_nsec as i64),
        inode: stat.st_ino as u64,
        size: stat.st_size.max(0) as u64,
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
