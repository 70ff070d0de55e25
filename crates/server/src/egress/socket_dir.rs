//! Where the egress proxies' sockets live: a directory of this process's
//! own under the temporary directory (short enough for socket paths, 108
//! bytes), made with an unpredictable name (a name someone else made first
//! is never taken over), mode 0700 and checked through its descriptor, and
//! removed when the process is done with it. The sockets are bound through
//! that descriptor too, so each lands in the very directory checked.
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

#[derive(Debug)]
pub(crate) struct SocketDir {
    path: PathBuf,
    fd: OwnedFd,
}

impl SocketDir {
    /// A new private directory under `parent`.
    pub(crate) fn create(parent: &Path) -> io::Result<Self> {
        for _ in 0..16 {
            let path = parent.join(format!("agentd-egress-{:016x}", rand::random::<u64>()));
            match rustix::fs::mkdir(&path, Mode::from_raw_mode(0o700)) {
                Ok(()) => return Self::check(path),
                Err(Errno::EXIST) => continue,
                Err(err) => return Err(err.into()),
            }
        }
        Err(io::Error::other(format!(
            "no fresh name for a directory in {}",
            parent.display()
        )))
    }

    /// Opens what was just made, never through a link, and checks it is a
    /// directory of ours that nobody else may enter.
    fn check(path: PathBuf) -> io::Result<Self> {
        let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(&path, flags, Mode::empty())?;
        // The umask may have taken bits; none may be added.
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700))?;
        let stat = rustix::fs::fstat(&fd)?;
        if stat.st_uid != rustix::process::geteuid().as_raw() || stat.st_mode & 0o7777 != 0o700 {
            return Err(io::Error::other(format!(
                "{} is not a private directory of this process",
                path.display()
            )));
        }
        Ok(Self { path, fd })
    }

    /// A socket `name` in the directory, open to every uid (a sandbox runs
    /// as another; only its bind reaches the socket, the directory keeps
    /// everyone else out). Returns it and its path.
    pub(crate) fn bind(&self, name: &str) -> io::Result<(UnixListener, PathBuf)> {
        let through_fd = format!("/proc/self/fd/{}/{name}", self.fd.as_raw_fd());
        let listener = UnixListener::bind(through_fd)?;
        rustix::fs::chmodat(&self.fd, name, Mode::from_raw_mode(0o666), AtFlags::empty())?;
        Ok((listener, self.path.join(name)))
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        // What is left in it (a proxy not yet dropped), through the descriptor.
        if let Ok(dir) = rustix::fs::Dir::read_from(&self.fd) {
            for entry in dir.flatten() {
                let name = entry.file_name();
                if name != c"." && name != c".." {
                    let _ = rustix::fs::unlinkat(&self.fd, name, AtFlags::empty());
                }
            }
        }
        if let Err(err) = std::fs::remove_dir(&self.path) {
            tracing::warn!(%err, path = %self.path.display(), "cannot remove the egress socket directory");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;

    #[test]
    fn private_unpredictable_and_removed() {
        let parent = tempfile::tempdir().unwrap();
        // What a local user could have made in advance at the old fixed name.
        let planted = parent
            .path()
            .join(format!("agentd-egress-{}", std::process::id()));
        std::fs::create_dir(&planted).unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o777)).unwrap();
        let (a, b) = (
            SocketDir::create(parent.path()).unwrap(),
            SocketDir::create(parent.path()).unwrap(),
        );
        assert_ne!(a.path, b.path);
        assert_ne!(a.path, planted);
        let meta = std::fs::symlink_metadata(&a.path).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.mode() & 0o7777, 0o700);
        assert_eq!(meta.uid(), rustix::process::geteuid().as_raw());
        let (_listener, socket) = a.bind("1.sock").unwrap();
        assert_eq!(socket, a.path.join("1.sock"));
        let socket_meta = std::fs::symlink_metadata(&socket).unwrap();
        assert_eq!(socket_meta.mode() & 0o777, 0o666);
        std::os::unix::net::UnixStream::connect(&socket).unwrap();
        let path = a.path.to_path_buf();
        drop(a);
        assert!(!path.exists());
        assert!(planted.exists() && b.path.exists());
    }

    #[test]
    fn a_directory_that_is_not_ours_alone_is_refused() {
        let parent = tempfile::tempdir().unwrap();
        let link = parent.path().join("link");
        std::os::unix::fs::symlink(parent.path(), &link).unwrap();
        assert!(SocketDir::check(link).is_err());
    }
}
