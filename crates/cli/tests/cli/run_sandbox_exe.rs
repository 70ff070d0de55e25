//! Which executable sandboxes start through: the small `agentd-sandbox`
//! beside agentd when it is this build's, else agentd itself.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::run_harness::{Harness, Run, Wire};
use agentd_protocol::Event;
use serde_json::json;

fn bash_then_done(runs: usize) -> serde_json::Value {
    let mut replies = Vec::new();
    for _ in 0..runs {
        replies.push(json!({"content": [{"type": "tool_use", "name": "Bash",
            "input": {"command": "echo ran-$((6*7)); tr '\\0' ' ' < /proc/1/cmdline"}}]}));
        replies.push(json!({"content": [{"type": "text", "text": "done"}]}));
    }
    json!({ "replies": replies })
}

async fn run_with(h: &Harness, agentd: &Path) -> Run {
    let mut cmd = h.program(agentd);
    cmd.args([
        "run",
        "--output-format",
        "stream-json",
        "--permission-mode",
        "bypass",
        "run it",
    ])
    .env("AGENTD_LOG", "agentd_sandbox=debug");
    let output = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    Run::from_output(output)
}

fn command_output(run: &Run) -> String {
    run.events
        .iter()
        .find_map(|e| match &e.event {
            Event::ToolFinished { output, .. } => Some(output.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no command ran; stderr: {}", run.stderr))
}

/// A directory only its owner may write (whatever the umask), inside the
/// build directory (so hard links work there), with `names` of the built
/// executables linked (or copied) into it.
fn bin_dir(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let built = Path::new(env!("CARGO_BIN_EXE_agentd")).parent().unwrap();
    for name in names {
        let (from, to) = (built.join(name), dir.path().join(name));
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).unwrap();
        }
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

#[tokio::test]
async fn sandboxes_start_through_the_helper_of_the_same_build_only() {
    let h = Harness::new(Wire::Anthropic, bash_then_done(3)).await;

    // As built: the helper beside agentd is taken, and serves the commands.
    let built = bin_dir(&["agentd", agentd_sandbox::HELPER_NAME]);
    let run = run_with(&h, &built.path().join("agentd")).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert!(
        run.stderr.contains("sandboxes start through the helper"),
        "the helper was not taken: {}",
        run.stderr
    );
    let output = command_output(&run);
    assert!(output.contains("ran-42"), "{output}");
    assert!(output.contains("__sandbox-serve"), "{output}");

    // Beside an executable of another build: refused, said so, and the
    // command runs through agentd itself.
    let bin = bin_dir(&["agentd"]);
    let agentd = bin.path().join("agentd");
    let stale = bin.path().join(agentd_sandbox::HELPER_NAME);
    std::fs::copy("/bin/true", &stale).unwrap();
    std::fs::set_permissions(&stale, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = run_with(&h, &agentd).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert!(
        run.stderr.contains("it is another build"),
        "no word of the stale helper: {}",
        run.stderr
    );
    assert!(!run.stderr.contains("sandboxes start through the helper"));
    assert!(command_output(&run).contains("ran-42"));

    // None at all: agentd itself, without a warning.
    std::fs::remove_file(&stale).unwrap();
    let run = run_with(&h, &agentd).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert!(run.stderr.contains("no helper"), "{}", run.stderr);
    assert!(!run.stderr.contains("WARN"), "{}", run.stderr);
    assert!(command_output(&run).contains("ran-42"));
}

/// The processes in the sandbox cgroups of agentd process `pid` (named
/// `agentd-sandbox/<pid>-<n>`), with their command lines.
fn sandboxed_processes_of(pid: u32) -> Vec<(u32, String)> {
    let marker = format!("agentd-sandbox/{pid}-");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| {
            let process: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let cgroup = std::fs::read_to_string(format!("/proc/{process}/cgroup")).ok()?;
            let cmdline = std::fs::read(format!("/proc/{process}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cgroup.contains(&marker).then_some((process, cmdline))
        })
        .collect()
}

/// Polls until nothing runs in `pid`'s sandbox cgroups, for up to `within`.
fn left_of(pid: u32, within: std::time::Duration) -> Vec<(u32, String)> {
    let deadline = std::time::Instant::now() + within;
    loop {
        let left = sandboxed_processes_of(pid);
        if left.is_empty() || std::time::Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Nothing of `agentd run`'s sandboxes (the one its command ran in, serving
/// again as a spare) runs on after it; nor after a `kill -9` in the middle of
/// a command.
#[tokio::test]
async fn nothing_of_a_runs_sandboxes_outlives_it() {
    let script = json!({"replies": [
        {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "echo ran"}}]},
        {"content": [{"type": "text", "text": "done"}]},
        {"content": [{"type": "tool_use", "name": "Bash",
            "input": {"command": "sleep 30; echo slept"}}]},
    ]});
    let h = Harness::new(Wire::Anthropic, script).await;
    let run = |prompt: &str| {
        let mut cmd = h.run_command(prompt);
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        cmd.spawn().unwrap()
    };

    let mut child = run("run it");
    let pid = child.id();
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success());
    let left = left_of(pid, std::time::Duration::from_secs(2));
    assert!(left.is_empty(), "left running after the run: {left:?}");

    let mut child = run("sleep");
    let pid = child.id();
    let sleeping = tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            let running = sandboxed_processes_of(pid);
            if running
                .iter()
                .any(|(_, cmdline)| cmdline.starts_with("sleep 30"))
            {
                return running;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("the command never ran in a sandbox of {pid}");
    })
    .await
    .unwrap();
    child.kill().unwrap();
    let _ = child.wait();
    let left = left_of(pid, std::time::Duration::from_secs(5));
    assert!(
        left.is_empty(),
        "left running after a kill -9 (running before: {sleeping:?}): {left:?}"
    );
}
