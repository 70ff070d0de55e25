//! Bind sources by descriptor.
//!
//! bubblewrap resolves a `--bind SRC` path when it sets the sandbox up, long
//! after the arguments were built, and follows symlinks: a command of the
//! same session swapping `.git` for a link in that window would get a host
//! directory mounted writable. So every bind that is not a fixed system
//! directory goes by descriptor (`--bind-fd N` / `--ro-bind-fd N`): the
//! arguments record each source's identity (device, inode) and type, the
//! process that execs bubblewrap opens them again (sources inside the
//! workspace beneath the workspace's descriptor, never following a link in
//! the last component), refuses any that is not the very object recorded, and
//! hands them over as descriptors `N`; bubblewrap then mounts exactly that
//! object and checks that it landed on its destination.
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use crate::confined::open_beneath;

/// The descriptor the first bind is handed over as; the rest follow.
pub(crate) const FIRST_BIND_FD: i32 = 10;

/// More would be a policy nobody writes; it also keeps the numbers low.
pub(crate) const MAX_BINDS: usize = 48;

/// Where a bind's source is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// An absolute path the server chose (the workspace, a skills folder).
    Path(PathBuf),
    /// A path inside the workspace (the first bind), which the agent controls.
    InWorkspace(PathBuf),
    /// A host mount's canonical path: opened without following a link in
    /// any component (`mounts::open_host`), so one planted there is refused.
    Mount(PathBuf),
}

/// One bind by descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FdBind {
    /// The descriptor number bubblewrap is told.
    pub(crate) fd: i32,
    pub(crate) source: Source,
    /// (device, inode) of the source when the arguments were built.
    pub(crate) identity: (u64, u64),
    pub(crate) directory: bool,
    /// A socket (the SSH agent's); only a server-chosen path may be one.
    pub(crate) socket: bool,
}

impl FdBind {
    /// Open `source` now and record what it is (with the descriptor opened);
    /// `None` when it is missing or neither a directory nor a regular file
    /// (nor, for a [`Source::Path`], a socket).
    pub(crate) fn record(
        fd: i32,
        source: Source,
        workspace: Option<&OwnedFd>,
    ) -> io::Result<Option<(Self, OwnedFd)>> {
        let opened = match open_source(&source, workspace) {
            Ok(opened) => opened,
            Err(err)
                if err.kind() == io::ErrorKind::NotFound
                    || err.raw_os_error() == Some(libc::ELOOP)
                    || err.raw_os_error() == Some(libc::ENOTDIR) =>
            {
                return Ok(None);
            }
            Err(err) if err.raw_os_error() == Some(libc::EXDEV) => {
                let shown = match &source {
                    Source::Path(path) | Source::InWorkspace(path) | Source::Mount(path) => {
                        path.display().to_string()
                    }
                };
                return Err(io::Error::other(format!(
                    "{shown} leads outside the workspace (it changed while the sandbox was being prepared); run the command again"
                )));
            }
            Err(err) => return Err(err),
        };
        let stat = rustix::fs::fstat(&opened)?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        let socket = kind == FileType::Socket && matches!(source, Source::Path(_));
        if !socket && kind != FileType::Directory && kind != FileType::RegularFile {
            return Ok(None);
        }
        let bind = Self {
            fd,
            source,
            identity: (stat.st_dev, stat.st_ino),
            directory: kind == FileType::Directory,
            socket,
        };
        Ok(Some((bind, opened)))
    }

    /// A host mount's bind: its host must be the very directory `pin` names
    /// (the one the server checked), else the sandbox is refused; a host
    /// missing or reached through a link is refused too, never skipped.
    pub(crate) fn record_mount(fd: i32, host: &Path, pin: (u64, u64)) -> io::Result<Self> {
        crate::mounts::open_pinned(host, pin)?;
        Ok(Self {
            fd,
            source: Source::Mount(host.to_path_buf()),
            identity: pin,
            directory: true,
            socket: false,
        })
    }
}

impl FdBind {
    fn file_type(&self) -> FileType {
        match (self.directory, self.socket) {
            (true, _) => FileType::Directory,
            (false, true) => FileType::Socket,
            (false, false) => FileType::RegularFile,
        }
    }
}

fn open_source(source: &Source, workspace: Option<&OwnedFd>) -> io::Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::CLOEXEC;
    match source {
        Source::Path(path) => Ok(rustix::fs::open(path, flags, Mode::empty())?),
        Source::Mount(path) => crate::mounts::open_host(path),
        Source::InWorkspace(rel) => {
            let workspace =
                workspace.ok_or_else(|| io::Error::other("no workspace to bind from"))?;
            open_beneath(
                workspace.as_fd(),
                rel,
                flags | OFlags::NOFOLLOW,
                Mode::empty(),
            )
        }
    }
}

/// Open every source again and check it is what was recorded. The first
/// bind must be the workspace when any source lies inside it.
pub(crate) fn open_all(binds: &[FdBind]) -> io::Result<Vec<(i32, OwnedFd)>> {
    let mut opened: Vec<(i32, OwnedFd)> = Vec::with_capacity(binds.len());
    for bind in binds {
        let workspace = opened.first().map(|(_, fd)| fd);
        let fd = open_source(&bind.source, workspace).map_err(|err| changed(bind, &err))?;
        let stat = rustix::fs::fstat(&fd)?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        let same_kind = kind == bind.file_type();
        if !same_kind || (stat.st_dev, stat.st_ino) != bind.identity {
            return Err(changed(bind, &io::Error::other("it was replaced")));
        }
        opened.push((bind.fd, fd));
    }
    Ok(opened)
}

fn changed(bind: &FdBind, err: &io::Error) -> io::Error {
    let shown = match &bind.source {
        Source::Path(path) | Source::InWorkspace(path) | Source::Mount(path) => {
            path.display().to_string()
        }
    };
    io::Error::other(format!(
        "{shown} changed while the sandbox was starting ({err}); run the command again"
    ))
}

/// The binds as trampoline arguments: a count, then five per bind.
pub(crate) fn to_args(binds: &[FdBind]) -> Vec<OsString> {
    let mut args = vec![OsString::from(binds.len().to_string())];
    for bind in binds {
        let (kind, path) = match &bind.source {
            Source::Path(path) => ("p", path),
            Source::InWorkspace(path) => ("w", path),
            Source::Mount(path) => ("m", path),
        };
        args.extend([
            OsString::from(bind.fd.to_string()),
            kind.into(),
            match bind.file_type() {
                FileType::Directory => "d",
                FileType::Socket => "s",
                _ => "f",
            }
            .into(),
            format!("{}:{}", bind.identity.0, bind.identity.1).into(),
            path.as_os_str().to_owned(),
        ]);
    }
    args
}

/// [`to_args`] read back; returns the binds and the arguments after them.
pub(crate) fn from_args(args: &[OsString]) -> Result<(Vec<FdBind>, &[OsString]), String> {
    let (count, rest) = args.split_first().ok_or("no bind count")?;
    let count: usize = text(count)?.parse().map_err(|_| "bad bind count")?;
    if count > MAX_BINDS || rest.len() < count * 5 {
        return Err("bad binds".into());
    }
    let (fields, rest) = rest.split_at(count * 5);
    let binds = fields
        .chunks(5)
        .map(|bind| {
            let fd: i32 = text(&bind[0])?.parse().map_err(|_| "bad bind fd")?;
            let path = PathBuf::from(&bind[4]);
            let source = match text(&bind[1])? {
                "p" => Source::Path(path),
                "w" => Source::InWorkspace(path),
                "m" => Source::Mount(path),
                other => return Err(format!("bad bind source kind {other:?}")),
            };
            let (dev, ino) = text(&bind[3])?.split_once(':').ok_or("bad bind identity")?;
            let identity = (
                dev.parse().map_err(|_| "bad bind device")?,
                ino.parse().map_err(|_| "bad bind inode")?,
            );
            Ok(FdBind {
                fd,
                source,
                identity,
                directory: text(&bind[2])? == "d",
                socket: text(&bind[2])? == "s",
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok((binds, rest))
}

fn text(arg: &OsStr) -> Result<&str, String> {
    arg.to_str().ok_or_else(|| "bad bind argument".to_string())
}

/// Move `opened` to their numbers (for a single-threaded process about to
/// exec): first out of the way above the range, then into place, open
/// across exec.
pub(crate) fn place(opened: Vec<(i32, OwnedFd)>) -> io::Result<Vec<OwnedFd>> {
    let above = FIRST_BIND_FD + MAX_BINDS as i32;
    let mut moved = Vec::with_capacity(opened.len());
    for (target, fd) in opened {
        moved.push((target, rustix::io::fcntl_dupfd_cloexec(&fd, above)?));
    }
    let mut kept = Vec::with_capacity(moved.len());
    for (target, fd) in moved {
        crate::pre_exec::dup_onto(&fd, target)?;
        kept.push(fd);
    }
    Ok(kept)
}

/// Replace the symbolic descriptor numbers in bubblewrap's `--bind-fd` and
/// `--ro-bind-fd` arguments by those the sources really have here.
pub(crate) fn renumber(args: &mut [OsString], opened: &[(i32, OwnedFd)]) {
    for index in 1..args.len() {
        if args[index - 1] != "--bind-fd" && args[index - 1] != "--ro-bind-fd" {
            continue;
        }
        let number = args[index].to_str().and_then(|n| n.parse::<i32>().ok());
        if let Some((_, fd)) = opened.iter().find(|(n, _)| Some(*n) == number) {
            args[index] = fd.as_raw_fd().to_string().into();
        }
    }
}

/// Point `--bind-fd N DEST` at `/tmp/N` (`--bind /tmp/N DEST`), where a
/// child that becomes the agent's user stages the source (`become_user`).
pub(crate) fn point_at_staged(args: &mut [OsString]) {
    for index in 1..args.len() {
        let flag = if args[index - 1] == "--bind-fd" {
            "--bind"
        } else if args[index - 1] == "--ro-bind-fd" {
            "--ro-bind"
        } else {
            continue;
        };
        if let Some(number) = args[index].to_str().and_then(|n| n.parse::<i32>().ok()) {
            args[index - 1] = flag.into();
            args[index] = format!("/tmp/{number}").into();
        }
    }
}

/// The workspace-relative form of a path inside `workspace`.
pub(crate) fn inside(workspace: &Path, path: &Path) -> Option<PathBuf> {
    path.strip_prefix(workspace).ok().map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_round_trip_through_arguments_and_refuse_a_replaced_source() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        let (first, ws_fd) = FdBind::record(10, Source::Path(ws.clone()), None)
            .unwrap()
            .unwrap();
        let (git, _) = FdBind::record(11, Source::InWorkspace(".git".into()), Some(&ws_fd))
            .unwrap()
            .unwrap();
        assert!(git.directory);
        let binds = vec![first, git];
        let mut args = to_args(&binds);
        args.push("bwrap".into());
        let (back, rest) = from_args(&args).unwrap();
        assert_eq!(back, binds);
        assert_eq!(rest, ["bwrap"]);
        assert_eq!(open_all(&binds).unwrap().len(), 2);

        // Swapped for a link to a directory outside: refused.
        std::fs::rename(ws.join(".git"), ws.join("real")).unwrap();
        std::os::unix::fs::symlink(tmp.path(), ws.join(".git")).unwrap();
        let err = open_all(&binds).unwrap_err();
        assert!(
            err.to_string()
                .contains("changed while the sandbox was starting"),
            "{err}"
        );
        // Replaced by another directory: refused.
        std::fs::remove_file(ws.join(".git")).unwrap();
        std::fs::create_dir(ws.join(".git")).unwrap();
        assert!(open_all(&binds).is_err());
        assert!(
            FdBind::record(12, Source::InWorkspace("missing".into()), Some(&ws_fd))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn renumbering_touches_only_descriptor_arguments() {
        let tmp = tempfile::tempdir().unwrap();
        let fd = rustix::fs::open(tmp.path(), OFlags::PATH, Mode::empty()).unwrap();
        let real = fd.as_raw_fd().to_string();
        let mut args: Vec<OsString> = [
            "--setenv",
            "X",
            "10",
            "--bind-fd",
            "10",
            "/ws",
            "--ro-bind-fd",
            "11",
            "/x",
        ]
        .map(OsString::from)
        .to_vec();
        renumber(&mut args, &[(10, fd)]);
        assert_eq!(args[2], "10");
        assert_eq!(args[4], real.as_str());
        assert_eq!(args[7], "11");
    }
}
