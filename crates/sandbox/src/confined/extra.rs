//! Confined operations through real directories only: a symbolic link on
//! the way is refused, not followed, even one that stays beneath the root.
//! Checkpoint scans and restores (and copies of a workspace) record and
//! restore links as links, so a link where they expect a directory or a
//! file means the tree changed under them; following it, even inside the
//! workspace, would read or write another file than the one they named.
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` does it in one call; a
//! kernel without `openat2` gets a per-component `O_NOFOLLOW` walk with the
//! same verdicts (`ELOOP` for a link, `EXDEV` for a way out).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, Stat};

use super::{
    ConfinedError, Written, file_type, fstat, open_resolving, opened, regular_from, write_atomic,
};

/// Open `rel` beneath `dir` through real directories only. A link in any
/// component is refused with `ELOOP`, except a last one when `flags` has
/// both `O_PATH` and `O_NOFOLLOW` (then the link itself is opened, as
/// `openat2` does); `..` may not leave `dir` (`EXDEV`).
pub fn open_no_links(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    open_resolving(dir, rel, flags, mode, resolve)
}

/// Open the absolute `path` from `/` through real directories only (see
/// [`open_no_links`]): what it reaches is the object at that very path,
/// whoever may rename its parents, or an error (`ELOOP` for a link).
pub fn open_absolute_no_links(path: &Path, flags: OFlags) -> io::Result<OwnedFd> {
    let rel = path
        .strip_prefix("/")
        .map_err(|_| io::Error::other(format!("{} is not absolute", path.display())))?;
    let top = rustix::fs::open(
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    open_no_links(top.as_fd(), rel, flags, Mode::empty())
}

/// The walk `open_no_links` falls back on, for tests of it on kernels that
/// have `openat2`.
#[doc(hidden)]
pub fn open_no_links_by_walk(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    super::walk::open(dir, rel, flags, mode, false).map_err(io::Error::from)
}

/// Open `rel` for reading through real directories only, if it is a regular
/// file; a link anywhere on the way fails with `ELOOP`. As `open_regular`,
/// nothing but an `O_PATH` descriptor is opened before the type is known,
/// so a FIFO or a device is refused without blocking.
pub fn open_regular_no_links(
    dir: BorrowedFd<'_>,
    rel: &Path,
) -> Result<(File, Stat), ConfinedError> {
    regular_from(no_links(dir, rel, OFlags::PATH)?)
}

/// [`open_no_links`] with no mode, for a confined operation.
fn no_links(dir: BorrowedFd<'_>, rel: &Path, flags: OFlags) -> Result<OwnedFd, ConfinedError> {
    opened(open_no_links(dir, rel, flags, Mode::empty()))
}

/// Set the permission bits of `rel` beneath `dir` (reached through real
/// directories) unless it is a link: `chmod` follows links, so the very inode
/// looked at is changed, through its descriptor. Returns whether it was
/// changed (`false` for a link).
pub fn set_mode_no_follow(
    dir: BorrowedFd<'_>,
    rel: &Path,
    mode: u32,
) -> Result<bool, ConfinedError> {
    let fd = no_links(dir, rel, OFlags::PATH | OFlags::NOFOLLOW)?;
    if file_type(&fstat(&fd)?) == FileType::Symlink {
        return Ok(false);
    }
    // `fchmod` refuses an `O_PATH` descriptor; its /proc link reaches the
    // same inode without a name in between.
    let proc_path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::chmod(proc_path.as_str(), Mode::from_raw_mode(mode & 0o7777))
        .map_err(io::Error::from)?;
    Ok(true)
}

/// Write `bytes` as the file `rel` beneath `dir` (see [`write_atomic`]),
/// making missing directories on the way, through real directories only: a
/// link on the way fails with `ELOOP`, one at the name is refused, and `rel`
/// may hold only plain names (no `..`, nothing absolute).
pub fn write_atomic_no_links(
    dir: BorrowedFd<'_>,
    rel: &Path,
    bytes: &[u8],
) -> Result<Written, ConfinedError> {
    let Some(name) = rel.file_name() else {
        return Err(ConfinedError::Kind {
            found: "a directory",
            wanted: "a file name",
        });
    };
    let mut parent = no_links(dir, Path::new("."), OFlags::PATH | OFlags::DIRECTORY)?;
    for component in rel.parent().unwrap_or(Path::new("")).components() {
        let part = match component {
            std::path::Component::Normal(part) => part,
            std::path::Component::CurDir => continue,
            _ => return Err(ConfinedError::Escapes),
        };
        match rustix::fs::mkdirat(&parent, part, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(err) => return Err(ConfinedError::Io(err.into())),
        }
        let flags = OFlags::PATH | OFlags::DIRECTORY;
        parent = no_links(parent.as_fd(), Path::new(part), flags)?;
    }
    write_atomic(parent.as_fd(), Path::new(name), bytes, false)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::super::Root;
    use super::*;

    type Opener = fn(BorrowedFd<'_>, &Path, OFlags, Mode) -> io::Result<OwnedFd>;

    fn errno(result: io::Result<OwnedFd>) -> Option<i32> {
        result.err().and_then(|err| err.raw_os_error())
    }

    /// The same verdicts from `openat2` and from the walk: real dirs pass,
    /// any link is refused, even one that stays inside.
    #[test]
    fn writes_through_real_directories_only() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        symlink("sub", ws.join("dir_link")).unwrap();
        symlink("../outside", ws.join("out_link")).unwrap();
        let root = Root::open(&ws).unwrap();
        let write = |rel: &str| write_atomic_no_links(root.fd(), Path::new(rel), b"x");
        write("new/deep/a.png").unwrap();
        assert_eq!(std::fs::read(ws.join("new/deep/a.png")).unwrap(), b"x");
        match write("dir_link/a.png") {
            Err(ConfinedError::Io(err)) => assert_eq!(err.raw_os_error(), Some(libc::ELOOP)),
            other => panic!("{other:?}"),
        }
        assert!(matches!(write("out_link"), Err(ConfinedError::Kind { .. })));
        assert!(matches!(write("sub/../../x"), Err(ConfinedError::Escapes)));
        assert!(!tmp.path().join("outside").exists() && !tmp.path().join("x").exists());
    }

    #[test]
    fn both_ways_refuse_every_link() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("sub/deeper")).unwrap();
        std::fs::write(ws.join("sub/file"), "inside").unwrap();
        std::fs::write(tmp.path().join("secret"), "outside").unwrap();
        symlink("sub", ws.join("dir_link")).unwrap();
        symlink("sub/file", ws.join("file_link")).unwrap();
        let root = Root::open(&ws).unwrap();
        for open in [open_no_links as Opener, open_no_links_by_walk as Opener] {
            let read = |rel: &str| open(root.fd(), Path::new(rel), OFlags::RDONLY, Mode::empty());
            let fd = read("sub/file").unwrap();
            let text = std::fs::read_to_string(format!("/proc/self/fd/{}", fd.as_raw_fd()));
            assert_eq!(text.unwrap(), "inside");
            assert!(read("sub/deeper/../file").is_ok());
            for link in ["dir_link/file", "file_link"] {
                assert_eq!(errno(read(link)), Some(libc::ELOOP), "{link}");
            }
            for out in ["../secret", "sub/../../secret", "/etc/hostname"] {
                assert_eq!(errno(read(out)), Some(libc::EXDEV), "{out}");
            }
            assert_eq!(errno(read("sub/file/x")), Some(libc::ENOTDIR));
            let path_only =
                |rel: &str, flags| open(root.fd(), Path::new(rel), flags, Mode::empty());
            assert_eq!(
                errno(path_only("file_link", OFlags::PATH)),
                Some(libc::ELOOP)
            );
            let link = path_only("file_link", OFlags::PATH | OFlags::NOFOLLOW).unwrap();
            let stat = rustix::fs::fstat(&link).unwrap();
            assert_eq!(file_type(&stat), FileType::Symlink);
        }
    }

    #[test]
    fn regular_files_only_and_a_fifo_does_not_block() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        std::fs::write(tmp.path().join("d/f"), "x").unwrap();
        symlink("d", tmp.path().join("l")).unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            tmp.path().join("fifo"),
            Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let root = Root::open(tmp.path()).unwrap();
        let (_, stat) = open_regular_no_links(root.fd(), Path::new("d/f")).unwrap();
        assert_eq!(stat.st_size, 1);
        let err = open_regular_no_links(root.fd(), Path::new("fifo")).unwrap_err();
        assert!(matches!(err, ConfinedError::Kind { found, .. } if found.contains("FIFO")));
        let err = open_regular_no_links(root.fd(), Path::new("l/f")).unwrap_err();
        let ConfinedError::Io(err) = err else {
            panic!("{err}")
        };
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP));
    }

    #[test]
    fn modes_are_set_on_the_entry_never_through_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("target");
        std::fs::write(&target, "x").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::create_dir(tmp.path().join("ws")).unwrap();
        std::fs::write(tmp.path().join("ws/f"), "y").unwrap();
        symlink(&target, tmp.path().join("ws/link")).unwrap();
        let root = Root::open(&tmp.path().join("ws")).unwrap();
        assert!(set_mode_no_follow(root.fd(), Path::new("f"), 0o600).unwrap());
        assert!(!set_mode_no_follow(root.fd(), Path::new("link"), 0o600).unwrap());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&tmp.path().join("ws/f")), 0o600);
        assert_eq!(mode(&target), 0o644);
    }
}
