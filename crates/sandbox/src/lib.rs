//! Confinement for everything the agent touches.
//!
//! - [`PathGuard`] resolves agent-given paths (relative, `~`, `..`, symlinks)
//!   and refuses any that land outside the allowed roots; [`confined`] then
//!   does the file operation through a descriptor of the root, so nothing a
//!   concurrent command swaps in between can lead it out.
//! - [`Sandbox`] runs a shell command under bubblewrap with a [`Policy`]: the
//!   workspace is the only writable place (its `.git/hooks` and `.git/config`
//!   read-only unless allowed), no network unless allowed, a clean
//!   environment, no capabilities, resource [`Limits`], a wall-clock timeout,
//!   and everything it started killed on timeout, cancel or exit. Missing
//!   bubblewrap fails closed.
//! - `Sandbox::spawn_shell` starts a command that outlives its call (a
//!   background command) under the same policy, in a cold sandbox of its own.
//! - [`create_workspace`] makes a session's private (0700) workspace.
//! - [`set_spare_capacity`] turns on prestarted spare sandboxes, which take
//!   bubblewrap's setup off a command's critical path (see the `spare`
//!   module). With the [`trampoline`] they are serving sandboxes that run a
//!   session's commands one after another (the `serve` module); what a command
//!   sees differs from a cold start only in PIDs and in what earlier commands
//!   left in the sandbox's private `/tmp`, `/dev/shm` and IPC objects.
//!
//! # How the limits are enforced
//!
//! Per-process rlimits (CPU, address space, file size, open files, and
//! `RLIMIT_NPROC`) are set in the child before it execs bubblewrap (by the
//! [`trampoline`] when the binary enables it, else between fork and exec), so
//! they apply to bubblewrap and everything under it. That is not enough for processes: the
//! kernel never applies `RLIMIT_NPROC` to uid 0 (`INIT_USER`), and a server run
//! as root runs its sandboxes as uid 0 mapped through a user namespace, so a
//! fork bomb would go unchecked. Each sandbox (a cold command's, or a spare
//! serving a session's commands) therefore also gets its own
//! cgroup, joined in the same step before anything can fork, with
//! `pids.max` (and `memory.max` on cgroup v2), which binds root too. It also
//! lets the sandbox kill processes that escaped the process group, and it is
//! removed when the sandbox ends.
//!
//! A root server also never runs agent work as root: with
//! [`Policy::run_as`] (which the server always sets when it is root) bubblewrap
//! starts as the session user's unprivileged uid, in a user namespace, so a
//! bug anywhere in the sandbox is that uid's reach, not root's; the file tools
//! do their work as the same uid ([`confined::FsIdentity`]). Such a sandbox
//! gets no RLIMIT_NPROC: it would count all of that user's sessions together;
//! its cgroup's `pids.max` limits it alone.
//!
//! Fail safe: when the server runs as root and no cgroup can be made (no
//! `pids` controller, read-only `/sys/fs/cgroup` in a container), a command
//! with a process limit is refused with [`SandboxError::Limits`]. A non-root
//! server falls back to rlimits alone, which the kernel does enforce for it
//! (note `RLIMIT_NPROC` then counts all of that user's processes).

mod background;
mod become_user;
mod bind_args;
mod binds;
mod capture;
mod cgroup;
mod command;
mod egress_forward;
mod enter_exe;
mod gate;
mod group_killer;
mod launch;
#[cfg(test)]
mod leftover_tests;
mod mounts;
mod path_guard;
mod pid1;
mod policy;
mod pre_exec;
#[cfg(test)]
mod race_tests;
mod run;
mod running;
mod secret_mask;
mod serve;
mod served;
mod spare;
mod spawn;
pub mod trampoline;
mod workspace;

pub use egress_forward::{EGRESS_PORT, EGRESS_SOCKET, FORWARDER};
pub use enter_exe::HELPER_NAME;
pub use mounts::{Mount, check_mount_path, check_mounts, fd_identity, open_host};
pub use path_guard::{PathError, PathGuard};
pub use policy::{
    EgressBridge, ExecOutcome, ExecRequest, Limits, OutputChunk, Policy, SSH_AGENT_SOCKET,
    SandboxError,
};
pub use run::{Sandbox, bwrap_available};
pub use secret_mask::SecretMask;
pub use spare::{set_spare_capacity, set_spare_idle, spares_starting, spares_used, spares_waiting};
pub use spawn::{SHUTDOWN_GRACE, STDERR_TAIL_BYTES, SandboxedProcess};
pub use workspace::create_workspace;
pub mod confined;
