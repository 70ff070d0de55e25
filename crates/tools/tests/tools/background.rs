//! Background commands (`Bash` with `run_in_background`, `BashOutput`,
//! `KillShell`) through the real sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use agentd_tools::{BackgroundShells, ToolResult};
use serde_json::json;
use support::{Workspace, assert_error_containing, assert_none_left, assert_ok, unique_marker};

/// Every wait here is bounded by this.
const WAIT: Duration = Duration::from_secs(30);

async fn start(w: &Workspace, command: &str) -> String {
    let result = w
        .call(
            "Bash",
            json!({"command": command, "run_in_background": true}),
        )
        .await;
    assert_ok(&result);
    let id = result
        .content
        .strip_prefix("Command running in background with ID: ")
        .unwrap_or_else(|| panic!("unexpected answer: {}", result.content));
    id.to_string()
}

async fn output(w: &Workspace, id: &str) -> ToolResult {
    let result = w.call("BashOutput", json!({"bash_id": id})).await;
    assert_ok(&result);
    result
}

/// The text between `<tag>` and `</tag>`, empty when absent.
fn section(result: &ToolResult, tag: &str) -> String {
    let open = format!("<{tag}>");
    let Some(start) = result.content.find(&open) else {
        return String::new();
    };
    let rest = &result.content[start + open.len()..];
    rest[..rest.find(&format!("</{tag}>")).unwrap()]
        .trim()
        .to_string()
}

/// The tick numbers in a read of the ticking loop.
fn ticks(result: &ToolResult) -> Vec<u64> {
    section(result, "stdout")
        .lines()
        .filter_map(|line| line.strip_prefix("tick ")?.split(' ').next()?.parse().ok())
        .collect()
}

/// Reads until a read has at least one tick; those ticks.
async fn next_ticks(w: &Workspace, id: &str) -> Vec<u64> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let result = output(w, id).await;
        assert!(
            result.content.contains("<status>running</status>"),
            "{}",
            result.content
        );
        let ticks = ticks(&result);
        if !ticks.is_empty() {
            return ticks;
        }
        assert!(tokio::time::Instant::now() < deadline, "no output in time");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_until_ended(background: &BackgroundShells) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !background.running().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "still running");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn ticking_loop(marker: &str) -> String {
    format!("i=0; while true; do i=$((i+1)); echo \"tick $i {marker}\"; sleep 0.1; done")
}

#[tokio::test]
async fn reads_return_new_output_and_kill_leaves_nothing() {
    let w = Workspace::new();
    let marker = unique_marker("bg-tick");
    let id = start(&w, &ticking_loop(&marker)).await;
    assert_eq!(id, "bash_1");
    let listed = w.ctx.background.running();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, id);
    assert!(listed[0].command.contains(&marker));

    let first = next_ticks(&w, &id).await;
    let second = next_ticks(&w, &id).await;
    assert!(first.windows(2).all(|pair| pair[0] < pair[1]), "{first:?}");
    assert!(
        second[0] > *first.last().unwrap(),
        "{first:?} then {second:?}"
    );
    assert!(support::processes_mentioning(&marker) > 0);

    let killed = w.call("KillShell", json!({"shell_id": id})).await;
    assert_ok(&killed);
    assert!(
        killed
            .content
            .starts_with("Successfully killed shell: bash_1 ("),
        "{}",
        killed.content
    );
    assert_none_left(&marker).await;
    let after = output(&w, &id).await;
    assert!(
        after.content.contains("<status>killed</status>"),
        "{}",
        after.content
    );
    assert!(w.ctx.background.running().is_empty());
    let again = w.call("KillShell", json!({"shell_id": id})).await;
    assert_error_containing(&again, "is not running");
}

#[tokio::test]
async fn status_exit_code_streams_and_filter() {
    let w = Workspace::new();
    let id = start(
        &w,
        "echo keep-1; echo drop-1; echo keep-2 >&2; echo drop-2 >&2; exit 3",
    )
    .await;
    wait_until_ended(&w.ctx.background).await;
    let result = w
        .call("BashOutput", json!({"bash_id": id, "filter": "^keep"}))
        .await;
    assert_ok(&result);
    assert!(
        result.content.starts_with("<status>failed</status>"),
        "{}",
        result.content
    );
    assert_eq!(section(&result, "exit_code"), "3");
    assert_eq!(section(&result, "stdout"), "keep-1");
    assert_eq!(section(&result, "stderr"), "keep-2");
    // Lines the filter left out were consumed all the same.
    let next = output(&w, &id).await;
    assert_eq!(section(&next, "stdout"), "");
    assert_eq!(section(&next, "stderr"), "");

    let done = start(&w, "echo fine").await;
    assert_ne!(done, id);
    wait_until_ended(&w.ctx.background).await;
    let result = output(&w, &done).await;
    assert!(
        result.content.starts_with("<status>completed</status>"),
        "{}",
        result.content
    );
    assert_eq!(section(&result, "exit_code"), "0");
    assert_eq!(section(&result, "stdout"), "fine");

    let bad = w
        .call("BashOutput", json!({"bash_id": id, "filter": "("}))
        .await;
    assert_error_containing(&bad, "not a valid regular expression");
}

#[tokio::test]
async fn an_unknown_id_is_gone() {
    let w = Workspace::new();
    for (tool, input) in [
        ("BashOutput", json!({"bash_id": "bash_42"})),
        ("KillShell", json!({"shell_id": "bash_42"})),
        ("BashOutput", json!({"bash_id": "nonsense"})),
    ] {
        let result = w.call(tool, input).await;
        assert_error_containing(&result, "is gone");
        assert_error_containing(&result, "agentd restarted");
    }
}

#[tokio::test]
async fn ending_the_session_kills_every_command() {
    let w = Workspace::new();
    let marker = unique_marker("bg-end");
    start(&w, &ticking_loop(&marker)).await;
    start(&w, &format!("sleep 300; echo {marker}")).await;
    assert_eq!(w.ctx.background.running().len(), 2);
    w.ctx.background.end_all().await;
    assert!(w.ctx.background.running().is_empty());
    assert_none_left(&marker).await;
    let refused = w
        .call(
            "Bash",
            json!({"command": "true", "run_in_background": true}),
        )
        .await;
    assert_error_containing(&refused, "the session has ended");
}

#[tokio::test]
async fn an_unread_command_is_killed_after_the_idle_timeout() {
    let mut w = Workspace::new();
    w.ctx.background = BackgroundShells::new(Duration::from_millis(300), 1);
    let marker = unique_marker("bg-idle");
    let id = start(&w, &format!("sleep 300; echo {marker}")).await;
    wait_until_ended(&w.ctx.background).await;
    assert_none_left(&marker).await;
    let result = output(&w, &id).await;
    assert!(
        result.content.contains("<status>killed</status>"),
        "{}",
        result.content
    );
    assert!(
        result.content.contains("idle timeout"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn the_sandbox_policy_and_limits_apply() {
    let mut w = Workspace::new();
    w.ctx.policy.limits.open_files = Some(77);
    let probe = format!(
        "ulimit -n; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; \
         touch {}/escaped && echo wrote-outside",
        w.outside.display()
    );
    let id = start(&w, &probe).await;
    wait_until_ended(&w.ctx.background).await;
    let result = output(&w, &id).await;
    // Only loopback exists: the network stays off.
    assert_eq!(section(&result, "stdout"), "77\nlo", "{}", result.content);
    assert!(!w.outside.join("escaped").exists());

    // The control: with the network on, the host's interfaces are there.
    if std::fs::read_dir("/sys/class/net").unwrap().count() > 1 {
        w.ctx.policy.network = true;
        let id = start(&w, "tail -n +3 /proc/net/dev | cut -d: -f1").await;
        wait_until_ended(&w.ctx.background).await;
        let lines = section(&output(&w, &id).await, "stdout").lines().count();
        assert!(lines > 1);
    }
}

#[tokio::test]
async fn output_beyond_the_cap_keeps_the_newest() {
    let w = Workspace::new();
    let id = start(
        &w,
        "head -c 3000000 /dev/zero | tr '\\0' a; echo; echo THE-END",
    )
    .await;
    wait_until_ended(&w.ctx.background).await;
    let result = output(&w, &id).await;
    assert!(
        result.content.contains("earlier bytes were dropped"),
        "{}",
        &result.content[..300]
    );
    assert!(section(&result, "stdout").ends_with("THE-END"));
    assert!(result.content.chars().count() <= w.ctx.result_cap + 100);
}

#[tokio::test]
async fn where_background_commands_are_unavailable_nothing_starts() {
    let mut w = Workspace::new();
    let marker = unique_marker("bg-none");
    w.ctx.background = BackgroundShells::unavailable("in a cluster, run it in the foreground");
    let result = w
        .call(
            "Bash",
            json!({"command": format!("sleep 30 # {marker}"), "run_in_background": true}),
        )
        .await;
    assert_error_containing(&result, "not available here: in a cluster");
    assert_none_left(&marker).await;
}
