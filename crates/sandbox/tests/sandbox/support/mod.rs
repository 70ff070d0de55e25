//! Shared by the sandbox tests: a session layout on the host, helpers to run
//! commands and find leftover processes, and the lock around the spare pool.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use agentd_sandbox::{
    ExecOutcome, ExecRequest, Policy, Sandbox, bwrap_available, create_workspace, spares_waiting,
};
use tokio_util::sync::CancellationToken;

/// A server's layout: `root/data/agentd.db` (the data dir), `root/sessions/ws`
/// (this session) and `root/sessions/other/secret.txt` (another session). The
/// root lives under the target dir, not `/tmp`, because the sandbox's `/tmp` is
/// a private tmpfs where writes would succeed harmlessly.
pub struct Layout {
    _pool: RwLockReadGuard<'static, ()>,
    _root: tempfile::TempDir,
    pub root: PathBuf,
    pub data: PathBuf,
    pub ws: PathBuf,
    pub other: PathBuf,
}

pub const DB_CONTENT: &str = "SQLite format 3 -- agentd database";
pub const OTHER_SECRET: &str = "other-session-secret";

/// The spare pool is process-wide: while a `spares` test has it on, every
/// sandboxed command of any test would start spares (taking the pool's places)
/// or run in one (counting in `spares_used`). So the `spares` tests hold
/// [`exclusive_pool`] and every other test that runs commands holds
/// [`shared_pool`] (through its fixture); a holder of either must not take the
/// other, or it deadlocks.
static POOL: RwLock<()> = RwLock::new(());

/// For a test that runs commands with spares off (the default).
pub fn shared_pool() -> RwLockReadGuard<'static, ()> {
    POOL.read().unwrap_or_else(PoisonError::into_inner)
}

/// For a test that turns spares on.
pub fn exclusive_pool() -> RwLockWriteGuard<'static, ()> {
    POOL.write().unwrap_or_else(PoisonError::into_inner)
}

pub fn layout() -> Layout {
    assert!(bwrap_available(), "these tests need bubblewrap installed");
    let pool = shared_pool();
    let root = tempfile::Builder::new()
        .prefix("agentd-escapes")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let path = root.path().canonicalize().unwrap();
    let data = path.join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("agentd.db"), DB_CONTENT).unwrap();
    let sessions = path.join("sessions");
    let ws = create_workspace(&sessions, "ws").unwrap();
    let other = create_workspace(&sessions, "other").unwrap();
    std::fs::write(other.join("secret.txt"), OTHER_SECRET).unwrap();
    Layout {
        _pool: pool,
        _root: root,
        root: path,
        data,
        ws,
        other,
    }
}

/// A workspace with a path unique to its test, to find its processes by
/// (under the target dir: the sandbox's /tmp is its own).
pub struct Workspace {
    _root: tempfile::TempDir,
    pub path: PathBuf,
}

pub fn workspace(prefix: &str) -> Workspace {
    assert!(bwrap_available(), "these tests need bubblewrap installed");
    let root = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let path = root.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir(&path).unwrap();
    Workspace { _root: root, path }
}

/// The background start of a spare may take a moment.
pub async fn wait_for_spare() {
    wait_for_spares(1).await;
}

/// Until `count` spares are waiting.
pub async fn wait_for_spares(count: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while spares_waiting() < count {
        assert!(std::time::Instant::now() < deadline, "no spare was started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub fn request(command: &str, timeout: Duration) -> ExecRequest {
    ExecRequest {
        command: command.into(),
        timeout,
        output_cap: 1 << 20,
    }
}

pub async fn run(policy: &Policy, command: &str) -> ExecOutcome {
    run_for(policy, command, Duration::from_secs(20)).await
}

pub async fn run_for(policy: &Policy, command: &str, timeout: Duration) -> ExecOutcome {
    Sandbox
        .exec(
            policy,
            &request(command, timeout),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap()
}

/// Run `command`, cancelling it after `after` (its timeout is a minute).
pub async fn run_cancelled_after(policy: &Policy, command: &str, after: Duration) -> ExecOutcome {
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        trigger.cancel();
    });
    Sandbox
        .exec(
            policy,
            &request(command, Duration::from_secs(60)),
            None,
            cancel,
        )
        .await
        .unwrap()
}

/// A string unique to this test run, to put in a command and find its processes by.
pub fn marker(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("agentd-{name}-{}-{nanos}", std::process::id())
}

#[allow(unused_imports)] // not every test binary that includes this module uses them
pub use agentd_testkit::processes::{assert_none_left, processes_mentioning};

pub fn failed(outcome: &ExecOutcome) -> bool {
    outcome.exit_code != Some(0)
}

/// What a serving sandbox's server has on its command line.
pub const SERVE_ARGUMENT: &str = "__sandbox-serve";

/// What a command can observe about its start: arguments, shell state,
/// environment, directory, descriptors, stdin, signals, limits, cgroup,
/// mounts. Pipe inode numbers are dropped (each run has new pipes), and so
/// are the signal queue counts (system-wide per user, so they drift). The
/// status lines are grep's own (what bash hands its commands): bash's own
/// signal mask depends on whether grep reads it before bash blocks SIGCHLD
/// to wait for it.
pub const PROBE: &str = r#"echo "0=$0 _=$_ SHLVL=$SHLVL pid=$$ ppid=$PPID"
env | sort
pwd
ls -l --time-style=+ /proc/self/fd | sed -E 's/:\[[0-9]+\]//'
printf 'stdin=[%s]\n' "$(cat)"
grep -E '^(Sig(Blk|Ign|Cgt)|Cap|NoNewPrivs|Seccomp|Uid|Gid|Groups)' /proc/self/status
umask
ulimit -a
cat /proc/$$/cgroup
sed -E 's/^([^ ]+ ){3}//; s/ (shared|master|propagate_from):[0-9]+//g' /proc/self/mountinfo
ls -A / /tmp
set -o
shopt
declare -p | grep -vE '^declare -[^ ]+ (BASHPID|EPOCH|RANDOM|SRANDOM|SECONDS)'
echo to-stderr >&2
exit 7"#;

/// An unsandboxed command leads a session of its own (so it has no
/// controlling terminal, even under `sudo agentd` in a terminal); an
/// operator's host command also gains no privileges by exec and creates
/// files for its user alone. A `sandbox = "off"` profile keeps the umask.
pub async fn unsandboxed_commands_are_detached() {
    let ws = workspace("agentd-detached");
    let probe = "echo $$; cut -d' ' -f6 /proc/$$/stat; \
                 grep -E '^(NoNewPrivs|Umask):' /proc/$$/status | tr -d ' \\t'; \
                 touch made; stat -c %a made; rm made";
    for host in [false, true] {
        let mut policy = Policy::new(&ws.path);
        policy.unsandboxed = true;
        policy.host_command = host;
        let outcome = run(&policy, probe).await;
        let lines: Vec<&str> = outcome.stdout.lines().collect();
        assert_eq!(lines.len(), 5, "{outcome:?}");
        assert_eq!(lines[0], lines[1], "session id is its pid: {outcome:?}");
        if host {
            assert_eq!(
                lines[2..],
                ["Umask:0077", "NoNewPrivs:1", "600"],
                "{outcome:?}"
            );
        } else {
            assert_ne!(lines[3], "NoNewPrivs:1", "{outcome:?}");
            assert_ne!(lines[2], "Umask:0077", "{outcome:?}");
        }
    }
}
