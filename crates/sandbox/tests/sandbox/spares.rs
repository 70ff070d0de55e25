//! Prestarted spare sandboxes against the real bubblewrap: a command run in a
//! spare must see and do exactly what it would in a cold sandbox. The pool is
//! process-wide, so every test holds [`exclusive_pool`] through [`pool`]: no
//! other test of this binary runs a command meanwhile.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use agentd_sandbox::{
    ExecOutcome, Policy, Sandbox, set_spare_capacity, set_spare_idle, spares_used, spares_waiting,
};
use support::{
    PROBE, Workspace, assert_none_left, exclusive_pool, marker, processes_mentioning, request, run,
    run_cancelled_after, run_for, wait_for_spare, workspace,
};
use tokio_util::sync::CancellationToken;

/// The pool for one test; turns spares off again when dropped.
struct PoolGuard {
    _exclusive: std::sync::RwLockWriteGuard<'static, ()>,
}

impl Drop for PoolGuard {
    fn drop(&mut self) {
        set_spare_capacity(0);
        set_spare_idle(Duration::from_secs(30));
    }
}

async fn pool(capacity: usize, idle: Duration) -> PoolGuard {
    let exclusive = exclusive_pool();
    // Spares left by an earlier test belong to its (gone) runtime.
    set_spare_capacity(0);
    set_spare_idle(idle);
    set_spare_capacity(capacity);
    PoolGuard {
        _exclusive: exclusive,
    }
}

/// A pool, a workspace with its default policy, and a spare waiting for it.
async fn spare_ready(capacity: usize, idle: Duration) -> (PoolGuard, Workspace, Policy) {
    let guard = pool(capacity, idle).await;
    let ws = workspace("agentd-spares");
    let policy = Policy::new(&ws.path);
    run(&policy, "true").await;
    wait_for_spare().await;
    (guard, ws, policy)
}

/// Run `command` once cold and once in a spare; returns both outcomes.
async fn cold_and_warm(policy: &Policy, command: &str) -> (ExecOutcome, ExecOutcome) {
    // Capacity 0 kills the waiting spares and starts none.
    set_spare_capacity(0);
    let cold = run(policy, command).await;
    set_spare_capacity(4);
    run(policy, "true").await;
    wait_for_spare().await;
    let used = spares_used();
    let warm = run(policy, command).await;
    assert_eq!(spares_used(), used + 1, "the second run took the spare");
    (cold, warm)
}

fn assert_same(cold: &ExecOutcome, warm: &ExecOutcome) {
    assert_eq!(warm.stdout, cold.stdout);
    assert_eq!(warm.stderr, cold.stderr);
    assert_eq!(warm.exit_code, cold.exit_code);
    assert_eq!(
        (warm.truncated, warm.timed_out, warm.cancelled),
        (cold.truncated, cold.timed_out, cold.cancelled)
    );
}

#[tokio::test]
async fn a_spare_runs_the_command_exactly_as_a_cold_sandbox() {
    let _pool = pool(4, Duration::from_secs(30)).await;
    let ws = workspace("agentd-spares");
    let policy = Policy::new(&ws.path);
    let (cold, warm) = cold_and_warm(&policy, PROBE).await;
    assert_same(&cold, &warm);
    assert_eq!(warm.exit_code, Some(7));
    assert_eq!(warm.stderr, "to-stderr\n");
    assert!(
        warm.stdout.starts_with("0=bash _=bash SHLVL=1 "),
        "{}",
        warm.stdout
    );
    assert!(warm.stdout.contains("\nstdin=[]\n"), "{}", warm.stdout);
    assert!(
        warm.stdout
            .contains(&format!("\nHOME={}\n", ws.path.display())),
        "{}",
        warm.stdout
    );

    // Quotes, backslashes, tabs, UTF-8, blank lines and trailing newlines
    // reach bash byte for byte (a here-document open at the end keeps them).
    let tricky = "printf '%s|' \"a  b\" 'c\\d' $'e\\tf' \"\\$HOME\" 'é€'\necho\n\ncat <<'END'\n x\\y \"z\"\n\n\n";
    let (cold, warm) = cold_and_warm(&policy, tricky).await;
    assert_same(&cold, &warm);
    assert!(
        warm.stdout.starts_with("a  b|c\\d|e\tf|$HOME|é€|\n"),
        "{}",
        warm.stdout
    );
    assert!(
        warm.stdout.ends_with(" x\\y \"z\"\n\n\n"),
        "{:?}",
        warm.stdout
    );

    // An empty command too.
    let (cold, warm) = cold_and_warm(&policy, "").await;
    assert_same(&cold, &warm);
    assert_eq!(warm.exit_code, Some(0));
}

fn identity(path: &Path) -> (u64, u64) {
    let meta = std::fs::metadata(path).unwrap();
    (meta.dev(), meta.ino())
}

/// Waits for a spare's shell to read its stdin (its mounts are then made), and
/// returns the identity of the directory it has at `ws`.
async fn spare_mount_of(ws: &Path) -> (u64, u64) {
    let inside = ws.strip_prefix("/").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let reading = cmdline.windows(10).any(|window| window == b"read -r -d");
            if reading && let Ok(meta) = std::fs::metadata(entry.path().join("root").join(inside)) {
                return (meta.dev(), meta.ino());
            }
        }
        assert!(Instant::now() < deadline, "no spare is reading");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_replaced_workspace_is_never_served_by_an_old_spare() {
    let (_pool, ws, policy) = spare_ready(4, Duration::from_secs(30)).await;

    // The spare shares the directory, so writes made after it started show.
    std::fs::write(ws.path.join("marker.txt"), "old").unwrap();
    let used = spares_used();
    assert_eq!(run(&policy, "cat marker.txt").await.stdout, "old");
    assert_eq!(spares_used(), used + 1);

    // A directory put in its place (a checkpoint restore, say) is a new
    // mount; the waiting spare has the old one.
    wait_for_spare().await;
    assert_eq!(spare_mount_of(&ws.path).await, identity(&ws.path));
    std::fs::rename(&ws.path, ws.path.with_extension("old")).unwrap();
    std::fs::create_dir(&ws.path).unwrap();
    std::fs::write(ws.path.join("marker.txt"), "new").unwrap();
    let used = spares_used();
    let outcome = run(&policy, "cat marker.txt; echo hi > written.txt").await;
    assert_eq!(outcome.stdout, "new");
    assert_eq!(spares_used(), used, "the stale spare was not used");
    assert_eq!(
        std::fs::read_to_string(ws.path.join("written.txt")).unwrap(),
        "hi\n"
    );
    // And the spare started after that run serves the new directory.
    wait_for_spare().await;
    assert_eq!(run(&policy, "cat marker.txt").await.stdout, "new");
    assert_eq!(spares_used(), used + 1);
}

#[tokio::test]
async fn a_changed_policy_or_a_long_command_starts_cold() {
    let (_pool, ws, policy) = spare_ready(1, Duration::from_secs(30)).await;
    let used = spares_used();

    let mut other = policy.clone();
    other.env.insert("EXTRA".into(), "1".into());
    assert_eq!(run(&other, "echo $EXTRA").await.stdout, "1\n");
    let mut tighter = policy.clone();
    tighter.limits.open_files = Some(64);
    assert_eq!(run(&tighter, "ulimit -n").await.stdout, "64\n");

    // Over 4 KiB: cold, and the waiting spare stays for the next command.
    let long = format!(": {}; echo long", "x".repeat(5000));
    let outcome = run(&policy, &long).await;
    assert_eq!(outcome.stdout, "long\n");
    assert_eq!(spares_used(), used, "nothing so far took the spare");

    // A call cancelled before it starts runs nothing and leaves the spare.
    let cancel = CancellationToken::new();
    cancel.cancel();
    let outcome = Sandbox
        .exec(
            &policy,
            &request("touch ran.txt", Duration::from_secs(20)),
            None,
            cancel,
        )
        .await
        .unwrap();
    assert!(outcome.cancelled);
    assert!(!ws.path.join("ran.txt").exists());
    assert_eq!(spares_waiting(), 1);

    assert_eq!(run(&policy, "echo short").await.stdout, "short\n");
    assert_eq!(spares_used(), used + 1);
}

#[tokio::test]
async fn timeout_cancel_and_background_jobs_work_in_a_spare() {
    let (_pool, _ws, policy) = spare_ready(4, Duration::from_secs(30)).await;
    let used = spares_used();
    let timeout = marker("spare-timeout");
    let started = Instant::now();
    let outcome = run_for(
        &policy,
        &format!("bash -c 'sleep 30' {timeout} & sleep 30"),
        Duration::from_millis(300),
    )
    .await;
    assert!(outcome.timed_out && !outcome.cancelled, "{outcome:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(spares_used(), used + 1);
    assert_none_left(&timeout).await;

    wait_for_spare().await;
    let cancelled = marker("spare-cancel");
    let started = Instant::now();
    let outcome = run_cancelled_after(
        &policy,
        &format!("bash -c 'sleep 30' {cancelled}"),
        Duration::from_millis(300),
    )
    .await;
    assert!(outcome.cancelled && !outcome.timed_out, "{outcome:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(spares_used(), used + 2);
    assert_none_left(&cancelled).await;

    wait_for_spare().await;
    let background = marker("spare-background");
    let outcome = run(
        &policy,
        &format!("bash -c 'sleep 60' {background} & echo started"),
    )
    .await;
    assert_eq!(outcome.stdout, "started\n");
    assert_eq!(spares_used(), used + 3);
    assert_none_left(&background).await;
}

/// Host processes of the sandboxes for `ws` (bwrap's command line names it).
fn sandboxes_of(ws: &Path) -> usize {
    processes_mentioning(&ws.display().to_string())
}

/// The pool's sweeper thread ends once the pool is empty.
fn sweeper_running() -> bool {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .any(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|comm| comm.starts_with("agentd-spare"))
        })
}

#[tokio::test]
async fn idle_spares_expire_and_leave_no_process() {
    let (_pool, ws, policy) = spare_ready(4, Duration::from_secs(1)).await;
    assert!(sandboxes_of(&ws.path) > 0, "the spare is running");
    // (The thread names itself just after it starts.)
    let deadline = Instant::now() + Duration::from_secs(1);
    while !sweeper_running() {
        assert!(Instant::now() < deadline, "no sweeper");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }

    let deadline = Instant::now() + Duration::from_secs(5);
    while spares_waiting() > 0 || sandboxes_of(&ws.path) > 0 || sweeper_running() {
        assert!(
            Instant::now() < deadline,
            "{} spares, {} processes left, sweeper running: {}",
            spares_waiting(),
            sandboxes_of(&ws.path),
            sweeper_running()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The next command starts cold and still works.
    let used = spares_used();
    assert_eq!(run(&policy, "echo ok").await.stdout, "ok\n");
    assert_eq!(spares_used(), used);
}

#[tokio::test]
async fn capacity_zero_never_starts_a_spare() {
    let _pool = pool(0, Duration::from_secs(30)).await;
    let ws = workspace("agentd-spares");
    let policy = Policy::new(&ws.path);
    let used = spares_used();
    for _ in 0..2 {
        assert_eq!(run(&policy, "echo ok").await.stdout, "ok\n");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(spares_waiting(), 0);
    assert_eq!(sandboxes_of(&ws.path), 0);
    assert_eq!(spares_used(), used);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_commands_each_get_a_sandbox_of_their_own() {
    let (_pool, _ws, policy) = spare_ready(2, Duration::from_secs(30)).await;
    let used = spares_used();
    for round in 0..4 {
        // Each sandbox has its own /tmp: a shared one would mix the names.
        let runs: Vec<_> = (0..4)
            .map(|i| {
                let policy = policy.clone();
                let command = format!("echo {round}-{i} > /tmp/mine; sleep 0.05; cat /tmp/mine");
                tokio::spawn(async move { run(&policy, &command).await })
            })
            .collect();
        for (i, handle) in runs.into_iter().enumerate() {
            assert_eq!(handle.await.unwrap().stdout, format!("{round}-{i}\n"));
        }
        wait_for_spare().await;
    }
    assert_eq!(
        spares_used(),
        used + 4,
        "one command a round took the spare"
    );
}
