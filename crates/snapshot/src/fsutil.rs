//! File operations by descriptor that never follow a symlink: reading for
//! hashes, and the restore's writes. The agent's commands may swap any
//! directory or file of the workspace for a link at any moment, so no path
//! is trusted twice: every directory is opened once, `O_NOFOLLOW`, beneath
//! its parent's descriptor, and everything in it is done through that
//! descriptor (`*at` calls, a temp file renamed into place).

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentd_sandbox::confined::{self, ConfinedError, Root};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::CheckpointError;
use super::manifest::{ancestors, sha256_hex};

/// What reading a file for its hash found.
pub(crate) enum Content {
    Read {
        hash: String,
        bytes: Vec<u8>,
    },
    TooLarge(u64),
    /// Turned into something that is not a regular file since the scan (a
    /// link on the way included).
    NotAFile,
    Gone,
    Unreadable(io::Error),
}

/// Read the regular file `rel` beneath `root` (at most `max` bytes) through
/// real directories only, without blocking on a FIFO swapped in since the scan.
pub(crate) fn read_file(root: BorrowedFd<'_>, rel: &str, max: u64, size_hint: u64) -> Content {
    let file = match confined::open_regular_no_links(root, Path::new(rel)) {
        Ok((file, _)) => file,
        Err(ConfinedError::Io(e)) => {
            return match e.raw_os_error() {
                Some(libc::ENOENT | libc::ENOTDIR) => Content::Gone,
                Some(libc::ELOOP | libc::EXDEV) => Content::NotAFile,
                _ => Content::Unreadable(e),
            };
        }
        Err(_) => return Content::NotAFile,
    };
    let cap = usize::try_from(size_hint.min(max)).unwrap_or(0);
    let mut bytes = Vec::with_capacity(cap);
    if let Err(e) = file.take(max.saturating_add(1)).read_to_end(&mut bytes) {
        return Content::Unreadable(e);
    }
    if bytes.len() as u64 > max {
        return Content::TooLarge(bytes.len() as u64);
    }
    Content::Read {
        hash: sha256_hex(&bytes),
        bytes,
    }
}

/// Whether an error opening a path beneath the root says nothing is there
/// for us: it is gone, or a parent is not a real directory (a link, say).
pub(crate) fn gone(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)
    )
}

/// The parent of a workspace-relative path and its last name.
pub(crate) fn split(rel: &str) -> (&str, &str) {
    rel.rsplit_once('/').unwrap_or(("", rel))
}

/// Directories a [`Tree`] holds open at most: the ancestors of the path at
/// hand (restores go in path order, so these are the ones reused).
const HELD_DIRS: usize = 32;

/// A restore's hold on the workspace: its root, and the directories it
/// works in, each opened through real directories only (a link on the way
/// is a conflict, never followed) and then used by descriptor. A directory
/// swapped away after it was opened keeps being written where it went
/// (which the agent, and only it, chose).
pub(crate) struct Tree {
    root: Root,
    /// Open directories, shallowest first, each within the one before.
    dirs: Vec<(String, Arc<OwnedFd>)>,
}

/// Whether `path` is `dir` or lies under it.
fn within(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

impl Tree {
    pub(crate) fn new(root: Root) -> Self {
        Self {
            root,
            dirs: Vec::new(),
        }
    }

    /// The workspace's path, for messages.
    pub(crate) fn path(&self) -> &Path {
        self.root.path()
    }

    fn io(&self, rel: &str, e: impl Into<io::Error>) -> CheckpointError {
        CheckpointError::io(&self.root.path().join(rel), e.into())
    }

    /// The directory `dir` (`None`: the root), opened beneath the deepest
    /// open one above it; `rel` is the path it is needed for, for errors.
    fn dir(&mut self, dir: &str, rel: &str) -> Result<Option<Arc<OwnedFd>>, CheckpointError> {
        if dir.is_empty() {
            return Ok(None);
        }
        while self.dirs.last().is_some_and(|(held, _)| !within(dir, held)) {
            self.dirs.pop();
        }
        let (base, below) = match self.dirs.last() {
            Some((held, fd)) if held == dir => return Ok(Some(Arc::clone(fd))),
            Some((held, fd)) => (Some(Arc::clone(fd)), &dir[held.len() + 1..]),
            None => (None, dir),
        };
        let base_fd = base.as_ref().map_or(self.root.fd(), |fd| fd.as_fd());
        let flags = OFlags::PATH | OFlags::DIRECTORY;
        let fd = match confined::open_no_links(base_fd, Path::new(below), flags, Mode::empty()) {
            Ok(fd) => Arc::new(fd),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                return Err(self.not_a_dir(dir, rel));
            }
            Err(e) => return Err(self.io(dir, e)),
        };
        if self.dirs.len() == HELD_DIRS {
            self.dirs.remove(0);
        }
        self.dirs.push((dir.to_string(), Arc::clone(&fd)));
        Ok(Some(fd))
    }

    /// The conflict of a parent of `rel` that is not a real directory:
    /// the first ancestor of `dir` that is not (`dir` itself if it changed
    /// back meanwhile).
    fn not_a_dir(&self, dir: &str, rel: &str) -> CheckpointError {
        let mut ancestors: Vec<&str> = ancestors(dir).collect();
        ancestors.reverse();
        ancestors.push(dir);
        let flags = OFlags::PATH | OFlags::NOFOLLOW;
        let culprit = ancestors.into_iter().find(|path| {
            confined::open_no_links(self.root.fd(), Path::new(path), flags, Mode::empty())
                .and_then(|fd| Ok(rustix::fs::fstat(&fd)?))
                .is_ok_and(|stat| confined::file_type(&stat) != FileType::Directory)
        });
        CheckpointError::Conflict {
            path: rel.to_string(),
            reason: format!(
                "parent {} is not a directory (symlinks are not followed)",
                culprit.unwrap_or(dir)
            ),
        }
    }

    /// The parent directory of `rel` and its last name.
    fn parent<'a>(
        &mut self,
        rel: &'a str,
    ) -> Result<(Option<Arc<OwnedFd>>, &'a str), CheckpointError> {
        let (dir, name) = split(rel);
        Ok((self.dir(dir, rel)?, name))
    }

    /// Forget `dir` and what is under it (it was removed).
    fn forget(&mut self, dir: &str) {
        self.dirs.retain(|(held, _)| !within(held, dir));
    }

    /// Remove `rel` (an empty directory when `is_dir`); a link is removed,
    /// never followed. Already gone is fine.
    pub(crate) fn remove(&mut self, rel: &str, is_dir: bool) -> Result<(), CheckpointError> {
        let (parent, name) = self.parent(rel)?;
        let parent_fd = parent.as_ref().map_or(self.root.fd(), |fd| fd.as_fd());
        let flags = if is_dir {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        match rustix::fs::unlinkat(parent_fd, name, flags) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(self.io(rel, e)),
        }
        if is_dir {
            self.forget(rel);
        }
        Ok(())
    }

    /// Make the directory `rel` unless a real one is there.
    pub(crate) fn mkdir(&mut self, rel: &str) -> Result<(), CheckpointError> {
        let (parent, name) = self.parent(rel)?;
        let parent_fd = parent.as_ref().map_or(self.root.fd(), |fd| fd.as_fd());
        match rustix::fs::mkdirat(parent_fd, name, Mode::from_raw_mode(0o777)) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST)
                if rustix::fs::statat(parent_fd, name, AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|stat| confined::file_type(&stat) == FileType::Directory) =>
            {
                Ok(())
            }
            Err(e) => Err(self.io(rel, e)),
        }
    }

    /// Replace whatever non-directory is at `rel` with a file of these bytes
    /// and mode: a new file (`O_CREAT | O_EXCL | O_NOFOLLOW`) in the parent,
    /// renamed over the name, so a link there is replaced, not written through.
    pub(crate) fn write_file(
        &mut self,
        rel: &str,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), CheckpointError> {
        let (parent, name) = self.parent(rel)?;
        let parent_fd = parent.as_ref().map_or(self.root.fd(), |fd| fd.as_fd());
        let (tmp, fd) = create_temp(|tmp| {
            rustix::fs::openat(
                parent_fd,
                tmp,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )
        })
        .map_err(|e| self.io(rel, e))?;
        let mut file = File::from(fd);
        let result = file
            .write_all(bytes)
            .and_then(|()| Ok(rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?))
            .and_then(|()| {
                drop(file);
                Ok(rustix::fs::renameat(parent_fd, &tmp, parent_fd, name)?)
            });
        if result.is_err() {
            let _ = rustix::fs::unlinkat(parent_fd, &tmp, AtFlags::empty());
        }
        result.map_err(|e| self.io(rel, e))
    }

    /// Replace whatever non-directory is at `rel` with a link to `target`.
    pub(crate) fn write_symlink(&mut self, rel: &str, target: &str) -> Result<(), CheckpointError> {
        let (parent, name) = self.parent(rel)?;
        let parent_fd = parent.as_ref().map_or(self.root.fd(), |fd| fd.as_fd());
        let (tmp, ()) = create_temp(|tmp| rustix::fs::symlinkat(target, parent_fd, tmp))
            .map_err(|e| self.io(rel, e))?;
        let result = rustix::fs::renameat(parent_fd, &tmp, parent_fd, name);
        if result.is_err() {
            let _ = rustix::fs::unlinkat(parent_fd, &tmp, AtFlags::empty());
        }
        result.map_err(|e| self.io(rel, e))
    }

    /// Set the mode of `rel` unless it is a link (chmod would follow it).
    pub(crate) fn chmod(&mut self, rel: &str, mode: u32) -> Result<(), CheckpointError> {
        let (parent, name) = self.parent(rel)?;
        let parent_fd = parent.as_ref().map_or(self.root.fd(), |fd| fd.as_fd());
        match confined::set_mode_no_follow(parent_fd, Path::new(name), mode) {
            Ok(_) => Ok(()),
            Err(ConfinedError::Io(e)) => Err(self.io(rel, e)),
            Err(e) => Err(self.io(rel, io::Error::other(e.to_string()))),
        }
    }
}

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Create something at a fresh temp name (fixed length, so a long file name
/// cannot push it over NAME_MAX), retrying on a clash.
fn create_temp<T>(mut create: impl FnMut(&OsStr) -> Result<T, Errno>) -> io::Result<(String, T)> {
    loop {
        let n = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
        let tmp = format!(".agentd-restore-{}-{n}.tmp", std::process::id());
        match create(OsStr::new(&tmp)) {
            Ok(made) => return Ok((tmp, made)),
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_symlinked_parent_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, outside) = (dir.path().join("ws"), dir.path().join("outside"));
        fs::create_dir_all(ws.join("real")).unwrap();
        fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("link")).unwrap();
        let mut tree = Tree::new(Root::open(&ws).unwrap());
        assert!(tree.parent("real/f").is_ok());
        let err = tree.parent("link/sub/f").unwrap_err().to_string();
        assert!(
            err.starts_with("link/sub/f: parent link is not a directory"),
            "{err}"
        );
        let err = tree.write_file("link/f", b"x", 0o644).unwrap_err();
        assert!(matches!(err, CheckpointError::Conflict { .. }), "{err}");
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    }

    #[test]
    fn writes_replace_a_symlink_instead_of_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.txt");
        fs::write(&target, "outside").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut tree = Tree::new(Root::open(dir.path()).unwrap());
        tree.write_file("link", b"inside", 0o640).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "outside");
        assert_eq!(fs::read_to_string(&link).unwrap(), "inside");
        let meta = fs::symlink_metadata(&link).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "no temp file left: {names:?}");
    }

    /// However many directories a restore writes in, it holds few open.
    #[test]
    fn a_tree_holds_a_bounded_number_of_directories() {
        let dir = tempfile::tempdir().unwrap();
        let mut tree = Tree::new(Root::open(dir.path()).unwrap());
        let mut deep = String::new();
        for i in 0..100 {
            deep = if deep.is_empty() {
                format!("d{i}")
            } else {
                format!("{deep}/d{i}")
            };
            tree.mkdir(&deep).unwrap();
            tree.write_file(&format!("{deep}/f"), b"x", 0o644).unwrap();
            tree.mkdir(&format!("wide{i}")).unwrap();
            tree.write_file(&format!("wide{i}/f"), b"y", 0o644).unwrap();
        }
        assert!(tree.dirs.len() <= HELD_DIRS, "{}", tree.dirs.len());
        assert_eq!(
            fs::read(dir.path().join(format!("{deep}/f"))).unwrap(),
            b"x"
        );
        assert_eq!(fs::read(dir.path().join("wide99/f")).unwrap(), b"y");
    }

    #[test]
    fn a_directory_opened_once_is_used_whatever_its_name_becomes() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir_all(ws.join("d")).unwrap();
        let mut tree = Tree::new(Root::open(&ws).unwrap());
        tree.write_file("d/a", b"a", 0o644).unwrap();
        // Swapped for a link after it was opened: the held directory is used.
        fs::rename(ws.join("d"), ws.join("moved")).unwrap();
        std::os::unix::fs::symlink(dir.path(), ws.join("d")).unwrap();
        tree.write_file("d/b", b"b", 0o644).unwrap();
        assert!(ws.join("moved/b").is_file());
        assert!(!dir.path().join("b").exists());
    }
}
