//! Workspaces belong to the agent's user. A root server runs each user's
//! agent as an unprivileged uid (see [`crate::runtime::Runtime::agent_identity`]),
//! so the workspace it works in must be that uid's, mode 0700: a new one is
//! given to it as it is made ([`give_new`]), and one that is not its yet (a
//! session made before agents had uids of their own, a directory handed to a
//! root `agentd run`) is handed over as a whole before the turn
//! ([`hand_over`]).
//!
//! Everything goes by descriptor, never by a path that could be swapped
//! underneath: each directory is opened `O_NOFOLLOW` under its parent's
//! descriptor, each other entry as an `O_PATH | O_NOFOLLOW` descriptor that
//! is checked and then changed itself. A symlink is changed, never followed.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;

use agentd_sandbox::confined::{FsIdentity, open_absolute_no_links};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use rustix::process::{Gid, Uid};

use crate::runtime::RunError;

/// Directories deeper than this under the workspace are not walked (each
/// level holds a descriptor open): the hand-over fails instead.
pub const MAX_DEPTH: usize = 256;

/// What [`hand_over`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandOver {
    /// Entries whose owner changed (the root included). 0: the workspace
    /// was the identity's already, and nothing was walked.
    pub changed: u64,
    /// Entries left as they were: files with several hard links (another
    /// link may be outside the workspace), device nodes, and what is on
    /// another file system (a mount inside the workspace).
    pub skipped: u64,
}

/// Give the new workspace `dir` to `identity`: its owner, its group, mode
/// 0700. Not followed if it is a symlink.
pub fn give_new(dir: &Path, identity: FsIdentity) -> io::Result<()> {
    let root = open_dir(dir)?;
    rustix::fs::fchmod(&root, Mode::from_raw_mode(0o700))?;
    rustix::fs::fchown(&root, Some(uid(identity)), Some(gid(identity)))?;
    Ok(())
}

/// Make the workspace `dir` belong to `identity`. When its root is owned by
/// the identity already, nothing changes (one `fstat`). Otherwise every entry
/// under it gets the identity's uid and gid — except the ones [`HandOver`]
/// says are skipped — and the root, last (so a walk that failed is done again
/// next time), is made the identity's with mode 0700.
pub fn hand_over(dir: &Path, identity: FsIdentity) -> io::Result<HandOver> {
    hand_over_open(open_dir(dir)?, dir, identity)
}

/// [`hand_over`] of the directory `root`, opened from `dir`.
fn hand_over_open(root: OwnedFd, dir: &Path, identity: FsIdentity) -> io::Result<HandOver> {
    let root_stat = rustix::fs::fstat(&root)?;
    if owned_by(&root_stat, identity) {
        return Ok(HandOver::default());
    }
    let mut done = HandOver::default();
    // Each level: the directory being read. Its own owner changes once all
    // of it is done.
    let mut stack: Vec<Dir> = vec![Dir::new(root)?];
    while let Some(level) = stack.last_mut() {
        let Some(entry) = level.read() else {
            let Some(finished) = stack.pop() else {
                break;
            };
            let fd = finished.fd()?;
            if stack.is_empty() {
                rustix::fs::fchmod(fd, Mode::from_raw_mode(0o700))?;
            }
            rustix::fs::fchown(fd, Some(uid(identity)), Some(gid(identity)))?;
            done.changed += 1;
            continue;
        };
        let entry = entry?;
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        let parent = level.fd()?;
        match visit(parent, name, &root_stat, identity)? {
            Visit::Descend(child) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(io::Error::other(format!(
                        "cannot hand the workspace {} over: it has directories more than \
                         {MAX_DEPTH} levels deep",
                        dir.display()
                    )));
                }
                stack.push(Dir::new(child)?);
            }
            Visit::Changed => done.changed += 1,
            Visit::Skipped => done.skipped += 1,
            Visit::Unchanged => {}
        }
    }
    Ok(done)
}

enum Visit {
    /// A directory of the same file system, opened: walk it (its owner
    /// changes once its entries are done).
    Descend(OwnedFd),
    Changed,
    /// Already the identity's, or gone meanwhile.
    Unchanged,
    Skipped,
}

/// One entry of `parent`: a directory to walk, or anything else, changed
/// through a descriptor of its own (a symlink itself, never its target).
fn visit(
    parent: BorrowedFd<'_>,
    name: &std::ffi::CStr,
    root: &Stat,
    identity: FsIdentity,
) -> io::Result<Visit> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(parent, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        // Removed since it was listed.
        Err(Errno::NOENT) => return Ok(Visit::Unchanged),
        Err(err) => return Err(err.into()),
    };
    let stat = rustix::fs::fstat(&fd)?;
    if stat.st_dev != root.st_dev {
        return Ok(Visit::Skipped);
    }
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Directory => {
            // Opened again to read it: under the same parent, still not
            // following a link, and it must be the directory just looked at.
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let dir = match rustix::fs::openat(parent, name, flags, Mode::empty()) {
                Ok(dir) => dir,
                Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => return Ok(Visit::Unchanged),
                Err(err) => return Err(err.into()),
            };
            let again = rustix::fs::fstat(&dir)?;
            if (again.st_dev, again.st_ino) != (stat.st_dev, stat.st_ino) {
                return Ok(Visit::Unchanged);
            }
            Ok(Visit::Descend(dir))
        }
        FileType::CharacterDevice | FileType::BlockDevice => Ok(Visit::Skipped),
        _ if stat.st_nlink > 1 => Ok(Visit::Skipped),
        _ if owned_by(&stat, identity) => Ok(Visit::Unchanged),
        _ => {
            rustix::fs::chownat(
                &fd,
                "",
                Some(uid(identity)),
                Some(gid(identity)),
                AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW,
            )?;
            Ok(Visit::Changed)
        }
    }
}

/// Directories (and everything in them) never handed to an agent: the
/// system's own.
const SYSTEM_TREES: &[&str] = &[
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run",
    "/sbin", "/sys", "/usr",
];

/// Whether the directory `dir` (canonical) may be handed to an agent's user
/// as a workspace: not `/`, a directory directly under it, a system tree or
/// anything in one, nor a home directory (`/home/NAME`, `/root`). agentd's
/// own workspaces (`<data_dir>/workspaces/…`) always may.
pub fn check_handable(dir: &Path, data_dir: &Path) -> Result<(), RunError> {
    let workspaces = data_dir
        .canonicalize()
        .unwrap_or_else(|_| data_dir.to_path_buf())
        .join("workspaces");
    if dir.starts_with(&workspaces) && dir != workspaces {
        return Ok(());
    }
    let depth = dir.components().count();
    let system = SYSTEM_TREES.iter().any(|tree| dir.starts_with(tree));
    let home = depth == 3 && dir.starts_with("/home");
    if depth <= 2 || system || home {
        return Err(RunError::Workspace {
            path: dir.to_path_buf(),
            message: "is a system or home directory: agentd runs as root, so the agent \
                      would work as its own user and the directory would be handed to it \
                      (its owner changed throughout). Use a project directory of its own"
                .into(),
        });
    }
    Ok(())
}

/// Whether [`hand_over`] may run on the workspace `dir` (canonical): it is
/// the identity's already, or [`check_handable`] allows it.
pub fn check_may_hand_over(
    dir: &Path,
    data_dir: &Path,
    identity: FsIdentity,
) -> Result<(), RunError> {
    let root = rustix::fs::stat(dir).map_err(|err| RunError::Workspace {
        path: dir.to_path_buf(),
        message: format!("cannot be used: {err}"),
    })?;
    if owned_by(&root, identity) {
        return Ok(());
    }
    check_handable(dir, data_dir)
}

/// [`hand_over`] on a blocking thread, logged when it changed anything; for
/// the turn about to run in session `session_id`. A directory that
/// [`check_may_hand_over`] refuses is not walked.
pub async fn hand_over_before_turn(
    session_id: &str,
    dir: &Path,
    data_dir: &Path,
    identity: FsIdentity,
) -> Result<(), RunError> {
    let (path, data_dir) = (dir.to_path_buf(), data_dir.to_path_buf());
    let done = tokio::task::spawn_blocking(move || {
        let failed = |err: io::Error| RunError::Workspace {
            path: path.clone(),
            message: format!("cannot be handed to uid {}: {err}", identity.uid),
        };
        // Checked and walked through one descriptor, reached through real
        // directories only: what is checked is what changes hands.
        let root = open_dir(&path).map_err(failed)?;
        let stat = rustix::fs::fstat(&root).map_err(|err| failed(err.into()))?;
        if !owned_by(&stat, identity) {
            check_handable(&path, &data_dir)?;
        }
        hand_over_open(root, &path, identity).map_err(failed)
    })
    .await
    .map_err(|err| RunError::Workspace {
        path: dir.to_path_buf(),
        message: err.to_string(),
    })??;
    if done != HandOver::default() {
        tracing::info!(
            session = %session_id,
            workspace = %dir.display(),
            uid = identity.uid,
            gid = identity.gid,
            changed = done.changed,
            skipped = done.skipped,
            "handed the workspace to the agent's user"
        );
    }
    if done.skipped > 0 {
        tracing::warn!(
            session = %session_id,
            skipped = done.skipped,
            "left files with several hard links, device nodes and other file systems' entries in the workspace as they were"
        );
    }
    Ok(())
}

/// `dir` (absolute, canonical) opened for reading from `/` through real
/// directories only: a link anywhere on the way is refused.
fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    let failed = |err: io::Error| {
        io::Error::new(
            err.kind(),
            format!("cannot open the workspace {}: {err}", dir.display()),
        )
    };
    open_absolute_no_links(dir, OFlags::RDONLY | OFlags::DIRECTORY).map_err(failed)
}

fn owned_by(stat: &Stat, identity: FsIdentity) -> bool {
    stat.st_uid == identity.uid && stat.st_gid == identity.gid
}

fn uid(identity: FsIdentity) -> Uid {
    Uid::from_raw(identity.uid)
}

fn gid(identity: FsIdentity) -> Gid {
    Gid::from_raw(identity.gid)
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    use super::*;

    fn is_root() -> bool {
        rustix::process::geteuid().is_root()
    }

    /// Someone else when the test runs as root, else the test's own user
    /// (who can only "change" files to themselves).
    fn agent() -> FsIdentity {
        if is_root() {
            FsIdentity {
                uid: 4242,
                gid: 4343,
            }
        } else {
            FsIdentity {
                uid: rustix::process::geteuid().as_raw(),
                gid: rustix::process::getegid().as_raw(),
            }
        }
    }

    fn owner(path: &Path) -> (u32, u32) {
        let meta = fs::symlink_metadata(path).unwrap();
        (meta.uid(), meta.gid())
    }

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_tree_is_handed_over_without_following_links() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("secret"), "s").unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(ws.join("a/b/c")).unwrap();
        fs::set_permissions(&ws, fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(ws.join("top.txt"), "x").unwrap();
        fs::write(ws.join("a/b/c/deep.txt"), "x").unwrap();
        symlink(&outside, ws.join("a/to_outside_dir")).unwrap();
        symlink(outside.join("secret"), ws.join("a/b/to_secret")).unwrap();
        symlink("dangling", ws.join("dangling")).unwrap();
        fs::write(ws.join("linked"), "x").unwrap();
        fs::hard_link(ws.join("linked"), outside.join("linked_too")).unwrap();
        let before = owner(&outside);
        let identity = agent();

        let done = hand_over(&ws, identity).unwrap();
        let mine = (identity.uid, identity.gid);
        if is_root() {
            // ws, a, b, c, top, deep, three links.
            assert_eq!(
                done,
                HandOver {
                    changed: 9,
                    skipped: 1
                }
            );
            for path in [
                "",
                "a",
                "a/b",
                "a/b/c",
                "top.txt",
                "a/b/c/deep.txt",
                "a/to_outside_dir",
                "a/b/to_secret",
                "dangling",
            ] {
                assert_eq!(owner(&ws.join(path)), mine, "{path:?}");
            }
            assert_eq!(
                owner(&ws.join("linked")),
                before,
                "a hard link is left alone"
            );
            assert_eq!(mode(&ws), 0o700);
            assert_eq!(mode(&ws.join("a")), 0o755, "only the root's mode changes");
        } else {
            assert_eq!(done, HandOver::default(), "already the user's");
        }
        // Links were not followed.
        assert_eq!(owner(&outside), before);
        assert_eq!(owner(&outside.join("secret")), before);
        // Now the root is the identity's: nothing is walked again.
        fs::write(ws.join("new.txt"), "x").unwrap();
        assert_eq!(hand_over(&ws, identity).unwrap(), HandOver::default());
        if is_root() {
            assert_eq!(owner(&ws.join("new.txt")), (0, 0));
        }
    }

    #[test]
    fn a_symlinked_workspace_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        let link = tmp.path().join("link");
        symlink(&real, &link).unwrap();
        let before = owner(&real);
        assert!(hand_over(&link, agent()).is_err());
        assert!(give_new(&link, agent()).is_err());
        assert_eq!(owner(&real), before);
    }

    #[test]
    fn a_new_workspace_is_given_away_private() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir(&ws).unwrap();
        fs::set_permissions(&ws, fs::Permissions::from_mode(0o755)).unwrap();
        let identity = agent();
        give_new(&ws, identity).unwrap();
        assert_eq!(owner(&ws), (identity.uid, identity.gid));
        assert_eq!(mode(&ws), 0o700);
        assert_eq!(hand_over(&ws, identity).unwrap(), HandOver::default());
    }

    #[test]
    fn system_and_home_directories_are_never_handed_over() {
        let data = Path::new("/usr/local/agentd");
        for dir in [
            "/",
            "/etc",
            "/etc/ssh",
            "/usr/local/src/x",
            "/home",
            "/home/alice",
            "/root",
            "/tmp",
            "/var",
            "/proc/1",
            "/usr/local/agentd/workspaces",
            "/usr/local/agentd",
        ] {
            assert!(check_handable(Path::new(dir), data).is_err(), "{dir}");
        }
        for dir in [
            "/home/alice/project",
            "/tmp/x",
            "/var/www/site",
            "/srv/app",
            "/root/project",
            "/usr/local/agentd/workspaces/0193-abc",
        ] {
            assert!(check_handable(Path::new(dir), data).is_ok(), "{dir}");
        }
    }

    #[test]
    fn too_deep_a_tree_fails_and_is_tried_again_next_time() {
        if !is_root() {
            // Without root every workspace is the user's already: no walk.
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let mut deep = ws.clone();
        for _ in 0..=MAX_DEPTH {
            deep.push("d");
        }
        fs::create_dir_all(&deep).unwrap();
        let err = hand_over(&ws, agent()).unwrap_err();
        assert!(err.to_string().contains("levels deep"), "{err}");
        assert_eq!(owner(&ws), (0, 0), "the root is changed last");
        fs::remove_dir_all(ws.join("d/d")).unwrap();
        assert_eq!(hand_over(&ws, agent()).unwrap().changed, 2);
    }
}
