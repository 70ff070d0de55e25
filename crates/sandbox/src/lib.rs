//! Confinement for everything the agent touches.
//!
//! - [`PathGuard`] resolves agent-given paths (relative, `~`, `..`, symlinks)
//!   and refuses any that land outside the allowed roots.
//! - [`Sandbox`] runs a shell command under bubblewrap with a [`Policy`]: the
//!   workspace is the only writable place, no network unless allowed, a clean
//!   environment, a wall-clock timeout, and the whole process group killed on
//!   timeout or cancel. Missing bubblewrap fails closed.

mod capture;
mod command;
mod path_guard;
mod run;

pub use path_guard::{PathError, PathGuard};
pub use run::{
    ExecOutcome, ExecRequest, OutputChunk, Policy, Sandbox, SandboxError, bwrap_available,
};
