//! Operator command tools (`[[commands]]`) through the real sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::Workspace;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use agentd_sandbox::{Policy, Sandbox};
use agentd_tools::command::{ArgvPart, CommandEnv, CommandRun, CommandSpec, RunsOn, run_command};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

fn echo_spec() -> CommandSpec {
    CommandSpec {
        name: "hello".into(),
        description: "Say hello".into(),
        argv: ["echo", "hello"]
            .into_iter()
            .map(|part| ArgvPart::Literal(part.into()))
            .collect(),
        params: BTreeMap::new(),
        mutating: false,
        confirm: false,
        timeout: WAIT,
        env: BTreeMap::new(),
        secret_env: BTreeSet::new(),
        audience: None,
        runs_on: RunsOn::Sandbox,
    }
}

/// A workspace with `.git`, and a background Bash started before `.git`
/// existed (it could swap `.git` for a symlink while a sandbox binds it).
async fn unpinned_command_running() -> (Workspace, Policy, agentd_sandbox::SandboxedProcess) {
    let w = Workspace::new();
    let policy = Policy::new(&w.ws);
    let background = Sandbox
        .spawn_shell(&policy, "sleep 300", &CancellationToken::new())
        .await
        .unwrap()
        .expect("started");
    std::fs::create_dir(w.ws.join(".git")).unwrap();
    (w, policy, background)
}

/// `argv` run as a command tool in the sandbox, in a task of its own.
fn start(
    argv: &[&str],
    policy: &Policy,
    cancel: &CancellationToken,
) -> tokio::task::JoinHandle<Result<CommandRun, String>> {
    let mut spec = echo_spec();
    spec.argv = argv
        .iter()
        .map(|part| ArgvPart::Literal((*part).into()))
        .collect();
    let argv: Vec<String> = argv.iter().map(|part| (*part).to_string()).collect();
    let (policy, cancel) = (policy.clone(), cancel.clone());
    tokio::spawn(async move {
        let env = CommandEnv::as_written(&spec);
        run_command(&Sandbox, &spec, &env, &argv, &policy, &cancel).await
    })
}

/// The command's sandbox would bind `.git` while the background Bash could
/// swap it: its start waits, like a cold Bash, until that one has ended.
#[tokio::test]
async fn a_command_waits_for_the_workspace_gate_like_a_cold_bash() {
    let (_w, policy, background) = unpinned_command_running().await;
    let command = start(&["echo", "hello"], &policy, &CancellationToken::new());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !command.is_finished(),
        "the command's sandbox started while an unpinned command ran"
    );
    background.kill();
    let run = tokio::time::timeout(WAIT, command)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(run.succeeded(), "{}", run.summary());
    assert_eq!(run.stdout, "hello\n");
}

/// Interrupted while it waits at the gate: nothing runs.
#[tokio::test]
async fn a_command_interrupted_at_the_gate_runs_nothing() {
    let (w, policy, background) = unpinned_command_running().await;
    let cancel = CancellationToken::new();
    let command = start(&["touch", "ran"], &policy, &cancel);
    tokio::time::sleep(Duration::from_millis(500)).await;
    cancel.cancel();
    let run = tokio::time::timeout(WAIT, command)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(run.cancelled, "{}", run.summary());
    background.kill();
    assert!(!w.ws.join("ran").exists());
}
