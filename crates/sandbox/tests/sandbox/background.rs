//! `Sandbox::spawn_shell`: a command that outlives its call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use agentd_sandbox::{Policy, Sandbox};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

use crate::support::{assert_none_left, layout, marker, processes_mentioning, run};

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_background_shell_streams_and_its_kill_leaves_nothing() {
    let l = layout();
    let policy = Policy::new(&l.ws);
    let marker = marker("bg-shell");
    let command = format!(
        "sleep 300 & echo started; echo oops >&2; while true; do sleep 0.1; done # {marker}"
    );
    let mut process = Sandbox
        .spawn_shell(&policy, &command, &CancellationToken::new())
        .await
        .unwrap()
        .expect("started");
    let mut stdout = BufReader::new(process.take_stdout().unwrap()).lines();
    let mut stderr = BufReader::new(process.take_stderr().unwrap()).lines();
    let line = tokio::time::timeout(WAIT, stdout.next_line())
        .await
        .unwrap();
    assert_eq!(line.unwrap().as_deref(), Some("started"));
    let line = tokio::time::timeout(WAIT, stderr.next_line())
        .await
        .unwrap();
    assert_eq!(line.unwrap().as_deref(), Some("oops"));
    assert!(!process.has_exited());
    assert!(processes_mentioning(&marker) > 0);
    process.kill();
    tokio::time::timeout(WAIT, process.exited()).await.unwrap();
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn a_cancelled_start_runs_nothing() {
    let l = layout();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let started = Sandbox
        .spawn_shell(&Policy::new(&l.ws), "touch ran", &cancel)
        .await
        .unwrap();
    assert!(started.is_none());
    assert!(!l.ws.join("ran").exists());
}

/// Started before `.git` existed, it could rename what a new sandbox pins:
/// a start that pins `.git` waits until it has ended.
#[tokio::test]
async fn a_background_shell_holds_the_workspace_gate_until_it_ends() {
    let l = layout();
    let policy = Policy::new(&l.ws);
    let process = Sandbox
        .spawn_shell(&policy, "sleep 300", &CancellationToken::new())
        .await
        .unwrap()
        .expect("started");
    assert_holds_the_gate(&l.ws, &policy, process).await;
}

/// A command the model's call starts with no shell (an operator's command
/// tool) holds its pass to its end too.
#[tokio::test]
async fn a_gated_spawn_holds_the_workspace_gate_until_it_ends() {
    let l = layout();
    let policy = Policy::new(&l.ws);
    let argv = ["sleep".to_string(), "300".to_string()];
    let process = Sandbox
        .spawn_gated(&policy, &argv, &CancellationToken::new())
        .await
        .unwrap()
        .expect("started");
    assert_holds_the_gate(&l.ws, &policy, process).await;
}

/// `process` started before `.git` existed: a start that pins `.git` waits
/// until it has ended.
async fn assert_holds_the_gate(
    ws: &std::path::Path,
    policy: &Policy,
    process: agentd_sandbox::SandboxedProcess,
) {
    std::fs::create_dir(ws.join(".git")).unwrap();
    let pinned = tokio::spawn({
        let policy = policy.clone();
        async move { run(&policy, "echo pinned").await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !pinned.is_finished(),
        "a pinned start overlapped the command"
    );
    process.kill();
    let outcome = tokio::time::timeout(WAIT, pinned).await.unwrap().unwrap();
    assert_eq!(outcome.stdout, "pinned\n", "{outcome:?}");
}

/// A long-lived process (an MCP server, maybe a project's own) started
/// before `.git` existed is stopped when a start that pins `.git` would wait
/// for it: never beside that start, never stalling it.
#[tokio::test]
async fn a_long_lived_process_is_stopped_for_a_start_on_the_other_side() {
    let l = layout();
    let policy = Policy::new(&l.ws);
    let server = Sandbox.spawn(&policy, &sleeper()).await.unwrap();
    std::fs::create_dir(l.ws.join(".git")).unwrap();
    let outcome = tokio::time::timeout(WAIT, run(&policy, "echo pinned"))
        .await
        .expect("the pinned start stalled behind the long-lived process");
    assert_eq!(outcome.stdout, "pinned\n", "{outcome:?}");
    // (That it had ended before the start got through is the gate's own
    // test; here, that it was stopped at all.)
    tokio::time::timeout(WAIT, server.exited())
        .await
        .expect("it was not stopped for the pinned start");

    // Started now, it pins `.git` itself: until it has answered from inside
    // (its set-up over), an unpinned command (after `.git` is gone) stops it;
    // after that, none needs to.
    let early = Sandbox.spawn(&policy, &sleeper()).await.unwrap();
    let mut answered = Sandbox
        .spawn(
            &policy,
            &["sh", "-c", "echo up; exec sleep 300"].map(String::from),
        )
        .await
        .unwrap();
    let mut stdout = BufReader::new(answered.take_stdout().unwrap()).lines();
    let line = tokio::time::timeout(WAIT, stdout.next_line())
        .await
        .unwrap();
    assert_eq!(line.unwrap().as_deref(), Some("up"));
    answered.set_up();
    let pinned_beside = run(&policy, "echo again").await;
    assert_eq!(pinned_beside.stdout, "again\n");
    assert!(!early.has_exited(), "a start on its own side stopped it");
    std::fs::remove_dir_all(l.ws.join(".git")).unwrap();
    let outcome = tokio::time::timeout(WAIT, run(&policy, "echo unpinned"))
        .await
        .expect("the unpinned command stalled behind the long-lived process");
    assert_eq!(outcome.stdout, "unpinned\n", "{outcome:?}");
    tokio::time::timeout(WAIT, early.exited()).await.unwrap();
    assert!(
        !answered.has_exited(),
        "a set-up pinned process was stopped"
    );
}

fn sleeper() -> Vec<String> {
    ["sleep".to_string(), "300".to_string()].to_vec()
}
