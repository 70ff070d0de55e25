//! Building the descriptor-bound part of a sandbox's bubblewrap arguments:
//! the numbered list of binds and the `.git` protection.
use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::binds::{FIRST_BIND_FD, FdBind, MAX_BINDS, Source};
use crate::confined::{FsIdentity, open_beneath};
use crate::policy::Policy;

/// The binds of one sandbox, numbered from [`FIRST_BIND_FD`].
#[derive(Default)]
pub(crate) struct BindList {
    pub(crate) list: Vec<FdBind>,
}

impl BindList {
    fn next_fd(&self) -> std::io::Result<i32> {
        if self.list.len() >= MAX_BINDS {
            return Err(std::io::Error::other(
                "too many paths to bind into the sandbox",
            ));
        }
        Ok(FIRST_BIND_FD + self.list.len() as i32)
    }

    /// The workspace, always the first bind; returns its descriptor.
    pub(crate) fn workspace(
        &mut self,
        workspace: &Path,
        pin: Option<(u64, u64)>,
    ) -> std::io::Result<OwnedFd> {
        let source = Source::Path(workspace.to_path_buf());
        match FdBind::record(FIRST_BIND_FD, source, None)? {
            Some((bind, _)) if pin.is_some_and(|pin| pin != bind.identity) => {
                Err(std::io::Error::other(format!(
                    "the workspace {} is no longer the directory this turn began in \
                     (it was replaced); start a new turn",
                    workspace.display()
                )))
            }
            Some((bind, fd)) if bind.directory => {
                self.list.push(bind);
                Ok(fd)
            }
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("the workspace {} is not a directory", workspace.display()),
            )),
        }
    }

    /// Add `source` as a bind of `flag` onto `dest`; false when it is missing
    /// or not a directory or regular file.
    pub(crate) fn add(
        &mut self,
        args: &mut Args,
        flag: &str,
        source: Source,
        dest: &Path,
        workspace: Option<&OwnedFd>,
    ) -> std::io::Result<bool> {
        let fd = self.next_fd()?;
        let Some((bind, _)) = FdBind::record(fd, source, workspace)? else {
            return Ok(false);
        };
        self.list.push(bind);
        args.fd_bind(flag, fd, dest);
        Ok(true)
    }

    /// A host mount, pinned to the object the server checked (see
    /// [`FdBind::record_mount`]); writable unless it is read-only.
    pub(crate) fn mount(&mut self, args: &mut Args, mount: &crate::Mount) -> std::io::Result<()> {
        let fd = self.next_fd()?;
        self.list
            .push(FdBind::record_mount(fd, &mount.host, mount.pin)?);
        let flag = if mount.read_only {
            "--ro-bind-fd"
        } else {
            "--bind-fd"
        };
        args.fd_bind(flag, fd, &mount.path);
        Ok(())
    }

    /// The socket at `path` (a host path, never one in the workspace),
    /// read-only onto `dest`; false when it is missing or not a socket. A
    /// socket needs no write access to be connected to, and a read-only bind
    /// keeps a command from changing its mode on the host.
    pub(crate) fn socket(
        &mut self,
        args: &mut Args,
        path: &Path,
        dest: &Path,
    ) -> std::io::Result<bool> {
        let fd = self.next_fd()?;
        match FdBind::record(fd, Source::Path(path.to_path_buf()), None)? {
            Some((bind, _)) if bind.socket => {
                self.list.push(bind);
                args.fd_bind("--ro-bind-fd", fd, dest);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    pub(crate) fn read_only(
        &mut self,
        args: &mut Args,
        source: Source,
        dest: &Path,
        workspace: Option<&OwnedFd>,
    ) -> std::io::Result<()> {
        if !self.add(args, "--ro-bind-fd", source, dest, workspace)? {
            tracing::warn!(path = %dest.display(), "read-only sandbox path does not exist; skipped");
        }
        Ok(())
    }
}

/// Make `.git/hooks` and `.git/config` read-only (both run code the next time
/// anyone uses git in the workspace) and pin `.git` itself with a bind onto
/// itself: a mount point cannot be renamed or removed, so the directory cannot
/// be swapped for a look-alike with a hostile config. Without `.git`, nothing.
/// Everything is looked at through the workspace's descriptor, never by path:
/// the agent may be swapping these names meanwhile. A `.git` (or hooks, or
/// config) that is a symbolic link is not protected: its target could be
/// anything the link is changed to.
pub(crate) fn protect_git(
    args: &mut Args,
    binds: &mut BindList,
    workspace: &OwnedFd,
    policy: &Policy,
) -> std::io::Result<()> {
    let dot_git = policy.workspace.join(".git");
    let flags = OFlags::PATH | OFlags::NOFOLLOW;
    let Ok(git) = open_beneath(workspace.as_fd(), Path::new(".git"), flags, Mode::empty()) else {
        return Ok(());
    };
    match rustix::fs::fstat(&git).map(|stat| FileType::from_raw_mode(stat.st_mode)) {
        Ok(FileType::RegularFile) => {
            // A gitfile (worktree, submodule) names the real git dir; keep it pointing there.
            binds.add(
                args,
                "--ro-bind-fd",
                Source::InWorkspace(".git".into()),
                &dot_git,
                Some(workspace),
            )?;
            return Ok(());
        }
        Ok(FileType::Directory) => {}
        Ok(FileType::Symlink) => {
            tracing::warn!(workspace = %policy.workspace.display(), "`.git` is a symbolic link; its hooks and config are not protected");
            return Ok(());
        }
        _ => return Ok(()),
    }
    prepare_git_dir(&git, policy.run_as);
    binds.add(
        args,
        "--bind-fd",
        Source::InWorkspace(".git".into()),
        &dot_git,
        Some(workspace),
    )?;
    for name in ["hooks", "config"] {
        let rel = Path::new(".git").join(name);
        let dest = dot_git.join(name);
        if !binds.add(
            args,
            "--ro-bind-fd",
            Source::InWorkspace(rel),
            &dest,
            Some(workspace),
        )? {
            tracing::warn!(path = %dest.display(), "not a directory or file; left unprotected");
        }
    }
    Ok(())
}

/// Binds need both to exist; an empty hooks dir or config changes nothing for
/// git. Made under `.git`'s descriptor, never through a link, and owned by
/// the agent's user like the rest of the workspace.
fn prepare_git_dir(git: &OwnedFd, run_as: Option<FsIdentity>) {
    let owner = |name: &str| {
        if let Some(identity) = run_as.filter(|_| rustix::process::geteuid().is_root()) {
            let (uid, gid) = (
                rustix::process::Uid::from_raw(identity.uid),
                rustix::process::Gid::from_raw(identity.gid),
            );
            if let Err(err) =
                rustix::fs::chownat(git, name, Some(uid), Some(gid), AtFlags::SYMLINK_NOFOLLOW)
            {
                tracing::warn!(%err, name, "cannot hand the git protection's file to the agent's user");
            }
        }
    };
    match rustix::fs::mkdirat(git, "hooks", Mode::from_raw_mode(0o755)) {
        Ok(()) => owner("hooks"),
        Err(Errno::EXIST) => {}
        Err(err) => tracing::warn!(%err, "cannot prepare git protection: .git/hooks"),
    }
    let created = rustix::fs::openat(
        git,
        "config",
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    );
    match created {
        Ok(_) => owner("config"),
        Err(Errno::EXIST) => {}
        Err(err) => tracing::warn!(%err, "cannot prepare git protection: .git/config"),
    }
}

/// Bubblewrap arguments being built.
#[derive(Default)]
pub(crate) struct Args(pub(crate) Vec<OsString>);

impl Args {
    pub(crate) fn fd_bind(&mut self, flag: &str, fd: i32, dest: &Path) {
        self.pair(flag, fd.to_string(), dest);
    }

    pub(crate) fn flags(&mut self, flags: &[&str]) {
        self.0.extend(flags.iter().map(OsString::from));
    }

    pub(crate) fn flag_value(&mut self, flag: &str, value: impl Into<OsString>) {
        self.0.push(flag.into());
        self.0.push(value.into());
    }

    pub(crate) fn pair(
        &mut self,
        flag: &str,
        first: impl Into<OsString>,
        second: impl Into<OsString>,
    ) {
        self.0.push(flag.into());
        self.0.push(first.into());
        self.0.push(second.into());
    }
}
