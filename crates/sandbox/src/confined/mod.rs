//! Host file operations done on an agent's behalf, immune to path swaps.
//!
//! A path is never trusted twice: every operation starts from a descriptor
//! of an allowed root ([`Root`]) and opens what it needs beneath it with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, so the kernel itself
//! refuses any resolution that leaves the root, whatever a concurrent command
//! swaps in meanwhile (symlinks that stay inside keep working). A kernel
//! without `openat2` gets a per-component `O_NOFOLLOW` walk with the same
//! verdicts (`walk`). Files are opened `O_PATH` first and `fstat`ed: what is
//! not a regular file (a FIFO, a device, a socket) is refused before anything
//! could block on it; creation is `O_CREAT | O_EXCL | O_NOFOLLOW` under the
//! parent's descriptor, and a write replaces the file atomically by a rename
//! within that directory. Reads are bounded by their callers.
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;

mod extra;
mod identity;
mod walk;

pub use extra::{
    open_absolute_no_links, open_no_links, open_no_links_by_walk, open_regular_no_links,
    set_mode_no_follow, write_atomic_no_links,
};
pub use identity::{FsIdentity, as_user};

/// How often `openat2` is retried when the kernel saw a concurrent rename
/// during a `RESOLVE_BENEATH` lookup (it answers `EAGAIN` then).
const RETRIES: usize = 64;

static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// A directory that operations are confined to, held open.
#[derive(Debug, Clone)]
pub struct Root {
    path: PathBuf,
    fd: Arc<OwnedFd>,
}

impl Root {
    /// Open `path` (an absolute path the server, not the agent, chose) as a root.
    pub fn open(path: &Path) -> io::Result<Self> {
        let fd = rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self {
            path: path.to_path_buf(),
            fd: Arc::new(fd),
        })
    }

    /// Open the canonical absolute `path` from `/` through real directories
    /// only: a link in any component is refused (`ELOOP`), so what is opened
    /// is the directory at that very path, whoever may rename its parents.
    pub fn open_no_links(path: &Path) -> io::Result<Self> {
        let fd = extra::open_absolute_no_links(path, OFlags::PATH | OFlags::DIRECTORY)?;
        Ok(Self {
            path: path.to_path_buf(),
            fd: Arc::new(fd),
        })
    }

    /// A host mount's directory as a root: opened through real directories
    /// only and refused unless it is the very object `pin` names.
    pub fn open_pinned(path: &Path, pin: (u64, u64)) -> io::Result<Self> {
        let fd = crate::mounts::open_pinned(path, pin)?;
        Ok(Self {
            path: path.to_path_buf(),
            fd: Arc::new(fd),
        })
    }

    /// (device, inode) of the directory held open.
    pub fn identity(&self) -> io::Result<(u64, u64)> {
        let stat = rustix::fs::fstat(&*self.fd)?;
        Ok((stat.st_dev, stat.st_ino))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// `absolute` relative to this root, when it lies inside it.
    pub fn relative<'a>(&self, absolute: &'a Path) -> Option<&'a Path> {
        absolute.strip_prefix(&self.path).ok()
    }
}

/// Open `rel` beneath the directory `dir`: symlinks are followed only while
/// they stay beneath it, magic links never. `flags` may add `O_NOFOLLOW` to
/// refuse a link in the last component.
pub fn open_beneath(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    open_resolving(dir, rel, flags, mode, resolve)
}

/// `openat2(dir, rel, flags, resolve)`, retried while the kernel saw a
/// concurrent rename, or the walk where there is no `openat2` (with the same
/// verdicts: it refuses every link when `resolve` has `RESOLVE_NO_SYMLINKS`).
/// An absolute `rel` leaves `dir` (`EXDEV`); an empty one is `dir` itself.
pub(crate) fn open_resolving(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
    resolve: ResolveFlags,
) -> io::Result<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    if rel.is_absolute() {
        return Err(Errno::XDEV.into());
    }
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        for _ in 0..RETRIES {
            match rustix::fs::openat2(dir, rel, flags | OFlags::CLOEXEC, mode, resolve) {
                Err(Errno::AGAIN) => continue,
                Err(Errno::NOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                    break;
                }
                other => return other.map_err(io::Error::from),
            }
        }
        if !NO_OPENAT2.load(Ordering::Relaxed) {
            return Err(Errno::AGAIN.into());
        }
    }
    let follow_links = !resolve.contains(ResolveFlags::NO_SYMLINKS);
    walk::open(dir, rel, flags, mode, follow_links).map_err(io::Error::from)
}

/// The walk `open_beneath` falls back on, for tests of it on kernels that
/// have `openat2`.
#[doc(hidden)]
pub fn open_beneath_by_walk(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    walk::open(dir, rel, flags, mode, true).map_err(io::Error::from)
}

/// What a confined operation refuses, besides the kernel's own errors.
#[derive(Debug, thiserror::Error)]
pub enum ConfinedError {
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The path names something other than what the operation works on.
    #[error("it is {found}, not {wanted}")]
    Kind {
        found: &'static str,
        wanted: &'static str,
    },
    /// The path would leave the allowed root.
    #[error("it leads outside the workspace")]
    Escapes,
    /// A write on a read-only mount.
    #[error("it is on a read-only mount")]
    ReadOnly,
    /// More than the caller's bound.
    #[error("it is {size} bytes, more than the {limit} bytes that can be read at once")]
    TooLarge { size: u64, limit: u64 },
}

impl ConfinedError {
    fn from_io(err: io::Error) -> Self {
        match err.raw_os_error() {
            Some(code) if code == libc::EXDEV => ConfinedError::Escapes,
            _ => ConfinedError::Io(err),
        }
    }

    /// The underlying I/O error kind (NotFound and the like), if any.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            ConfinedError::Io(err) => Some(err.kind()),
            _ => None,
        }
    }
}

fn opened(result: io::Result<OwnedFd>) -> Result<OwnedFd, ConfinedError> {
    result.map_err(ConfinedError::from_io)
}

/// [`open_beneath`] with no mode, for a confined operation.
fn beneath(dir: BorrowedFd<'_>, rel: &Path, flags: OFlags) -> Result<OwnedFd, ConfinedError> {
    opened(open_beneath(dir, rel, flags, Mode::empty()))
}

fn fstat(fd: &OwnedFd) -> Result<Stat, ConfinedError> {
    Ok(rustix::fs::fstat(fd).map_err(io::Error::from)?)
}

/// A word for a file type, for errors.
pub fn kind_name(file_type: FileType) -> &'static str {
    match file_type {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO (named pipe)",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "a special file",
    }
}

pub fn file_type(stat: &Stat) -> FileType {
    FileType::from_raw_mode(stat.st_mode)
}

/// Metadata of `rel` beneath `dir`, following links within (like `stat`).
pub fn stat_beneath(dir: BorrowedFd<'_>, rel: &Path) -> Result<Stat, ConfinedError> {
    fstat(&beneath(dir, rel, OFlags::PATH)?)
}

/// Metadata of `rel` itself (a last-component link is not followed).
pub fn lstat_beneath(dir: BorrowedFd<'_>, rel: &Path) -> Result<Stat, ConfinedError> {
    fstat(&beneath(dir, rel, OFlags::PATH | OFlags::NOFOLLOW)?)
}

/// Open `rel` for reading, only if it is a regular file. Nothing but an
/// `O_PATH` descriptor is opened before the type is known, so a FIFO or a
/// device is refused without blocking or touching its driver.
pub fn open_regular(dir: BorrowedFd<'_>, rel: &Path) -> Result<(File, Stat), ConfinedError> {
    regular_from(beneath(dir, rel, OFlags::PATH)?)
}

/// The regular file behind the `O_PATH` descriptor `path_fd`, opened for
/// reading; anything else is refused by its type.
pub(crate) fn regular_from(path_fd: OwnedFd) -> Result<(File, Stat), ConfinedError> {
    let stat = fstat(&path_fd)?;
    let found = file_type(&stat);
    if found != FileType::RegularFile {
        return Err(ConfinedError::Kind {
            found: kind_name(found),
            wanted: "a regular file",
        });
    }
    let file = reopen(&path_fd, OFlags::RDONLY)?;
    Ok((file, stat))
}

/// Open the very inode behind an `O_PATH` descriptor with real access.
fn reopen(path_fd: &OwnedFd, flags: OFlags) -> io::Result<File> {
    use std::os::fd::AsRawFd;
    let proc_path = format!("/proc/self/fd/{}", path_fd.as_raw_fd());
    let fd = rustix::fs::open(
        proc_path.as_str(),
        flags | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// Read all of a regular file, refusing one over `limit` bytes.
pub fn read_regular(dir: BorrowedFd<'_>, rel: &Path, limit: u64) -> Result<Vec<u8>, ConfinedError> {
    use std::io::Read as _;
    let (file, stat) = open_regular(dir, rel)?;
    let size = stat.st_size as u64;
    if size > limit {
        return Err(ConfinedError::TooLarge { size, limit });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // One byte past the limit tells a file that grew meanwhile.
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(ConfinedError::TooLarge {
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

/// Open the directory `rel` beneath `dir` for listing.
pub fn open_dir(dir: BorrowedFd<'_>, rel: &Path) -> Result<OwnedFd, ConfinedError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK;
    match beneath(dir, rel, flags) {
        Err(ConfinedError::Io(err)) if err.raw_os_error() == Some(libc::ENOTDIR) => {
            let found = stat_beneath(dir, rel).map(|stat| kind_name(file_type(&stat)));
            Err(ConfinedError::Kind {
                found: found.unwrap_or("not a directory"),
                wanted: "a directory",
            })
        }
        other => other,
    }
}

/// Create every missing directory of `rel` beneath `dir` (mode 0755 less the
/// umask) and return the last one, opened `O_PATH`.
pub fn create_dir_all(dir: BorrowedFd<'_>, rel: &Path) -> Result<OwnedFd, ConfinedError> {
    let mut current = beneath(dir, Path::new("."), OFlags::PATH | OFlags::DIRECTORY)?;
    for component in rel.components() {
        let name = match component {
            std::path::Component::Normal(name) => name,
            std::path::Component::CurDir => continue,
            _ => return Err(ConfinedError::Escapes),
        };
        match rustix::fs::mkdirat(&current, name, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(err) => return Err(ConfinedError::Io(err.into())),
        }
        current = beneath(
            current.as_fd(),
            Path::new(name),
            OFlags::PATH | OFlags::DIRECTORY,
        )?;
    }
    Ok(current)
}

/// How a write went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Created,
    Replaced,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Write `bytes` as the file `rel` beneath `dir`, atomically: a new file is
/// made next to it (`O_CREAT | O_EXCL | O_NOFOLLOW` under the parent's
/// descriptor) and renamed over the name, so a reader sees the old content
/// or the new, and a link swapped in at the name is replaced, never followed.
/// An existing regular file keeps its permission bits; anything else at the
/// name (a directory, a FIFO, a link) is refused. Missing parent directories
/// are created when `create_parents`.
pub fn write_atomic(
    dir: BorrowedFd<'_>,
    rel: &Path,
    bytes: &[u8],
    create_parents: bool,
) -> Result<Written, ConfinedError> {
    let Some(name) = rel.file_name() else {
        return Err(ConfinedError::Kind {
            found: "a directory",
            wanted: "a file name",
        });
    };
    let parent_rel = rel.parent().unwrap_or(Path::new(""));
    let parent = if create_parents {
        create_dir_all(dir, parent_rel)?
    } else {
        beneath(dir, parent_rel, OFlags::PATH | OFlags::DIRECTORY)?
    };
    let existing = match rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Some(stat),
        Err(Errno::NOENT) => None,
        Err(err) => return Err(ConfinedError::Io(err.into())),
    };
    if let Some(stat) = &existing {
        let found = file_type(stat);
        if found != FileType::RegularFile {
            return Err(ConfinedError::Kind {
                found: kind_name(found),
                wanted: "a regular file",
            });
        }
    }
    let permissions = existing.map_or(0o644, |stat| stat.st_mode & 0o7777);
    // Of a fixed length: a long name must still fit in NAME_MAX.
    let temp_name = format!(
        ".agentd-{}-{}.tmp",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let temp = rustix::fs::openat(
        &parent,
        temp_name.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(io::Error::from)?;
    let result = fill_and_rename(temp, &parent, &temp_name, name, bytes, permissions);
    if result.is_err() {
        let _ = rustix::fs::unlinkat(&parent, temp_name.as_str(), AtFlags::empty());
    }
    result?;
    Ok(if existing.is_some() {
        Written::Replaced
    } else {
        Written::Created
    })
}

fn fill_and_rename(
    temp: OwnedFd,
    parent: &OwnedFd,
    temp_name: &str,
    name: &std::ffi::OsStr,
    bytes: &[u8],
    permissions: u32,
) -> io::Result<()> {
    use std::io::Write as _;
    let mut file = File::from(temp);
    file.write_all(bytes)?;
    rustix::fs::fchmod(&file, Mode::from_raw_mode(permissions))?;
    rustix::fs::renameat(parent, temp_name, parent, name)?;
    Ok(())
}

/// One entry of a directory listing.
#[derive(Debug, Clone)]
pub struct DirEntry {
    pub name: std::ffi::OsString,
    /// The entry's own metadata (a link is not followed); `None` when it
    /// vanished between the listing and the look.
    pub stat: Option<Stat>,
}

/// The entries of the directory `rel` beneath `dir` (without `.` and `..`),
/// each looked at through the directory's descriptor.
pub fn list_dir(dir: BorrowedFd<'_>, rel: &Path) -> Result<Vec<DirEntry>, ConfinedError> {
    let fd = open_dir(dir, rel)?;
    let mut entries = Vec::new();
    let mut listing = rustix::fs::Dir::read_from(&fd).map_err(io::Error::from)?;
    while let Some(entry) = listing.read() {
        let entry = entry.map_err(io::Error::from)?;
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        let stat = rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW).ok();
        use std::os::unix::ffi::OsStrExt;
        entries.push(DirEntry {
            name: std::ffi::OsStr::from_bytes(name.to_bytes()).to_os_string(),
            stat,
        });
    }
    Ok(entries)
}

/// The target of the link `rel` beneath `dir` (its parent walked confined).
pub fn read_link(dir: BorrowedFd<'_>, rel: &Path) -> Result<PathBuf, ConfinedError> {
    use std::os::unix::ffi::OsStrExt;
    let name = rel.file_name().ok_or(ConfinedError::Escapes)?;
    let parent_rel = rel.parent().unwrap_or(Path::new(""));
    let parent = beneath(dir, parent_rel, OFlags::PATH | OFlags::DIRECTORY)?;
    let target = rustix::fs::readlinkat(&parent, name, Vec::new()).map_err(io::Error::from)?;
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(
        target.to_bytes(),
    )))
}

#[cfg(test)]
mod tests;
