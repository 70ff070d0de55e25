//! The last steps before a sandbox's bubblewrap is exec'd as the agent's
//! user (a root server's `Policy::run_as`): its bind sources staged where
//! that user can reach them, then the switch to that user.
//!
//! bubblewrap turns a `--bind-fd` descriptor back into a path and mounts
//! that path, which the agent's user must be able to walk to: a workspace
//! under the server's private data dir (0700) or under `/root` is not. So the
//! process that execs it, still root, clones each source's mount by its
//! descriptor (`open_tree(OPEN_TREE_CLONE)`: the very object, wherever its
//! name points by now), moves into a mount namespace of its own (private:
//! nothing propagates back to the host), mounts a fresh tmpfs on `/tmp`
//! there, and attaches each clone at `/tmp/<N>`. The host never sees these
//! mounts; bubblewrap makes its own namespace from this one.
//!
//! Every function here makes system calls only (no allocation, no locks), so
//! a forked child of the multi-threaded server may call them.
use std::ffi::CStr;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::mount::{MountFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags};

use crate::binds::MAX_BINDS;
use crate::confined::FsIdentity;

/// Where the staged sources go (`/tmp/<N>`; the tmpfs covers `/tmp` in the
/// launching process's own mount namespace only).
pub(crate) const STAGE_DIR: &CStr = c"/tmp";

/// One source to stage: its descriptor, its place under [`STAGE_DIR`], and
/// whether it is a directory.
pub(crate) struct Staged<'a> {
    pub(crate) from: BorrowedFd<'a>,
    pub(crate) to: &'a CStr,
    pub(crate) directory: bool,
}

/// Clone every source's mount, move into a private mount namespace, and
/// attach each clone at its place.
pub(crate) fn stage<'a, 'b: 'a>(
    sources: impl Iterator<Item = &'a Staged<'b>> + Clone,
) -> io::Result<()> {
    let mut clones: [Option<OwnedFd>; MAX_BINDS] = [const { None }; MAX_BINDS];
    for (slot, source) in clones.iter_mut().zip(sources.clone()) {
        *slot = Some(rustix::mount::open_tree(
            source.from,
            c"",
            OpenTreeFlags::OPEN_TREE_CLONE
                | OpenTreeFlags::OPEN_TREE_CLOEXEC
                | OpenTreeFlags::AT_EMPTY_PATH
                | OpenTreeFlags::AT_RECURSIVE,
        )?);
    }
    crate::pre_exec::unshare_mount_namespace()?;
    rustix::mount::mount_change(
        c"/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )?;
    rustix::mount::mount(
        c"agentd-binds",
        STAGE_DIR,
        c"tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        c"mode=0755",
    )?;
    for (clone, source) in clones.iter().zip(sources) {
        let Some(clone) = clone else { break };
        if source.directory {
            rustix::fs::mkdir(source.to, rustix::fs::Mode::from_raw_mode(0o755))?;
        } else {
            rustix::fs::open(
                source.to,
                rustix::fs::OFlags::CREATE
                    | rustix::fs::OFlags::WRONLY
                    | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::from_raw_mode(0o444),
            )?;
        }
        rustix::mount::move_mount(
            clone,
            c"",
            rustix::fs::CWD,
            source.to,
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
        )?;
    }
    Ok(())
}

/// Become `identity` for good: no supplementary groups, then the gid, then
/// the uid (real, effective and saved), so nothing can switch back.
pub(crate) fn become_user(identity: FsIdentity) -> io::Result<()> {
    rustix::thread::set_thread_groups(&[])?;
    let gid = rustix::process::Gid::from_raw(identity.gid);
    rustix::thread::set_thread_res_gid(gid, gid, gid)?;
    let uid = rustix::process::Uid::from_raw(identity.uid);
    rustix::thread::set_thread_res_uid(uid, uid, uid)?;
    Ok(())
}
