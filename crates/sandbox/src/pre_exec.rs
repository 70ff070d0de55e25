//! The crate's only `unsafe`: the hook that runs in the child between fork and
//! exec to join the command's cgroup and set its rlimits, the sweep of
//! inherited descriptors in the trampoline, the trampoline's hand-over of its
//! executable, a serving sandbox's sweep of its processes and reading of its
//! own scheduling, and registering a serving sandbox's channel with Tokio.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use rustix::process::{Resource, Rlimit};
use tokio::process::Command;

/// Arrange for the child to write `0` (itself) to `cgroup_join` and then set
/// `rlimits`, before it execs. Any failure aborts the spawn: nothing runs
/// without its limits.
pub(crate) fn install(
    command: &mut Command,
    cgroup_join: Option<Arc<OwnedFd>>,
    rlimits: Vec<(Resource, Rlimit)>,
    setup: ChildSetup,
) {
    // SAFETY: the closure runs in the forked child of a multi-threaded parent,
    // where only async-signal-safe work is allowed. It only reads data built
    // before the fork (no allocation, no locks) and makes two kinds of raw
    // syscalls through rustix's linux_raw backend: write(2) and prlimit64(2).
    // Errors become `io::Error` from a raw errno, which does not allocate.
    // The child has a single thread, so moving "0" (itself) through a v1
    // `tasks` file moves the whole process.
    // The bind sources are staged (unshare, mount) and the user switched
    // with raw system calls too (`become_user`), from data built before.
    unsafe {
        command.pre_exec(move || enter(cgroup_join.as_deref(), &rlimits, &setup));
    }
}

/// Arrange for the child to start a session of its own (no controlling
/// terminal: it cannot open the server's `/dev/tty`) and, for an operator's
/// `host` command, to gain no privileges by exec (`PR_SET_NO_NEW_PRIVS`) and
/// create files for its user alone (umask 077). The command must not be put
/// in a process group of its own as well: a group leader cannot `setsid`.
pub(crate) fn detach(command: &mut Command, host: bool) {
    // SAFETY: as in `install`: raw setsid(2), prctl(2) and umask(2) through
    // rustix's linux_raw backend, on no data but `host`.
    unsafe {
        command.pre_exec(move || harden(host));
    }
}

/// The child's side of [`detach`] (and of the trampoline's).
pub(crate) fn harden(host: bool) -> io::Result<()> {
    rustix::process::setsid()?;
    if host {
        rustix::thread::set_no_new_privs(true)?;
        rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    }
    Ok(())
}

/// What the child does after its limits: hand over bind sources (staged for
/// the agent's user, or made inheritable as they are), then become that user.
pub(crate) struct ChildSetup {
    /// The bind sources, opened by the parent (close-on-exec there).
    pub(crate) binds: Vec<OwnedFd>,
    /// `(/tmp/<bind>, directory)` for each bind when staging for `run_as`.
    pub(crate) staged: Vec<(std::ffi::CString, bool)>,
    pub(crate) run_as: Option<crate::confined::FsIdentity>,
}

fn enter(
    cgroup_join: Option<&OwnedFd>,
    rlimits: &[(Resource, Rlimit)],
    setup: &ChildSetup,
) -> io::Result<()> {
    if let Some(join) = cgroup_join {
        // First, so every process the command ever starts is counted.
        rustix::io::write(join, b"0")?;
    }
    for (resource, limit) in rlimits {
        rustix::process::setrlimit(*resource, *limit)?;
    }
    if setup.run_as.is_some() {
        let mut staged = [const { None }; crate::binds::MAX_BINDS];
        for (slot, (fd, to)) in staged.iter_mut().zip(setup.binds.iter().zip(&setup.staged)) {
            *slot = Some(crate::become_user::Staged {
                from: fd.as_fd(),
                to: &to.0,
                directory: to.1,
            });
        }
        crate::become_user::stage(staged.iter().flatten())?;
    } else {
        for fd in &setup.binds {
            rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
        }
    }
    if let Some(identity) = setup.run_as {
        crate::become_user::become_user(identity)?;
    }
    Ok(())
}

/// Mark every descriptor above stderr close-on-exec. Only for the trampoline:
/// single-threaded, so no descriptor is opened or closed meanwhile.
pub(crate) fn close_inherited_fds() -> io::Result<()> {
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: `fd` was listed as open just now (or was the directory's
        // own, now closed: then fcntl fails harmlessly with EBADF) and the
        // borrow ends with this call.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let _ = rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC);
    }
    Ok(())
}

/// Make `exe` descriptor [`crate::serve::SELF_FD`], open across exec, for
/// bubblewrap to run as `/proc/self/fd/3`. Only for the trampoline, after
/// [`close_inherited_fds`]: whatever held that number was to close at exec.
pub(crate) fn hand_over_exe(exe: &OwnedFd) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    if exe.as_raw_fd() == crate::serve::SELF_FD {
        return Ok(rustix::io::fcntl_setfd(exe, rustix::io::FdFlags::empty())?);
    }
    // SAFETY: dup2 on a descriptor we own onto a number nothing else in this
    // single-threaded process uses afterwards; it returns the number or -1.
    let target = unsafe { libc::dup2(exe.as_raw_fd(), crate::serve::SELF_FD) };
    if target != crate::serve::SELF_FD {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// SIGKILL every process this one may signal but itself and PID 1. Only for
/// a serving sandbox, which checked that it runs in a PID namespace of its
/// own, where that means: everything its last command left.
pub(crate) fn kill_all_others() {
    // SAFETY: kill(2) takes no pointers; ESRCH (nothing left) is fine.
    unsafe {
        libc::kill(-1, libc::SIGKILL);
    }
}

/// `fd` registered with the current Tokio runtime's reactor.
pub(crate) fn register(fd: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: the AsyncFd owns `fd`, an OwnedFd, which stays open and the
    // same descriptor until the AsyncFd drops it.
    unsafe { tokio::io::unix::AsyncFd::register(fd) }.map_err(io::Error::from)
}

/// This process's scheduling policy, its priority and its I/O priority.
pub(crate) fn scheduling() -> [i32; 3] {
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: plain syscalls on this process; `param` outlives the call.
    unsafe {
        let policy = libc::sched_getscheduler(0);
        libc::sched_getparam(0, &mut param);
        // IOPRIO_WHO_PROCESS = 1, this process.
        let io = libc::syscall(libc::SYS_ioprio_get, 1, 0) as i32;
        [policy, param.sched_priority, io]
    }
}

/// `dup2(fd, target)`: the copy is open across exec. Only in a
/// single-threaded process about to exec (the trampoline, a forked child).
pub(crate) fn dup_onto(fd: &OwnedFd, target: i32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: dup2 takes two integers; `fd` is open, and whatever `target`
    // held in this single-threaded process was to close at exec anyway.
    if unsafe { libc::dup2(fd.as_raw_fd(), target) } != target {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Move this (single-threaded) process into a mount namespace of its own.
pub(crate) fn unshare_mount_namespace() -> io::Result<()> {
    // SAFETY: unshare takes a flag word; CLONE_NEWNS only affects this
    // process's view of mounts, which the caller sets up next.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
