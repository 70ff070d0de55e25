//! A fork's copy of the folders checkpoints ignore (`.git`, `node_modules`,
//! …), by descriptors: the source's agent may swap any directory or file for
//! a symlink while the copy runs, so each directory is opened `O_NOFOLLOW`
//! beneath its parent's descriptor and listed through its own, links are
//! copied as links (never followed), files are opened `O_PATH` and checked
//! to be regular before they are read (a FIFO never blocks the copy), and
//! everything is created `O_EXCL | O_NOFOLLOW` beneath the target's
//! descriptors.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use agentd_sandbox::confined::{self, ConfinedError, FsIdentity, Root};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// Copies the top-level ignored folders of `source` (held open) into
/// `target` (a server-chosen workspace), as `identity` when given so the copies belong
/// to the fork's user and only what that user may read is read.
pub(super) fn copy_ignored(
    source: &Root,
    target: &Path,
    ignored: &[String],
    identity: Option<FsIdentity>,
) -> io::Result<()> {
    let target = Root::open(target)?;
    let work = || {
        for name in ignored {
            copy_tree(source.fd(), target.fd(), OsStr::new(name))?;
        }
        Ok(())
    };
    match identity {
        Some(identity) => identity.run(work)?,
        None => work(),
    }
}

/// A directory to copy: its name in both parents, held open.
struct Pending {
    source_parent: Arc<OwnedFd>,
    target_parent: Arc<OwnedFd>,
    name: OsString,
    depth: usize,
}

/// Deeper directories are not copied: every level still to be copied holds
/// two descriptors, and an agent can nest directories without end.
const MAX_DEPTH: usize = 128;

/// Copy the directory `name` of `source` (if it is a real one) to `target`.
/// Depth-first with a stack, not recursion: an agent's tree can be deeper
/// than a thread's stack; siblings share their parents' descriptors.
fn copy_tree(source: BorrowedFd<'_>, target: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let mut stack = vec![Pending {
        source_parent: Arc::new(source.try_clone_to_owned()?),
        target_parent: Arc::new(target.try_clone_to_owned()?),
        name: name.to_os_string(),
        depth: 1,
    }];
    while let Some(dir) = stack.pop() {
        let flags = OFlags::RDONLY
            | OFlags::DIRECTORY
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::CLOEXEC;
        let from = match rustix::fs::openat(&*dir.source_parent, &dir.name, flags, Mode::empty()) {
            Ok(fd) => Arc::new(fd),
            // Gone, or not a real directory (a link swapped in): not copied.
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => continue,
            Err(e) => return Err(e.into()),
        };
        match rustix::fs::mkdirat(&*dir.target_parent, &dir.name, Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let to = rustix::fs::openat(
            &*dir.target_parent,
            &dir.name,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let to = Arc::new(to);
        let mut listing = rustix::fs::Dir::read_from(&*from)?;
        while let Some(entry) = listing.read() {
            let entry = entry?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let stat = match rustix::fs::statat(&*from, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => stat,
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(e.into()),
            };
            match confined::file_type(&stat) {
                FileType::Directory if dir.depth >= MAX_DEPTH => {
                    tracing::warn!(depth = dir.depth, "not copying directories nested deeper");
                }
                FileType::Directory => stack.push(Pending {
                    source_parent: Arc::clone(&from),
                    target_parent: Arc::clone(&to),
                    name: name.to_os_string(),
                    depth: dir.depth + 1,
                }),
                FileType::Symlink => copy_link(from.as_fd(), to.as_fd(), name)?,
                FileType::RegularFile => copy_file(from.as_fd(), to.as_fd(), name)?,
                // FIFOs, sockets, devices: nothing to copy.
                _ => {}
            }
        }
    }
    Ok(())
}

fn copy_link(from: BorrowedFd<'_>, to: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let target = match rustix::fs::readlinkat(from, name, Vec::new()) {
        Ok(target) => target,
        // Gone, or no longer a link.
        Err(Errno::NOENT | Errno::INVAL) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    rustix::fs::symlinkat(target.as_c_str(), to, name)?;
    Ok(())
}

/// Copy the regular file `name`, streamed, with its permission bits.
fn copy_file(from: BorrowedFd<'_>, to: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let (mut source, stat) = match confined::open_regular_no_links(from, Path::new(name)) {
        Ok(opened) => opened,
        // Swapped for something else since the listing: not a file to copy.
        Err(ConfinedError::Kind { .. }) => return Ok(()),
        Err(ConfinedError::Io(e))
            if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ELOOP)) =>
        {
            return Ok(());
        }
        Err(ConfinedError::Io(e)) => return Err(e),
        Err(e) => return Err(io::Error::other(e.to_string())),
    };
    let created = rustix::fs::openat(
        to,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut copy = File::from(created);
    io::copy(&mut source, &mut copy)?;
    rustix::fs::fchmod(&copy, Mode::from_raw_mode(stat.st_mode & 0o7777))?;
    Ok(())
}
