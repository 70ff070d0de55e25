//! Opening a mount's host for a turn: from `/` through real directories
//! only, so a link anywhere on the way refuses the mount, and `{user}`
//! directories made beneath their parent's descriptor, never by path.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use agentd_sandbox::confined::{self, FsIdentity};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::table::USER;

/// The directory `host` (canonical) opened now, and its identity.
pub(crate) fn open_fixed(host: &Path) -> Result<(OwnedFd, (u64, u64)), String> {
    let fd = agentd_sandbox::open_host(host).map_err(|err| err.to_string())?;
    let pin = agentd_sandbox::fd_identity(&fd).map_err(|err| err.to_string())?;
    Ok((fd, pin))
}

/// `owner` as a single path component, or why it cannot be one.
pub(crate) fn user_component(owner: &str) -> Result<&str, String> {
    let bad = owner.is_empty()
        || owner == "."
        || owner == ".."
        || owner.contains(['/', '\0'])
        || owner.len() > 255;
    if bad {
        return Err(format!(
            "user name {owner:?} cannot name a directory of its own"
        ));
    }
    Ok(owner)
}

/// `base` and the components `below` it with `{user}` as `owner`: opened
/// through real directories only, each missing one made (0700) beneath its
/// parent's descriptor and handed to `identity` (the agent's uid, in a root
/// server) by descriptor. An existing one must be the agent's (or root's):
/// another uid's directory is never taken over. Its path and identity.
pub(crate) fn open_user_dir(
    base: &Path,
    below: &[String],
    owner: &str,
    identity: Option<FsIdentity>,
) -> Result<(PathBuf, (u64, u64)), String> {
    let owner = user_component(owner)?;
    let (mut dir, _) = open_fixed(base)?;
    let mut path = base.to_path_buf();
    let me = rustix::process::geteuid().as_raw();
    let agent = identity.map_or(me, |identity| identity.uid);
    for name in below {
        let name = if name == USER { owner } else { name.as_str() };
        path.push(name);
        let shown = path.display();
        let made = match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o700)) {
            Ok(()) => true,
            Err(Errno::EXIST) => false,
            Err(err) => return Err(format!("cannot make {shown}: {err}")),
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY;
        let next = confined::open_no_links(dir.as_fd(), Path::new(name), flags, Mode::empty())
            .map_err(|err| match err.raw_os_error() {
                Some(libc::ELOOP) => format!("{shown} is a symbolic link; it is not followed"),
                _ => format!("cannot open {shown}: {err}"),
            })?;
        let stat = rustix::fs::fstat(&next).map_err(|err| format!("{shown}: {err}"))?;
        if made {
            // Made by this process just now, unless it was swapped meanwhile.
            if stat.st_uid != me {
                return Err(format!("{shown} changed while it was being made"));
            }
            hand_over(&next, identity).map_err(|err| format!("{shown}: {err}"))?;
        } else if stat.st_uid != agent && stat.st_uid != 0 {
            return Err(format!(
                "{shown} belongs to uid {}, not to the agent's uid {agent}; it is left alone",
                stat.st_uid
            ));
        }
        dir = next;
    }
    let pin = agentd_sandbox::fd_identity(&dir).map_err(|err| err.to_string())?;
    Ok((path, pin))
}

/// A directory just made: 0700 whatever the umask, and the agent's (when
/// the server is root and the agent has a uid of its own).
fn hand_over(dir: &OwnedFd, identity: Option<FsIdentity>) -> std::io::Result<()> {
    rustix::fs::fchmod(dir, Mode::from_raw_mode(0o700))?;
    if let Some(identity) = identity.filter(|_| rustix::process::geteuid().is_root()) {
        let uid = rustix::process::Uid::from_raw(identity.uid);
        let gid = rustix::process::Gid::from_raw(identity.gid);
        rustix::fs::fchown(dir, Some(uid), Some(gid))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    use super::*;

    #[test]
    fn user_names_that_are_not_one_plain_component_are_refused() {
        for bad in ["", ".", "..", "a/b", "a\0b"] {
            assert!(user_component(bad).is_err(), "{bad:?}");
        }
        for good in ["alice", "a.b", "..x", "a@b+c"] {
            assert_eq!(user_component(good).unwrap(), good);
        }
    }

    #[test]
    fn user_dirs_are_made_0700_through_real_directories_only() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap().join("base");
        std::fs::create_dir(&base).unwrap();
        let below = vec![USER.to_string(), "data".to_string()];
        let (path, pin) = open_user_dir(&base, &below, "alice", None).unwrap();
        assert_eq!(path, base.join("alice/data"));
        for dir in [base.join("alice"), base.join("alice/data")] {
            let meta = std::fs::metadata(&dir).unwrap();
            assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        }
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(pin, (meta.dev(), meta.ino()));
        // Again: the same directory, left as it is.
        assert_eq!(open_user_dir(&base, &below, "alice", None).unwrap().1, pin);

        // bob's name planted as a link to alice's: refused, nothing made there.
        symlink(base.join("alice"), base.join("bob")).unwrap();
        let err = open_user_dir(&base, &below, "bob", None).unwrap_err();
        assert!(err.contains("symbolic link"), "{err}");
        assert!(!base.join("alice/data/data").exists());
        // A link on the way to the base is refused too.
        symlink(&base, tmp.path().join("via")).unwrap();
        let via = tmp.path().canonicalize().unwrap().join("via");
        let err = open_user_dir(&via, &below, "carol", None).unwrap_err();
        assert!(err.contains("symbolic link"), "{err}");
        assert!(!base.join("carol").exists());
        let err = open_user_dir(&base, &below, "..", None).unwrap_err();
        assert!(err.contains("cannot name a directory"), "{err}");
    }

    #[test]
    fn a_root_server_hands_a_new_user_dir_to_the_agent_and_leaves_others_alone() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let agent = FsIdentity {
            uid: 231_019,
            gid: 231_019,
        };
        let below = vec![USER.to_string()];
        open_user_dir(&base, &below, "alice", Some(agent)).unwrap();
        let meta = std::fs::metadata(base.join("alice")).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (agent.uid, agent.gid));
        // One left by another uid is not taken over.
        std::fs::create_dir(base.join("bob")).unwrap();
        std::os::unix::fs::chown(base.join("bob"), Some(231_020), Some(231_020)).unwrap();
        let err = open_user_dir(&base, &below, "bob", Some(agent)).unwrap_err();
        assert!(err.contains("belongs to uid 231020"), "{err}");
    }
}
