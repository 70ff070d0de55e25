//! Finding a sandbox's PID 1 from the host: bubblewrap's outer process
//! clones it (into the new PID namespace) and has no other child.

use std::os::fd::OwnedFd;

use rustix::process::{Pid, PidfdFlags, pidfd_open};

/// A descriptor of the only child of `outer`, a bubblewrap process this
/// one started and has not reaped (so `outer` names no other process).
/// `None` when it has no child (not cloned yet, or already reaped).
pub(crate) fn of_bubblewrap(outer: Pid) -> Option<OwnedFd> {
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
