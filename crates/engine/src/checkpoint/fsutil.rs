//! File operations that never follow a symlink: reading for hashes, and the
//! restore's writes (temp file + rename under a parent checked to be a real dir).

use std::collections::HashSet;
use std::fs::{self, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::CheckpointError;
use super::manifest::{ancestors, sha256_hex};

/// What reading a file for its hash found.
pub(crate) enum Content {
    Read {
        hash: String,
        bytes: Vec<u8>,
    },
    TooLarge(u64),
    /// Turned into something that is not a regular file since the scan.
    NotAFile,
    Gone,
    Unreadable(io::Error),
}

/// Read a regular file (at most `max` bytes) without following a symlink and
/// without blocking on a fifo swapped in since the scan.
pub(crate) fn read_file(path: &Path, max: u64, size_hint: u64) -> Content {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Content::Gone,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Content::NotAFile,
        Err(e) => return Content::Unreadable(e),
    };
    match file.metadata() {
        Ok(meta) if !meta.is_file() => return Content::NotAFile,
        Ok(_) => {}
        Err(e) => return Content::Unreadable(e),
    }
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

/// The restore's view of which directories are real (not symlinks): every
/// ancestor of a path is checked once with lstat before anything under it is
/// touched, so a write never lands outside the workspace through a symlink.
pub(crate) struct SafeDirs {
    pub(crate) root: PathBuf,
    ok: HashSet<String>,
}

impl SafeDirs {
    pub(crate) fn new(root: PathBuf) -> Self {
        Self {
            root,
            ok: HashSet::new(),
        }
    }

    pub(crate) fn abs(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Fails unless every proper ancestor of `rel` is a real directory.
    pub(crate) fn check_parent(&mut self, rel: &str) -> Result<(), CheckpointError> {
        let mut pending: Vec<&str> = Vec::new();
        for dir in ancestors(rel) {
            if self.ok.contains(dir) {
                break;
            }
            pending.push(dir);
        }
        for dir in pending.into_iter().rev() {
            let meta = fs::symlink_metadata(self.abs(dir))
                .map_err(|e| CheckpointError::io(&self.abs(dir), e))?;
            if !meta.file_type().is_dir() {
                return Err(CheckpointError::Conflict {
                    path: rel.to_string(),
                    reason: format!("parent {dir} is not a directory (symlinks are not followed)"),
                });
            }
            self.ok.insert(dir.to_string());
        }
        Ok(())
    }

    pub(crate) fn forget(&mut self, dir: &str) {
        self.ok.remove(dir);
    }
}

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// A fresh temp name beside `path` (fixed length, so a long file name cannot
/// push it over NAME_MAX).
fn temp_name(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("."));
    let n = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".agentd-restore-{}-{n}.tmp", std::process::id()))
}

/// Create something at a fresh temp name beside `path`, retrying on a clash.
fn create_temp<T>(
    path: &Path,
    mut create: impl FnMut(&Path) -> io::Result<T>,
) -> io::Result<(PathBuf, T)> {
    loop {
        let tmp = temp_name(path);
        match create(&tmp) {
            Ok(made) => return Ok((tmp, made)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Replace whatever non-directory is at `path` with a file of these bytes and mode.
pub(crate) fn write_file(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let (tmp, mut file) = create_temp(path, |tmp| {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(tmp)
    })?;
    let result = file
        .write_all(bytes)
        .and_then(|()| file.set_permissions(Permissions::from_mode(mode)))
        .and_then(|()| {
            drop(file);
            fs::rename(&tmp, path)
        });
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Replace whatever non-directory is at `path` with a symlink to `target`.
pub(crate) fn write_symlink(path: &Path, target: &str) -> io::Result<()> {
    let (tmp, ()) = create_temp(path, |tmp| std::os::unix::fs::symlink(target, tmp))?;
    let result = fs::rename(&tmp, path);
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_symlinked_parent_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, outside) = (dir.path().join("ws"), dir.path().join("outside"));
        fs::create_dir_all(ws.join("real")).unwrap();
        fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("link")).unwrap();
        let mut safe = SafeDirs::new(ws);
        assert!(safe.check_parent("real/f").is_ok());
        let err = safe.check_parent("link/sub/f").unwrap_err().to_string();
        assert!(
            err.starts_with("link/sub/f: parent link is not a directory"),
            "{err}"
        );
    }

    #[test]
    fn writes_replace_a_symlink_instead_of_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.txt");
        fs::write(&target, "outside").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_file(&link, b"inside", 0o640).unwrap();
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
}
