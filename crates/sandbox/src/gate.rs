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
//! A command the model's call starts passes, even with no shell
//! (`Sandbox::spawn_gated`, an operator's command tool), and so does a hook,
//! each holding its pass to its end. A long-lived process (`Sandbox::spawn`:
//! MCP servers, a project's `.mcp.json` ones being the agent's own code)
//! holds an *evictable* pass: whoever has to wait for it kills it (every
//! such holder on the other side), and enters once it has ended, so it
//! never stalls the other side (its client starts it again when next
//! needed, then on the workspace's new side). A pinned one gives its pass
//! back once it has answered from inside (`SandboxedProcess::set_up`); an
//! unpinned one holds it for its life.
//!
//! A pass goes only once nothing of its sandbox runs: with a cgroup, once
//! the cgroup is empty (`GroupKiller::emptied`); without one, a killed
//! sandbox's PID 1 is killed first, so that bubblewrap's outer process,
//! reaped before the pass goes, exits only after the kernel has killed
//! everything in the sandbox (`GroupKiller::kill_sandbox`). A command whose
//! call is dropped rather than cancelled is killed, and its pass goes the
//! same way, from a task (`running::Running`). Without a cgroup (a policy
//! with neither a process nor a memory limit, or a host that gives none),
//! what a command that ended by itself left running inside is killed by
//! bubblewrap's PID 1 as that exits, which may be after the outer process
//! has exited: the pass waits for PID 1's exit (`GroupKiller::watch_init`).
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

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
    /// The passes of long-lived processes, by pass id: cancelled to stop
    /// them when the other side has to wait for them.
    evictable: Vec<(u64, Side, CancellationToken)>,
}

impl Counts {
    /// Stop the long-lived holders on the other side of `side`.
    fn evict_for(&self, side: Side) {
        for (_, holder, evict) in &self.evictable {
            if *holder != side && !evict.is_cancelled() {
                tracing::info!(
                    ?holder,
                    "stopping a long-lived sandboxed process: the workspace gained or lost .git"
                );
                evict.cancel();
            }
        }
    }
}

static NEXT_PASS: AtomicU64 = AtomicU64::new(1);

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
    /// For a long-lived holder: cancelled when it must stop.
    evicted: Option<(u64, CancellationToken)>,
}

impl Pass {
    /// Which side it was taken for.
    pub(crate) fn side(&self) -> Side {
        self.side
    }

    /// Cancelled when the holder must stop (an evictable pass only).
    pub(crate) fn evicted(&self) -> Option<&CancellationToken> {
        self.evicted.as_ref().map(|(_, token)| token)
    }
}

/// Take a pass now if the other side is clear.
pub(crate) fn try_enter(workspace: &Path, side: Side) -> Option<Pass> {
    try_enter_as(workspace, side, false, false)
}

/// Take a pass now if the other side is clear; if it is not and `evict`,
/// stop the other side's long-lived holders. An `evictable` pass can itself
/// be stopped that way.
fn try_enter_as(workspace: &Path, side: Side, evictable: bool, evict: bool) -> Option<Pass> {
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
        if evict {
            counts.evict_for(side);
        }
        return None;
    }
    match side {
        Side::PinnedStart => counts.pinned_starts += 1,
        Side::UnpinnedCommand => counts.unpinned_commands += 1,
    }
    let evicted = evictable.then(|| {
        let id = NEXT_PASS.fetch_add(1, Ordering::Relaxed);
        let token = CancellationToken::new();
        counts.evictable.push((id, side, token.clone()));
        (id, token)
    });
    Some(Pass {
        workspace: workspace.to_path_buf(),
        side,
        evicted,
    })
}

/// Take a pass, waiting until the other side is clear (and stopping its
/// long-lived holders). The second value is true when it had to wait (what
/// was checked before may have changed). An `evictable` pass is a
/// long-lived holder's.
pub(crate) async fn enter(workspace: &Path, side: Side, evictable: bool) -> (Pass, bool) {
    let mut waited = false;
    loop {
        let woken = WAKE.notified();
        tokio::pin!(woken);
        // Registered before the check, so a release in between is not missed.
        woken.as_mut().enable();
        if let Some(pass) = try_enter_as(workspace, side, evictable, true) {
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
            if let Some((id, _)) = &self.evicted {
                counts.evictable.retain(|(held, ..)| held != id);
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
        let start = tokio::spawn(async move { enter(ws, Side::PinnedStart, false).await });
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
