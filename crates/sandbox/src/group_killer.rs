//! Ending a sandboxed process and everything it started: its process group,
//! its cgroup, and (without a cgroup) its sandbox's PID 1, whose exit is
//! what says nothing in the sandbox runs any more.

use std::os::fd::OwnedFd;
use std::time::Duration;

use tokio::process::Child;

use crate::cgroup::CommandCgroup;
use crate::gate;

/// The kernel takes a couple of milliseconds to tear a sandbox's namespaces
/// down; its cgroup is not empty before.
const CGROUP_SETTLE: Duration = Duration::from_millis(3);

/// How long a sandbox's PID 1, killed, may take to exit (the kernel kills
/// and reaps everything else in its namespace first) before its pass goes
/// anyway: a bound for a kernel that never finishes, not a wait expected.
const INIT_EXIT_WAIT: Duration = Duration::from_secs(10);

/// How often a sandbox is looked at for its PID 1 until it is found (see
/// [`GroupKiller::watch_init`]), and how many times at most: bubblewrap
/// makes it within milliseconds.
const INIT_WATCH: Duration = Duration::from_millis(1);
const INIT_LOOKS: u32 = 500;

/// The ticks to call [`GroupKiller::watch_init`] on, the first at once.
pub(crate) fn init_watch() -> tokio::time::Interval {
    let mut ticks = tokio::time::interval(INIT_WATCH);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks
}

/// Kills the child's process group (the child leads it, thanks to
/// `process_group(0)`) and its cgroup (which also holds whatever left the
/// group), and does so on drop unless finished.
pub(crate) struct GroupKiller {
    group: Option<rustix::process::Pid>,
    cgroup: Option<CommandCgroup>,
    /// The child is bubblewrap's outer process (its only child is the
    /// sandbox's PID 1).
    sandboxed: bool,
    /// The sandbox's PID 1 (a pidfd), found by [`GroupKiller::watch_init`]
    /// while the outer process still lives.
    init: Option<OwnedFd>,
    looks: u32,
}

impl GroupKiller {
    pub(crate) fn new(child: &Child, cgroup: Option<CommandCgroup>, sandboxed: bool) -> Self {
        let group = child
            .id()
            .and_then(|pid| rustix::process::Pid::from_raw(pid as i32));
        Self {
            group,
            cgroup,
            sandboxed,
            init: None,
            looks: 0,
        }
    }

    /// Look for the sandbox's PID 1; true once there is nothing (more) to
    /// look for. Only needed without a cgroup: whatever a command that ends
    /// by itself left running (bubblewrap's `--new-session` puts all of the
    /// sandbox out of the outer process's group) is killed by its PID 1 as
    /// that exits, and bubblewrap's outer process may exit before that is
    /// done. PID 1's own exit comes only after it (the kernel kills and reaps
    /// a PID namespace's processes before its init has exited), but once the
    /// outer process has exited PID 1 is no longer its child and cannot be
    /// found: so it is looked for from the start, while bubblewrap sets the
    /// sandbox up. Given up after [`INIT_LOOKS`] looks (no `/proc` children
    /// file or pidfds here: the pass then goes at the reap, as it used to).
    pub(crate) fn watch_init(&mut self) -> bool {
        if self.init.is_some() || !self.sandboxed || self.cgroup.is_some() {
            return true;
        }
        let Some(group) = self.group else {
            return true;
        };
        self.looks += 1;
        self.init = crate::pid1::find_init(group);
        self.init.is_some() || self.looks >= INIT_LOOKS
    }

    /// Kill a sandbox whose child has not been reaped yet, so that reaping it
    /// means nothing in the sandbox runs any more. Killed itself, bubblewrap's
    /// outer process exits at once, while the processes inside run on until
    /// its death reaches their PID 1 and the kernel kills them: a gate pass
    /// dropped at the reap would let a start overlap them. So the sandbox's
    /// PID 1 is killed instead: its exit waits until the kernel has killed
    /// everything in its PID namespace, and only then does the outer process
    /// exit (without a cgroup that is what makes the reap mean "empty"). The
    /// cgroup, if any, is killed beside it, the outer process with it, so
    /// that however slowly PID 1 is let die everything has SIGKILL pending;
    /// then [`GroupKiller::emptied`] is what waits for the end. Without a PID 1
    /// (not started yet, already gone, unsandboxed) or if it cannot be
    /// signalled, as [`GroupKiller::kill`].
    pub(crate) fn kill_sandbox(&self) {
        let found;
        let init = match &self.init {
            Some(init) => Some(init),
            None => {
                found = self
                    .group
                    .filter(|_| self.sandboxed)
                    .and_then(crate::pid1::of_bubblewrap);
                found.as_ref()
            }
        };
        let signalled = init.is_some_and(|init| {
            rustix::process::pidfd_send_signal(init, rustix::process::Signal::KILL).is_ok()
        });
        if !signalled {
            self.kill();
        } else if let Some(cgroup) = &self.cgroup {
            cgroup.kill();
        }
    }

    /// Once its child is reaped: wait until its cgroup, if any, is empty
    /// (killing what is left), else until its PID 1, if found, has exited,
    /// so that a gate pass dropped after this overlaps nothing of it (a
    /// sandbox whose command ended by itself has a PID 1 that may still be
    /// killing the rest).
    pub(crate) async fn emptied(&self) {
        if let Some(cgroup) = &self.cgroup {
            cgroup.emptied().await;
        } else if let Some(init) = &self.init {
            exited(init).await;
        }
    }

    /// Whether [`GroupKiller::emptied`] has something to wait for.
    fn can_wait(&self) -> bool {
        self.cgroup.is_some() || self.init.is_some()
    }

    /// Kill everything, and remove the cgroup in the background, dropping
    /// `pass` once the cgroup is empty or PID 1 has exited (see
    /// [`GroupKiller::emptied`]; at once with neither). The removal need not
    /// hold up the turn. The kernel takes a couple of milliseconds to tear
    /// the namespaces down: wait that out asleep rather than polling beside
    /// the turn. Only on a Tokio runtime.
    pub(crate) fn finish_later(self, pass: Option<gate::Pass>) {
        self.kill();
        let pass = pass.filter(|_| self.can_wait());
        tokio::spawn(async move {
            if self.cgroup.is_some() {
                tokio::time::sleep(CGROUP_SETTLE).await;
            }
            self.emptied().await;
            drop(pass);
            self.finish().await;
        });
    }

    pub(crate) fn kill(&self) {
        if let Some(group) = self.group {
            // ESRCH (group already empty) is the normal case.
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        if let Some(cgroup) = &self.cgroup {
            cgroup.kill();
        }
        if let Some(init) = &self.init {
            // Already exiting after a command that ended; else it ends now.
            let _ = rustix::process::pidfd_send_signal(init, rustix::process::Signal::KILL);
        }
    }

    /// Remove the cgroup once everything in it is gone.
    pub(crate) async fn finish(mut self) {
        self.group = None;
        if let Some(cgroup) = self.cgroup.take() {
            cgroup.remove().await;
        }
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        // The cgroup's own drop finishes the cleanup.
        self.kill();
    }
}

/// Wait until the process of `pidfd` has exited (its pidfd then reads
/// ready), for at most [`INIT_EXIT_WAIT`]: woken by the runtime's poller, or,
/// where the pidfd cannot be registered with it, polling every millisecond.
async fn exited(pidfd: &OwnedFd) {
    let deadline = tokio::time::Instant::now() + INIT_EXIT_WAIT;
    if let Ok(registered) = pidfd.try_clone().and_then(crate::pre_exec::register) {
        match tokio::time::timeout_at(deadline, registered.readable()).await {
            Ok(Ok(_)) => return,
            // The poller failed on it: poll it here instead.
            Ok(Err(_)) => {}
            Err(_) => return warn_init_lingers(),
        }
    }
    while tokio::time::Instant::now() < deadline {
        let mut poll = [rustix::event::PollFd::new(
            pidfd,
            rustix::event::PollFlags::IN,
        )];
        let now = rustix::event::Timespec::default();
        match rustix::event::poll(&mut poll, Some(&now)) {
            Ok(0) => tokio::time::sleep(Duration::from_millis(1)).await,
            Err(rustix::io::Errno::INTR) => {}
            _ => return,
        }
    }
    warn_init_lingers();
}

fn warn_init_lingers() {
    tracing::warn!("a sandbox's PID 1 did not exit in time; its command's pass goes anyway");
}
