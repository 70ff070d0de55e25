//! Shared by the escape and limit tests: a session layout on the host and
//! helpers to run commands and find leftover processes.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use agentd_sandbox::{
    ExecOutcome, ExecRequest, Policy, Sandbox, bwrap_available, create_workspace,
};
use tokio_util::sync::CancellationToken;

/// A server's layout: `root/data/agentd.db` (the data dir), `root/sessions/ws`
/// (this session) and `root/sessions/other/secret.txt` (another session). The
/// root lives under the target dir, not `/tmp`, because the sandbox's `/tmp` is
/// a private tmpfs where writes would succeed harmlessly.
pub struct Layout {
    _root: tempfile::TempDir,
    pub root: PathBuf,
    pub data: PathBuf,
    pub ws: PathBuf,
    pub other: PathBuf,
}

pub const DB_CONTENT: &str = "SQLite format 3 -- agentd database";
pub const OTHER_SECRET: &str = "other-session-secret";

pub fn layout() -> Layout {
    assert!(bwrap_available(), "these tests need bubblewrap installed");
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
        _root: root,
        root: path,
        data,
        ws,
        other,
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

/// A string unique to this test run, to put in a command and find its processes by.
pub fn marker(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("agentd-{name}-{}-{nanos}", std::process::id())
}

/// Host processes whose command line mentions `marker`.
pub fn processes_mentioning(marker: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| {
            std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| {
                cmdline
                    .windows(marker.len())
                    .any(|window| window == marker.as_bytes())
            })
        })
        .count()
}

/// Leftovers may need a moment to be reaped after SIGKILL.
pub async fn assert_none_left(marker: &str) {
    for _ in 0..100 {
        if processes_mentioning(marker) == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "{} processes survived the command",
        processes_mentioning(marker)
    );
}

pub fn failed(outcome: &ExecOutcome) -> bool {
    outcome.exit_code != Some(0)
}
