//! The per-component walk used where the kernel has no `openat2` (before
//! 5.6): every component is opened with `O_NOFOLLOW` under the previous
//! one's descriptor, symlinks are read and spliced in by hand, `..` pops the
//! walked stack, and anything that would leave the root (an absolute link, a
//! `..` at the root) is refused with `EXDEV`, as `RESOLVE_BENEATH` refuses it.
use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

/// Linux gives up after 40 links (ELOOP); so does the walk.
const MAX_LINKS: usize = 40;

/// Open `rel` beneath `root`. Unless `follow_links`, a link in any component
/// is refused with `ELOOP` (the last one too, unless `flags` has
/// `O_PATH | O_NOFOLLOW`: then the link itself is opened), as
/// `RESOLVE_NO_SYMLINKS` refuses it.
pub(crate) fn open(
    root: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
    follow_links: bool,
) -> Result<OwnedFd, Errno> {
    let mut pending = components(rel)?;
    let mut stack: Vec<OwnedFd> = Vec::new();
    let mut links = 0;
    let follow_last = !flags.contains(OFlags::NOFOLLOW);
    loop {
        let current = stack.last().map_or(root, |fd| fd.as_fd());
        let Some(name) = pending.pop_front() else {
            // The path named a directory already walked (the root, or via `..`).
            return rustix::fs::openat(current, ".", flags | OFlags::CLOEXEC, mode);
        };
        if name == ".." {
            stack.pop().ok_or(Errno::XDEV)?;
            continue;
        }
        if pending.is_empty() {
            let opened = rustix::fs::openat(
                current,
                name.as_os_str(),
                flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                mode,
            );
            let is_link = match &opened {
                Err(Errno::LOOP) => true,
                // `O_PATH | O_NOFOLLOW` opens the link itself.
                Ok(fd) if flags.contains(OFlags::PATH) => is_symlink(fd)?,
                _ => false,
            };
            if !(is_link && follow_last) {
                return opened;
            }
            if !follow_links {
                return Err(Errno::LOOP);
            }
            splice_link(current, &name, &mut pending, &mut links)?;
            continue;
        }
        let fd = rustix::fs::openat(
            current,
            name.as_os_str(),
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        match FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) {
            FileType::Directory => stack.push(fd),
            FileType::Symlink if !follow_links => return Err(Errno::LOOP),
            FileType::Symlink => splice_link(current, &name, &mut pending, &mut links)?,
            _ => return Err(Errno::NOTDIR),
        }
    }
}

fn is_symlink(fd: &OwnedFd) -> Result<bool, Errno> {
    let stat = rustix::fs::fstat(fd)?;
    Ok(FileType::from_raw_mode(stat.st_mode) == FileType::Symlink)
}

/// Put the target of the link `name` (in `dir`) in front of what is left.
fn splice_link(
    dir: BorrowedFd<'_>,
    name: &OsString,
    pending: &mut VecDeque<OsString>,
    links: &mut usize,
) -> Result<(), Errno> {
    *links += 1;
    if *links > MAX_LINKS {
        return Err(Errno::LOOP);
    }
    let target = rustix::fs::readlinkat(dir, name.as_os_str(), Vec::new())?;
    let target = Path::new(std::ffi::OsStr::from_bytes(target.to_bytes()));
    let mut spliced = components(target)?;
    spliced.extend(pending.drain(..));
    *pending = spliced;
    Ok(())
}

/// The names and `..`s of a relative path; an absolute one leaves the root.
fn components(path: &Path) -> Result<VecDeque<OsString>, Errno> {
    let mut out = VecDeque::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => out.push_back(name.to_os_string()),
            Component::ParentDir => out.push_back(OsString::from("..")),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return Err(Errno::XDEV),
        }
    }
    Ok(out)
}
