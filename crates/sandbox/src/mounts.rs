//! Host directories mounted into a sandbox ([`Mount`]), how their hosts
//! are opened ([`open_host`]), and which places they may appear at
//! ([`check_mount_path`]).
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;

/// A host directory bound into the sandbox at `path`, read-only or writable.
/// `host` is canonical (the server resolves it once), opened through real
/// directories only; `pin` is the identity of the object the server checked,
/// and the sandbox and the file tools refuse any other one at that path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub host: PathBuf,
    /// Where it appears inside the sandbox (and to the file tools).
    pub path: PathBuf,
    pub read_only: bool,
    /// (device, inode) of `host` when it was checked.
    pub pin: (u64, u64),
}

impl Mount {
    /// A mount of `host` as it is now (opened with [`open_host`]).
    pub fn pinned(host: &Path, path: &Path, read_only: bool) -> io::Result<Self> {
        let fd = open_host(host)?;
        Ok(Self {
            host: host.to_path_buf(),
            path: path.to_path_buf(),
            read_only,
            pin: fd_identity(&fd)?,
        })
    }
}

/// Open the directory `host` (absolute, canonical) from `/` through real
/// directories only, `O_PATH`: a symbolic link in any component, the last
/// included, is refused, never followed. Errors say which of missing, a
/// link or not a directory it was.
pub fn open_host(host: &Path) -> io::Result<OwnedFd> {
    crate::confined::open_absolute_no_links(host, OFlags::PATH | OFlags::DIRECTORY)
        .map_err(|err| host_error(host, err))
}

/// (device, inode) of an open file.
pub fn fd_identity(fd: &OwnedFd) -> io::Result<(u64, u64)> {
    let stat = rustix::fs::fstat(fd)?;
    Ok((stat.st_dev, stat.st_ino))
}

/// `err` from opening `host` through real directories, in words.
fn host_error(host: &Path, err: io::Error) -> io::Error {
    let shown = host.display();
    let why = match err.raw_os_error() {
        Some(libc::ELOOP) => "a component of it is a symbolic link (mounts are opened through \
             real directories only)"
            .to_string(),
        Some(libc::ENOENT) => "it does not exist".to_string(),
        Some(libc::ENOTDIR) => "it (or a component of it) is not a directory".to_string(),
        _ => err.to_string(),
    };
    io::Error::new(err.kind(), format!("mount host {shown}: {why}"))
}

/// A descriptor of `host` that is still the object `pin` names.
pub(crate) fn open_pinned(host: &Path, pin: (u64, u64)) -> io::Result<OwnedFd> {
    let fd = open_host(host)?;
    if fd_identity(&fd)? != pin {
        return Err(io::Error::other(format!(
            "mount host {} is no longer the directory checked when the turn started",
            host.display()
        )));
    }
    Ok(fd)
}

/// Directories of the sandbox itself: a mount on, in or above one of them
/// would hide or replace what commands run on.
const SYSTEM_PATHS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/proc",
    "/dev",
    "/sys",
    "/tmp",
    "/run/agentd",
];

/// Why `path` cannot be where a mount appears in a sandbox of `workspace`:
/// not absolute or not normal (`.`, `..`), `/`, a system directory or a
/// place in or above one, or the workspace, in it or above it (binds in the
/// workspace would create their mount points in the agent's own directory).
pub fn check_mount_path(path: &Path, workspace: Option<&Path>) -> Result<(), String> {
    let shown = path.display();
    if !path.is_absolute() {
        return Err(format!("mount path {shown} must be absolute"));
    }
    if path == Path::new("/") {
        return Err("a mount cannot replace the sandbox's `/`".into());
    }
    let plain = path.to_str().is_some_and(|p| {
        p.split('/')
            .skip(1)
            .all(|name| !name.is_empty() && name != "." && name != "..")
    });
    if !plain {
        return Err(format!(
            "mount path {shown} must be a plain absolute path (no `.`, `..` or doubled `/`)"
        ));
    }
    let overlaps = |other: &Path| path.starts_with(other) || other.starts_with(path);
    if let Some(system) = SYSTEM_PATHS.iter().find(|s| overlaps(Path::new(s))) {
        return Err(format!(
            "mount path {shown} would shadow the sandbox's own {system}"
        ));
    }
    if let Some(workspace) = workspace.filter(|w| overlaps(w)) {
        return Err(format!(
            "mount path {shown} would shadow the workspace {} or lie in it",
            workspace.display()
        ));
    }
    Ok(())
}

/// Check every mount's path, and that no two lie one in the other (the inner
/// one's mount point would be made in the outer one's host directory).
pub fn check_mounts(mounts: &[Mount], workspace: &Path) -> Result<(), String> {
    for (i, mount) in mounts.iter().enumerate() {
        check_mount_path(&mount.path, Some(workspace))?;
        if !mount.host.is_absolute() {
            return Err(format!(
                "mount host {} must be absolute",
                mount.host.display()
            ));
        }
        let earlier = mounts[..i].iter().map(|m| m.path.as_path());
        for other in earlier {
            if mount.path.starts_with(other) || other.starts_with(&mount.path) {
                return Err(format!(
                    "mount paths {} and {} lie one in the other",
                    mount.path.display(),
                    other.display()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_dirs_the_workspace_and_odd_paths_are_refused() {
        let ws = Path::new("/srv/data/ws/1");
        for bad in [
            "/",
            "/usr",
            "/usr/local",
            "/proc",
            "/dev",
            "/etc/x",
            "/tmp",
            "/run",
            "/srv",
            "/srv/data",
            "/srv/data/ws/1",
            "/srv/data/ws/1/sub",
            "rel",
            "/a/../b",
            "/a/./b",
            "/a//b",
            "/a/",
        ] {
            assert!(check_mount_path(Path::new(bad), Some(ws)).is_err(), "{bad}");
        }
        for good in ["/mnt/downloads", "/var/log", "/data", "/srv/other", "/usrx"] {
            assert!(
                check_mount_path(Path::new(good), Some(ws)).is_ok(),
                "{good}"
            );
        }
        let mount = |path: &str| Mount {
            host: "/h".into(),
            path: path.into(),
            read_only: true,
            pin: (0, 0),
        };
        assert!(check_mounts(&[mount("/mnt/a"), mount("/mnt/b")], ws).is_ok());
        assert!(check_mounts(&[mount("/mnt/a"), mount("/mnt/a/b")], ws).is_err());
    }

    #[test]
    fn a_host_opens_through_real_directories_only_and_stays_pinned() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().canonicalize().unwrap().join("real");
        std::fs::create_dir_all(real.join("sub")).unwrap();
        std::os::unix::fs::symlink(&real, real.with_file_name("link")).unwrap();
        let mount = Mount::pinned(&real.join("sub"), Path::new("/mnt/s"), true).unwrap();
        assert!(open_pinned(&mount.host, mount.pin).is_ok());

        let through_link = real.with_file_name("link").join("sub");
        let err = open_host(&through_link).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        let err = open_host(&real.with_file_name("link"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("symbolic link"), "{err}");
        let err = open_host(&real.join("missing")).unwrap_err().to_string();
        assert!(err.contains("does not exist"), "{err}");

        // Another real directory in its place is not the one checked.
        std::fs::rename(real.join("sub"), real.join("old")).unwrap();
        std::fs::create_dir(real.join("sub")).unwrap();
        let err = open_pinned(&mount.host, mount.pin).unwrap_err().to_string();
        assert!(err.contains("no longer the directory checked"), "{err}");
    }
}
