//! Per workspace, a sandbox start that binds sources inside the workspace
//! never overlaps a command that could rename things there.
//!
//! bubblewrap resolves each bind's destination (`<ws>/.git`,
//! `<ws>/.git/hooks`, …) inside the workspace while it sets the sandbox up.
//! The sources are pinned by descriptor (the `binds` module), but a command
//! swapping a destination's name for a symlink at that moment could have
//! bubblewrap create the destination somewhere else (as the sandbox's user)
//! or leave `.git` unprotected in that sandbox. A command running in a
//! sandbox that pinned those names cannot rename them (a mount point cannot
//! be renamed or removed); one in a sandbox that did not (started before
//! `.git` existed, or unsandboxed) can. So:
//!
//! - a *pinned* start (its binds lie inside the workspace) waits until no
//!   *unpinned* command of the workspace runs, and holds its pass until
//!   bubblewrap's set-up is over (a serving sandbox says it is ready; a cold
//!   command holds it to its end);
//! - an *unpinned* command waits until no pinned start is under way, and
//!   holds its pass until it ends.
//!
//! Both wait only while a workspace changes between having `.git` and not.
//! Long-lived sandboxed processes (`Sandbox::spawn`, MCP servers) take no
//! pass; a command the model's call starts does, even with no shell
//! (`Sandbox::spawn_gated`, an operator's command tool), and so does a hook,
//! each holding it to its end. (A project's `.mcp.json` server is the
//! agent's code too, yet takes none: a known gap.)
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

/// Which kind of pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// A start whose bind destinations lie inside the workspace.
    PinnedStart,
    /// A command in a sandbox that pinned nothing inside the workspace.
    UnpinnedCommand,
}

#[derive(Default)]
struct Counts {
    pinned_starts: usize,
    unpinned_commands: usize,
}

static STATE: Mutex<Option<HashMap<PathBuf, Counts>>> = Mutex::new(None);
static WAKE: Notify = Notify::const_new();

fn state() -> MutexGuard<'static, Option<HashMap<PathBuf, Counts>>> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Held while a start or a command is under way; released on drop.
#[derive(Debug)]
pub(crate) struct Pass {
    workspace: PathBuf,
    side: Side,
}

/// Take a pass now if the other side is clear.
pub(crate) fn try_enter(workspace: &Path, side: Side) -> Option<Pass> {
    let mut guard = state();
    let counts = guard
        .get_or_insert_with(HashMap::new)
        .entry(workspace.to_path_buf())
        .or_default();
    let clear = match side {
        Side::PinnedStart => counts.unpinned_commands == 0,
        Side::UnpinnedCommand => counts.pinned_starts == 0,
    };
    if !clear {
        return None;
    }
    match side {
        Side::PinnedStart => counts.pinned_starts += 1,
        Side::UnpinnedCommand => counts.unpinned_commands += 1,
    }
    Some(Pass {
        workspace: workspace.to_path_buf(),
        side,
    })
}

/// Take a pass, waiting until the other side is clear. The second value is
/// true when it had to wait (what was checked before may have changed).
pub(crate) async fn enter(workspace: &Path, side: Side) -> (Pass, bool) {
    let mut waited = false;
    loop {
        let woken = WAKE.notified();
        tokio::pin!(woken);
        // Registered before the check, so a release in between is not missed.
        woken.as_mut().enable();
        if let Some(pass) = try_enter(workspace, side) {
            return (pass, waited);
        }
        waited = true;
        woken.await;
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let mut guard = state();
        if let Some(map) = guard.as_mut()
            && let Some(counts) = map.get_mut(&self.workspace)
        {
            match self.side {
                Side::PinnedStart => counts.pinned_starts -= 1,
                Side::UnpinnedCommand => counts.unpinned_commands -= 1,
            }
            if counts.pinned_starts == 0 && counts.unpinned_commands == 0 {
                map.remove(&self.workspace);
            }
        }
        drop(guard);
        WAKE.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn starts_and_unpinned_commands_exclude_each_other() {
        let ws = Path::new("/gate-test/ws");
        let command = try_enter(ws, Side::UnpinnedCommand).unwrap();
        let second = try_enter(ws, Side::UnpinnedCommand).unwrap();
        assert!(try_enter(ws, Side::PinnedStart).is_none());
        assert!(try_enter(Path::new("/gate-test/other"), Side::PinnedStart).is_some());
        let start = tokio::spawn(async move { enter(ws, Side::PinnedStart).await });
        tokio::task::yield_now().await;
        drop(command);
        tokio::task::yield_now().await;
        assert!(!start.is_finished(), "one command still runs");
        drop(second);
        let (start, waited) = start.await.unwrap();
        assert!(waited);
        let also = try_enter(ws, Side::PinnedStart).unwrap();
        assert!(try_enter(ws, Side::UnpinnedCommand).is_none());
        drop((start, also));
        assert!(try_enter(ws, Side::UnpinnedCommand).is_some());
    }
}
