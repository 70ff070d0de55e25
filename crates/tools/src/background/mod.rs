//! Background commands of one session (`Bash` with `run_in_background`,
//! `BashOutput`, `KillShell`, as in Claude Code).
//!
//! Each runs in a cold sandbox of its own under the session's policy (see
//! `Sandbox::spawn_shell`) until it exits, is killed, the session ends
//! ([`BackgroundShells::end_all`]), or nobody has read its output for the
//! idle timeout. They live in this process only: a restart ends them (the
//! sandbox dies with its parent), and an id this registry does not know is
//! answered as gone.
mod shell;
mod tools;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use agentd_sandbox::{Policy, Sandbox};
use tokio_util::sync::CancellationToken;

pub use shell::ShellStatus;
pub(crate) use shell::{Output, Shell};
pub use tools::{BashOutputTool, KillShellTool};

/// Default for how long a background command may go unread before it is killed.
pub const DEFAULT_BACKGROUND_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);
/// Unread output kept per stream of a background command (the newest bytes).
pub const BACKGROUND_OUTPUT_CAP: usize = 1024 * 1024;
/// Background commands one session may have running at once.
pub const MAX_RUNNING_SHELLS: usize = 16;
/// Ended commands remembered per session (for a last `BashOutput`).
const MAX_ENDED_SHELLS: usize = 64;

/// A background command as listed for clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellInfo {
    pub id: String,
    pub command: String,
    pub status: ShellStatus,
    pub started_at: SystemTime,
}

/// A session's background commands. Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct BackgroundShells(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    idle_timeout: Duration,
    /// Set once the session has ended: nothing new starts.
    closed: AtomicBool,
    /// Why none may start here at all (a cluster node), if so.
    unavailable: Option<&'static str>,
    shells: Mutex<Shells>,
}

#[derive(Debug, Default)]
struct Shells {
    next: u64,
    /// By number, so the oldest ended ones are forgotten first.
    by_number: BTreeMap<u64, Arc<Shell>>,
}

impl Default for BackgroundShells {
    fn default() -> Self {
        Self::new(DEFAULT_BACKGROUND_IDLE_TIMEOUT, 1)
    }
}

impl BackgroundShells {
    /// Ids are `bash_<n>` from `first_number` on: a server passes something
    /// that grows across restarts (the session's event count), so an id
    /// from before a restart is never given to a new command.
    pub fn new(idle_timeout: Duration, first_number: u64) -> Self {
        Self::build(idle_timeout, first_number, None)
    }

    fn build(idle_timeout: Duration, first_number: u64, unavailable: Option<&'static str>) -> Self {
        Self(Arc::new(Inner {
            idle_timeout,
            closed: AtomicBool::new(false),
            unavailable,
            shells: Mutex::new(Shells {
                next: first_number.max(1),
                by_number: BTreeMap::new(),
            }),
        }))
    }

    /// None may start, for `why`.
    pub fn unavailable(why: &'static str) -> Self {
        Self::build(DEFAULT_BACKGROUND_IDLE_TIMEOUT, 1, Some(why))
    }

    fn shells(&self) -> MutexGuard<'_, Shells> {
        self.0.shells.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Start `command` in the background under `policy`; its id.
    pub async fn start(
        &self,
        sandbox: &Sandbox,
        policy: &Policy,
        command: &str,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        self.check_room()?;
        let process = sandbox
            .spawn_shell(policy, command, cancel)
            .await
            .map_err(|err| err.to_string())?
            .ok_or("interrupted before the command started")?;
        let mut shells = self.shells();
        if self.0.closed.load(Ordering::Acquire) {
            // The session ended while it started: dropping it kills it.
            return Err("the session has ended".into());
        }
        let number = shells.next;
        shells.next += 1;
        let id = format!("bash_{number}");
        let shell = Shell::start(
            id.clone(),
            command.to_string(),
            process,
            BACKGROUND_OUTPUT_CAP,
            self.0.idle_timeout,
            agentd_sandbox::SecretMask::new(policy.secrets()),
        );
        shells.by_number.insert(number, shell);
        forget_old(&mut shells);
        Ok(id)
    }

    fn check_room(&self) -> Result<(), String> {
        if let Some(why) = self.0.unavailable {
            return Err(format!("background commands are not available here: {why}"));
        }
        if self.0.closed.load(Ordering::Acquire) {
            return Err("the session has ended".into());
        }
        let running = self.running().len();
        if running >= MAX_RUNNING_SHELLS {
            return Err(format!(
                "{running} background commands are running, the most a session may have; \
                 stop one with KillShell first"
            ));
        }
        Ok(())
    }

    fn find(&self, id: &str) -> Option<Arc<Shell>> {
        let number = id.strip_prefix("bash_")?.parse::<u64>().ok()?;
        self.shells().by_number.get(&number).cloned()
    }

    /// New output and the status of `id`; `None` when no such command is known.
    pub(crate) fn read(&self, id: &str) -> Option<Output> {
        Some(self.find(id)?.read())
    }

    /// The commands still running, oldest first.
    pub fn running(&self) -> Vec<ShellInfo> {
        self.shells()
            .by_number
            .values()
            .filter(|shell| shell.status() == ShellStatus::Running)
            .map(|shell| ShellInfo {
                id: shell.id.clone(),
                command: shell.command.clone(),
                status: shell.status(),
                started_at: shell.started_at,
            })
            .collect()
    }

    /// The session is over: start nothing more, kill every running command
    /// and wait until they are all gone.
    pub async fn end_all(&self) {
        self.0.closed.store(true, Ordering::Release);
        let shells: Vec<Arc<Shell>> = self.shells().by_number.values().cloned().collect();
        futures::future::join_all(shells.iter().map(|shell| shell.kill())).await;
    }
}

/// Forget the oldest ended commands beyond [`MAX_ENDED_SHELLS`].
fn forget_old(shells: &mut Shells) {
    let ended: Vec<u64> = shells
        .by_number
        .iter()
        .filter(|(_, shell)| shell.status() != ShellStatus::Running)
        .map(|(number, _)| *number)
        .collect();
    for number in ended
        .iter()
        .take(ended.len().saturating_sub(MAX_ENDED_SHELLS))
    {
        shells.by_number.remove(number);
    }
}
