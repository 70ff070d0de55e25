//! Prestarted spare sandboxes. Bubblewrap's namespace and mount setup and
//! bash's start cost several milliseconds a command; with a capacity set
//! ([`set_spare_capacity`]), each sandboxed command is followed, in the
//! background, by a spare sandbox for the same policy, waiting for the next
//! command. Two kinds:
//! - **Serving** (when the [`crate::trampoline`] is enabled, as in `agentd`):
//!   the trampoline's executable (see `enter_exe`) waits inside (the `serve` module) and runs
//!   each command handed to it in a fresh bash (started before the command
//!   comes, as `bash -c` would run it), then kills whatever
//!   the command left and goes back to the pool, so a session's commands
//!   share one sandbox while they keep coming.
//! - **One-shot** (otherwise): `bwrap <same args> -- bash -c <READER>` reads
//!   one command on its stdin and becomes its `bash -c`, as in a fresh sandbox.
//!
//! A spare serves a command only when everything a cold start would use now
//! is equal: the bwrap path and arguments (recomputed per command, so a new
//! `.git`, variable or read-only path shows), the limits, and the identity
//! (device, inode) of every bind source, so a directory replaced since the
//! spare started (a checkpoint restore, a rename) is never served stale. It
//! must also come from the calling Tokio runtime, where its pipes and reaper
//! are registered.
//!
//! The pool never evicts a live spare to make room, holds at most one spare a
//! key, and kills spares idle longer than the idle lifetime: on lookup, and
//! from a sweeper thread that runs only while the pool is not empty.
use std::ffi::OsString;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError, mpsc};
use std::time::{Duration, Instant};

use tokio::process::Child;
use tokio::runtime::{Handle, Id as RuntimeId};

use crate::command::{BwrapSpec, Launch, find_bwrap};
use crate::gate::{self, Pass, Side};
use crate::launch::spawn_confined;
use crate::policy::{Limits, Policy};
use crate::run::GroupKiller;
use crate::served::{self, Served};

mod pool;

pub(crate) use pool::{BindIdentities, Key, Reader, Spare};
use pool::{Entry, Pool, lock};

/// Reads the command up to end of input, then becomes the same `bash -c` a
/// cold start runs, with stdin back on /dev/null. `exec` leaves `$0`, `$$`,
/// `SHLVL` and `_` as a cold start has them (the spares test compares).
const READER: &str = r#"IFS= read -r -d "" c; exec bash -c "$c" </dev/null"#;

/// Longer commands start cold in a one-shot spare: bash reads a pipe a byte
/// at a time (about a microsecond a byte), and a write of up to `PIPE_BUF`
/// (4096) is whole.
const MAX_READER_COMMAND_BYTES: usize = 4096;

const DEFAULT_IDLE: Duration = Duration::from_secs(30);

/// False when a variable of the policy would act on the reader shell itself
/// (a file it sources, tracing, a `read` timeout, code loaded into it), or on
/// a serving sandbox's shell waiting for its command (`serve`): a spare would
/// then not be what a cold start is, so that policy starts cold.
fn reader_is_transparent(env: &std::collections::BTreeMap<String, String>) -> bool {
    !env.keys().any(|key| {
        matches!(
            key.as_str(),
            "BASH_ENV" | "ENV" | "SHELLOPTS" | "BASHOPTS" | "TMOUT" | "PS4" | "GLIBC_TUNABLES"
        ) || key.starts_with("LD_")
            || key.starts_with("BASH_FUNC_")
    })
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    capacity: 0,
    idle: DEFAULT_IDLE,
    entries: Vec::new(),
    next_id: 0,
    sweeping: false,
});
/// Wakes the sweeper when the idle lifetime or the capacity changes.
static SWEEPER: Condvar = Condvar::new();
static USED: AtomicU64 = AtomicU64::new(0);
/// Wakes commands waiting for a spare that is starting: it is ready, or gone.
static SETTLED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// How long a command waits for a spare of its policy whose start is under
/// way before it starts cold. A spare wakes its waiters as soon as it is
/// ready, has failed or is gone, so this bounds only a start that hangs (one
/// takes ~8 ms on an idle machine, and a cold start beside it as long).
const WAIT_FOR_STARTING: Duration = Duration::from_millis(250);

/// Keep up to `max` prestarted spare sandboxes, at most one per distinct
/// policy. 0, the default, turns them off and kills any that are waiting.
pub fn set_spare_capacity(max: usize) {
    // A command that keeps spares runs sandboxes: choose their executable
    // now, beside its start-up (others choose at their first sandbox).
    if max > 0 && crate::trampoline::enabled() {
        crate::enter_exe::choose_soon();
    }
    let surplus: Vec<Spare> = {
        let mut pool = lock();
        pool.capacity = max;
        let surplus = pool.entries.len().saturating_sub(max);
        pool.entries
            .drain(..surplus)
            .filter_map(|entry| entry.spare)
            .collect()
    };
    SWEEPER.notify_all();
    SETTLED.notify_waiters();
    surplus.into_iter().for_each(discard);
}

/// How long a spare may wait for a command before it is killed (default 30 s).
pub fn set_spare_idle(idle: Duration) {
    lock().idle = idle;
    SWEEPER.notify_all();
}

/// How many commands have run in a prestarted spare since the process started.
pub fn spares_used() -> u64 {
    USED.load(Ordering::Relaxed)
}

/// How many spares are started and waiting for a command.
pub fn spares_waiting() -> usize {
    lock()
        .entries
        .iter()
        .filter(|entry| entry.spare.is_some())
        .count()
}

/// How many spares are being set up (their start under way, not ready yet).
pub fn spares_starting() -> usize {
    lock()
        .entries
        .iter()
        .filter(|entry| entry.setting_up && entry.spare.is_none())
        .count()
}

/// Take the waiting spare for `spec` and `limits`, hand it `command` and
/// return it running, with the gate's pass the command holds while it runs
/// (an unpinned sandbox's); `None` when the command must start cold.
fn take(
    spec: &BwrapSpec,
    limits: &Limits,
    command: &str,
    workspace: &Path,
) -> Option<(Taken, Option<Pass>)> {
    if command.contains('\0') || lock().entries.is_empty() {
        return None;
    }
    // Checked first: a spare put back meanwhile would wait for nothing.
    let pass = if spec.pins_workspace() {
        None
    } else {
        Some(gate::try_enter(workspace, Side::UnpinnedCommand)?)
    };
    let runtime = Handle::try_current().ok()?.id();
    let (found, expired) = {
        let mut pool = lock();
        if pool.entries.is_empty() {
            return None;
        }
        let expired = pool.remove_expired(Instant::now());
        let found = pool
            .entries
            .iter()
            .position(|entry| {
                entry.key.is(spec, limits, runtime)
                    && entry
                        .spare
                        .as_ref()
                        .is_some_and(|spare| spare.takes(command))
            })
            .map(|index| pool.entries.swap_remove(index));
        (found, expired)
    };
    expired.into_iter().for_each(discard);
    let Entry {
        key, binds, spare, ..
    } = found?;
    let spare = spare?;
    if binds != bind_identities(&spec.args) || key.spec.binds != spec.binds {
        // Made of what was there before (a replaced workspace, a new `.git`).
        discard(spare);
        return None;
    }
    Some((spare.run(command, key, binds)?, pass))
}

/// [`take`], or, when a spare for `spec` is still starting (prestarted
/// beside a turn's first model call, or started after the command before),
/// wait for it up to [`WAIT_FOR_STARTING`] rather than set up a second
/// sandbox beside it.
pub(crate) async fn take_or_wait(
    spec: &BwrapSpec,
    limits: &Limits,
    command: &str,
    workspace: &Path,
) -> Option<(Taken, Option<Pass>)> {
    let deadline = tokio::time::Instant::now() + WAIT_FOR_STARTING;
    loop {
        // Registered before the pool is looked at: a spare settling between
        // the look and the wait still wakes it.
        let settled = SETTLED.notified();
        tokio::pin!(settled);
        settled.as_mut().enable();
        if let Some(taken) = take(spec, limits, command, workspace) {
            return Some(taken);
        }
        if !starting(spec, limits) {
            // It may have become ready since `take` looked.
            return take(spec, limits, command, workspace);
        }
        if tokio::time::timeout_at(deadline, settled).await.is_err() {
            return take(spec, limits, command, workspace);
        }
    }
}

/// Whether a spare for `spec` is being set up, for this runtime (a place
/// still queued for the starter thread may wait behind other starts).
fn starting(spec: &BwrapSpec, limits: &Limits) -> bool {
    let Ok(runtime) = Handle::try_current() else {
        return false;
    };
    let runtime = runtime.id();
    lock().entries.iter().any(|entry| {
        entry.setting_up && entry.spare.is_none() && entry.key.is(spec, limits, runtime)
    })
}

/// A spare given a command.
pub(crate) enum Taken {
    /// A one-shot spare, now the command's own process (as a cold start is).
    Child(Child, GroupKiller),
    /// A serving sandbox running the command.
    Served(Served),
}

/// After a sandboxed command that ran as `spec` has ended and its output is
/// drained (never while it runs: it could change the host between the
/// spare's checks and its mounts): claim a place for a spare now, if the
/// pool has room and holds none for `spec` yet, and start it in the
/// background. (Claiming now keeps the pool's order that of the commands.)
pub(crate) fn replenish(policy: &Policy, spec: BwrapSpec) {
    if !reader_is_transparent(&policy.env) {
        return;
    }
    let Ok(runtime) = Handle::try_current() else {
        return;
    };
    let key = Key {
        spec,
        limits: policy.limits,
        runtime: runtime.id(),
    };
    let Some(id) = lock().reserve(key) else {
        return;
    };
    let job = Job {
        id,
        policy: policy.clone(),
        runtime,
    };
    if let Err(mpsc::SendError(job)) = starter().send(job) {
        // No starter thread: a runtime thread (not the blocking pool, whose
        // idle threads end and would fire bwrap's --die-with-parent).
        let Job {
            id,
            policy,
            runtime,
        } = job;
        let runtime_id = runtime.id();
        runtime.spawn(async move { start(id, &policy, runtime_id) });
    }
}

/// A spare to start: its place, its policy and the runtime it is for.
struct Job {
    id: u64,
    policy: Policy,
    runtime: Handle,
}

/// The thread that starts spares. Starting one (paths to stat, a cgroup to
/// make, a process to spawn) takes from half a millisecond to several, which
/// must not block a turn's runtime thread. One thread that lives as long as
/// the process, because bwrap's --die-with-parent fires when the *thread*
/// that spawned it ends.
fn starter() -> &'static mpsc::Sender<Job> {
    static STARTER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
    STARTER.get_or_init(|| {
        let (jobs, inbox) = mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("agentd-prestart".into())
            .spawn(move || {
                for job in inbox {
                    // The spare's pipes and reaper belong to its runtime.
                    let _entered = job.runtime.enter();
                    // A panic must not end this thread: its end would kill
                    // (--die-with-parent) every sandbox it started, busy ones too.
                    let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        start(job.id, &job.policy, job.runtime.id())
                    }));
                    if started.is_err() {
                        abandon(job.id);
                    }
                }
            });
        if let Err(err) = spawned {
            tracing::warn!(%err, "no spare starter thread; spares start on runtime threads");
        }
        // With no thread the receiver is gone and every send fails.
        jobs
    })
}

fn start(id: u64, policy: &Policy, runtime: RuntimeId) {
    let Some(bwrap) = find_bwrap() else {
        abandon(id);
        return;
    };
    // Again, after the command, which may have changed the host (a new `.git`).
    let spec = match BwrapSpec::new(bwrap, policy) {
        Ok(spec) => spec,
        Err(err) => {
            tracing::debug!(%err, "no spare sandbox");
            abandon(id);
            return;
        }
    };
    let key = Key {
        spec,
        limits: policy.limits,
        runtime,
    };
    let binds = bind_identities(&key.spec.args);
    // A serving sandbox keeps its executable from its commands, so the
    // egress forwarder could not start: such a policy gets one-shot spares.
    let serving = served::serving(&policy.limits) && !key.spec.forwarder;
    let host_pid_namespace = serving.then(crate::serve::host_pid_namespace).flatten();
    let command = if let Some(namespace) = host_pid_namespace {
        key.spec.serve(namespace)
    } else {
        key.spec.shell(READER)
    };
    let launch = key.spec.launch();
    // A start that binds inside the workspace must not overlap a command that
    // could rename things there (the `gate` module); it holds its pass until
    // the sandbox says it is set up, which only a serving one can.
    let pinned = key.spec.pins_workspace();
    let pass = if pinned {
        match host_pid_namespace.and_then(|_| gate::try_enter(&policy.workspace, Side::PinnedStart))
        {
            Some(pass) => Some(pass),
            None => {
                abandon(id);
                return;
            }
        }
    } else {
        None
    };
    if !lock().settle(id, key, binds) {
        SETTLED.notify_waiters();
        return;
    }
    let started = if host_pid_namespace.is_some() {
        served::start_serving(command, &policy.limits, &launch, pass)
    } else {
        // Unpinned: no pass (a pinned start without a serving sandbox was
        // abandoned above).
        drop(pass);
        start_reader(command, &policy.limits, &launch)
    };
    let spare = match started {
        Ok(spare) => spare,
        Err(err) => {
            tracing::debug!(%err, "could not start a spare sandbox");
            abandon(id);
            return;
        }
    };
    let mut pool = lock();
    let Some(entry) = pool.entries.iter_mut().find(|entry| entry.id == id) else {
        // The capacity was lowered meanwhile.
        drop(pool);
        SETTLED.notify_waiters();
        discard(spare);
        return;
    };
    entry.spare = Some(spare);
    entry.since = Instant::now();
    pool.ensure_sweeper();
    drop(pool);
    SETTLED.notify_waiters();
}

fn start_reader(
    command: tokio::process::Command,
    limits: &Limits,
    launch: &Launch,
) -> io::Result<Spare> {
    let (mut child, group) =
        spawn_confined(command, Stdio::piped(), limits, launch, false).map_err(io::Error::other)?;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| io::Error::other("spare sandbox has no stdin"))?
        .into_owned_fd()?;
    Ok(Spare {
        group,
        child,
        reader: Reader::Shell(stdin),
    })
}

/// Put a serving sandbox back after a command. It takes the place of a
/// spare for the same key (one a concurrent command's end started, waiting
/// or still starting), so the session keeps the sandbox it has been using.
/// False (and it killed) when the pool is full.
pub(crate) fn give_back(sandbox: Spare, key: Key, binds: BindIdentities) -> bool {
    let mut pool = lock();
    let replaced: Vec<Spare> = pool
        .entries
        .extract_if(.., |entry| entry.key == key)
        .filter_map(|entry| entry.spare)
        .collect();
    // (Full only when the capacity was lowered meanwhile.)
    let full = pool.entries.len() >= pool.capacity;
    let refused = if full {
        Some(sandbox)
    } else {
        pool.push(key, binds, Some(sandbox));
        pool.ensure_sweeper();
        None
    };
    drop(pool);
    // A command waiting for a spare it replaced takes this one.
    SETTLED.notify_waiters();
    replaced.into_iter().chain(refused).for_each(discard);
    !full
}

fn abandon(id: u64) {
    lock().entries.retain(|entry| entry.id != id);
    SETTLED.notify_waiters();
}

/// Kill a spare: its process group and cgroup (whose directory goes once
/// empty, from a thread if need be), and bwrap itself (`kill_on_drop`).
pub(crate) fn discard(spare: Spare) {
    drop(spare);
}

/// Kill spares as they expire; ends once the pool is empty.
fn sweep() {
    let mut pool = lock();
    loop {
        let expired = pool.remove_expired(Instant::now());
        if !expired.is_empty() {
            drop(pool);
            expired.into_iter().for_each(discard);
            pool = lock();
            continue;
        }
        if pool.entries.is_empty() {
            pool.sweeping = false;
            return;
        }
        let now = Instant::now();
        let wait = pool
            .entries
            .iter()
            .map(|entry| (entry.since + pool.idle).saturating_duration_since(now))
            .min()
            .unwrap_or(pool.idle);
        pool = SWEEPER
            .wait_timeout(pool, wait)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

/// (device, inode) of each `--bind`/`--ro-bind` source in `args`, `None` for
/// one that is gone. (A `--setenv` value reading `--bind` only adds a stat:
/// both sides of a comparison scan equal args.)
fn bind_identities(args: &[OsString]) -> BindIdentities {
    args.windows(2)
        .filter(|pair| pair[0] == "--bind" || pair[0] == "--ro-bind")
        .map(|pair| {
            std::fs::metadata(&pair[1])
                .ok()
                .map(|meta| (meta.dev(), meta.ino()))
        })
        .collect()
}

#[cfg(test)]
mod tests;
