//! The crate's only `unsafe`: the hook that runs in the child between fork and
//! exec to join the command's cgroup and set its rlimits.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use rustix::process::{Resource, Rlimit};
use tokio::process::Command;

/// Arrange for the child to write `0` (itself) to `cgroup_procs` and then set
/// `rlimits`, before it execs. Any failure aborts the spawn: nothing runs
/// without its limits.
pub(crate) fn install(
    command: &mut Command,
    cgroup_procs: Option<Arc<OwnedFd>>,
    rlimits: Vec<(Resource, Rlimit)>,
) {
    // SAFETY: the closure runs in the forked child of a multi-threaded parent,
    // where only async-signal-safe work is allowed. It only reads data built
    // before the fork (no allocation, no locks) and makes two kinds of raw
    // syscalls through rustix's linux_raw backend: write(2) and prlimit64(2).
    // Errors become `io::Error` from a raw errno, which does not allocate.
    unsafe {
        command.pre_exec(move || enter(cgroup_procs.as_deref(), &rlimits));
    }
}

fn enter(cgroup_procs: Option<&OwnedFd>, rlimits: &[(Resource, Rlimit)]) -> io::Result<()> {
    if let Some(procs) = cgroup_procs {
        // First, so every process the command ever starts is counted.
        rustix::io::write(procs, b"0")?;
    }
    for (resource, limit) in rlimits {
        rustix::process::setrlimit(*resource, *limit)?;
    }
    Ok(())
}
