//! Finding a sandbox's PID 1 from the host: bubblewrap's outer process
//! clones it (into the new PID namespace) and has no other child.

use std::os::fd::OwnedFd;

use rustix::process::{Pid, PidfdFlags, pidfd_open};

/// A descriptor of the only child of `outer`, a bubblewrap process this
/// one started and has not reaped (so `outer` names no other process).
/// `None` when it has no child (not cloned yet, or already reaped).
pub(crate) fn of_bubblewrap(outer: Pid) -> Option<OwnedFd> {
    if !proc_is_ours() {
        return None;
    }
    let found = find(outer);
    if found.is_none() {
        static NOTED: std::sync::Once = std::sync::Once::new();
        NOTED.call_once(|| {
            tracing::debug!(
                "a sandbox's PID 1 was not found (not started, gone, or no /proc children \
                 or pidfds here): its outer process is killed first"
            );
        });
    }
    found
}

/// [`of_bubblewrap`] without its note: for looking again and again while
/// bubblewrap has not made PID 1 yet.
pub(crate) fn find_init(outer: Pid) -> Option<OwnedFd> {
    if !proc_is_ours() {
        return None;
    }
    find(outer)
}

fn find(outer: Pid) -> Option<OwnedFd> {
    let child = first_child(outer)?;
    let fd = pidfd_open(child, PidfdFlags::empty()).ok()?;
    // Still its child once opened: the descriptor is that process, not
    // one that took the pid after it was reaped.
    (first_child(outer) == Some(child)).then_some(fd)
}

fn first_child(pid: Pid) -> Option<Pid> {
    let raw = pid.as_raw_nonzero();
    let children = std::fs::read_to_string(format!("/proc/{raw}/task/{raw}/children")).ok()?;
    let first = children.split_whitespace().next()?.parse().ok()?;
    Pid::from_raw(first)
}

/// Whether `/proc` shows this process's PID namespace (else its pids name
/// other processes, which must not be signalled).
fn proc_is_ours() -> bool {
    static OURS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OURS.get_or_init(|| {
        let ours = std::fs::read_link("/proc/self")
            .ok()
            .and_then(|link| link.to_str()?.parse::<i32>().ok())
            == Some(rustix::process::getpid().as_raw_nonzero().get());
        if !ours {
            tracing::warn!("/proc is not this process's PID namespace: sandboxes are killed by their outer process");
        }
        ours
    })
}
