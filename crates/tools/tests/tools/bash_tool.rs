//! `Bash` through the real sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, Instant};

use agentd_protocol::OutputStream;
use serde_json::json;
use support::{Workspace, assert_error_containing, assert_ok, call_with};
use tokio::sync::mpsc;

#[tokio::test]
async fn runs_in_the_workspace() {
    let w = Workspace::new();
    let result = w
        .call(
            "Bash",
            json!({"command": "echo hi > f.txt && cat f.txt && pwd", "description": "demo"}),
        )
        .await;
    assert_ok(&result);
    assert_eq!(result.content, format!("hi\n{}", w.ws.display()));
    assert_eq!(w.read("f.txt"), "hi\n");
}

#[tokio::test]
async fn stderr_and_exit_code_are_reported() {
    let w = Workspace::new();
    let result = w
        .call("Bash", json!({"command": "echo out; echo err >&2; exit 3"}))
        .await;
    assert!(result.is_error);
    assert_eq!(result.content, "out\nerr\n[exit code 3]");
}

#[tokio::test]
async fn silent_success_says_so() {
    let w = Workspace::new();
    let result = w.call("Bash", json!({"command": "true"})).await;
    assert_ok(&result);
    assert_eq!(result.content, "(no output)");
}

#[tokio::test]
async fn timeout_kills_the_command() {
    let w = Workspace::new();
    let started = Instant::now();
    let result = w
        .call("Bash", json!({"command": "sleep 20", "timeout": 300}))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    assert_error_containing(&result, "timed out after 300 ms");
}

#[tokio::test]
async fn timeout_is_capped_at_the_maximum() {
    let mut w = Workspace::new();
    w.ctx.bash_max_timeout = Duration::from_millis(300);
    let started = Instant::now();
    let result = w
        .call("Bash", json!({"command": "sleep 20", "timeout": 600000}))
        .await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_error_containing(&result, "timed out");
}

#[tokio::test]
async fn bad_timeouts_are_refused() {
    let w = Workspace::new();
    for timeout in [json!(0), json!(-5)] {
        let result = w
            .call("Bash", json!({"command": "true", "timeout": timeout}))
            .await;
        assert_error_containing(&result, "`timeout` must be a positive number");
    }
    let result = w
        .call("Bash", json!({"command": "true", "timeout": "60"}))
        .await;
    assert_error_containing(&result, "field `timeout` must be a number");
}

#[tokio::test]
async fn cancel_interrupts_within_a_second() {
    let w = Workspace::new();
    let cancel = w.ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let result = w.call("Bash", json!({"command": "sleep 20"})).await;
    assert!(
        started.elapsed() < Duration::from_millis(1200),
        "took {:?}",
        started.elapsed()
    );
    assert_error_containing(&result, "interrupted");
}

#[tokio::test]
async fn live_output_is_forwarded() {
    let w = Workspace::new();
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let mut ctx = w.ctx.clone();
    ctx.output = Some(sender);
    let result = call_with(&ctx, "Bash", json!({"command": "echo one; echo two >&2"})).await;
    assert_ok(&result);
    drop(ctx);
    let mut seen = Vec::new();
    while let Ok(chunk) = receiver.try_recv() {
        seen.push((chunk.stream, chunk.text));
    }
    assert!(
        seen.contains(&(OutputStream::Stdout, "one\n".into())),
        "{seen:?}"
    );
    assert!(
        seen.contains(&(OutputStream::Stderr, "two\n".into())),
        "{seen:?}"
    );
}

#[tokio::test]
async fn long_output_is_capped_with_a_note() {
    let mut w = Workspace::new();
    w.ctx.result_cap = 500;
    let result = w.call("Bash", json!({"command": "seq 1 10000"})).await;
    assert_ok(&result);
    assert!(
        result.content.contains("[output truncated:"),
        "{}",
        result.content
    );
    assert!(
        result.content.chars().count() < 700,
        "{}",
        result.content.len()
    );
}

#[tokio::test]
async fn long_output_keeps_its_head_and_its_end() {
    let mut w = Workspace::new();
    w.ctx.result_cap = 2_000;
    let result = w
        .call(
            "Bash",
            json!({"command": "seq 1 100000; echo FAILED-AT-THE-END >&2"}),
        )
        .await;
    assert_ok(&result);
    let content = &result.content;
    assert!(content.starts_with("1\n2\n3\n"), "{content}");
    assert!(
        content.contains("\n100000\n"),
        "the end of stdout: {content}"
    );
    assert!(content.contains("FAILED-AT-THE-END"), "stderr: {content}");
    assert!(content.contains("bytes not kept"), "{content}");
    assert!(content.chars().count() <= 2_100, "{}", content.len());
}

#[tokio::test]
async fn empty_command_is_an_error() {
    let w = Workspace::new();
    assert_error_containing(
        &w.call("Bash", json!({"command": "  "})).await,
        "`command` is empty",
    );
}

#[tokio::test]
async fn environment_does_not_leak_into_the_command() {
    let w = Workspace::new();
    let result = w
        .call("Bash", json!({"command": "env | grep -c CARGO || true"}))
        .await;
    assert_eq!(result.content, "0");
}
