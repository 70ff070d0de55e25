//! The egress bridge: every program of a sandbox with one (a command, cold
//! or in a spare, a background command, a program exec'd without a shell
//! such as an MCP server) reaches the host's proxy socket through the
//! forwarder, and the forwarder is the running executable, never a file
//! swapped in at its path.
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentd_sandbox::confined::FsIdentity;
use agentd_sandbox::{EgressBridge, Policy, Sandbox};
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use crate::run_as::AGENT_UID;
use crate::support::{Workspace, run, wait_for_spare, workspace};

/// Set in a copy of this binary that runs [`swapped_child`].
pub const SWAPPED: &str = "AGENTD_TEST_SWAPPED_EXE";

/// What the host's stub proxy answers: this, then the request line it got.
const ANSWER: &str = "through-the-bridge";

const CURL: &str = "curl -sS --max-time 20 http://example.invalid/asked";

/// The executable handed in for the forwarder stays out of the command.
const NO_EXE: &str = "test -e /proc/$$/fd/3 && echo exe-leaked || echo no-exe";

/// A stub of the host proxy on a unix socket, answering every request with
/// [`ANSWER`] and the request line it got.
fn host_proxy(dir: &Path) -> PathBuf {
    let socket = dir.join("proxy.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    // The sandbox runs as the agent's uid.
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head);
            let body = format!("{ANSWER} {}", head.lines().next().unwrap_or_default());
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    socket
}

fn policy(ws: &Workspace, socket: PathBuf) -> Policy {
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(&ws.path, Some(AGENT_UID), Some(AGENT_UID)).unwrap();
    }
    let mut policy = Policy::new(&ws.path);
    policy.run_as = Some(FsIdentity {
        uid: AGENT_UID,
        gid: AGENT_UID,
    });
    policy.egress = Some(EgressBridge { socket });
    policy
}

fn assert_through(output: &str) {
    let expected = format!("{ANSWER} GET http://example.invalid/asked HTTP/1.1");
    assert!(output.contains(&expected), "{output}");
}

/// Commands, cold or in a spare, and background commands.
pub async fn commands_reach_the_host_proxy(spare: bool) {
    let ws = workspace("agentd-egress");
    let socket = host_proxy(ws.path.parent().unwrap());
    let policy = policy(&ws, socket);
    for round in 0..2 {
        let used = agentd_sandbox::spares_used();
        if spare && round > 0 {
            wait_for_spare().await;
        }
        let command = format!("{CURL}; echo; echo \"[$HTTPS_PROXY]\"; {NO_EXE}");
        let outcome = run(&policy, &command).await;
        assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
        assert_through(&outcome.stdout);
        assert!(outcome.stdout.contains("[http://127.0.0.1:3128]"));
        assert!(outcome.stdout.contains("no-exe"), "{outcome:?}");
        assert_eq!(agentd_sandbox::spares_used() > used, spare && round > 0);
    }
    let mut background = Sandbox
        .spawn_shell(&policy, CURL, &CancellationToken::new())
        .await
        .unwrap()
        .expect("started");
    assert_through(&read_all(background.take_stdout().unwrap()).await);
}

/// A program started without a shell (as MCP servers are).
pub async fn an_exec_d_program_reaches_the_host_proxy() {
    let ws = workspace("agentd-egress-exec");
    let socket = host_proxy(ws.path.parent().unwrap());
    let policy = policy(&ws, socket);
    let argv: Vec<String> = CURL.split(' ').map(String::from).collect();
    let mut process = Sandbox.spawn(&policy, &argv).await.unwrap();
    assert_through(&read_all(process.take_stdout().unwrap()).await);
    let argv = ["bash".to_string(), "-c".to_string(), NO_EXE.to_string()];
    let mut process = Sandbox.spawn(&policy, &argv).await.unwrap();
    assert_eq!(read_all(process.take_stdout().unwrap()).await, "no-exe\n");
    // Its stdin is its own, not the forwarder's.
    let argv = ["cat".to_string()];
    let mut process = Sandbox.spawn(&policy, &argv).await.unwrap();
    let mut stdin = process.take_stdin().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, b"stdin-reaches-it")
        .await
        .unwrap();
    drop(stdin);
    assert_eq!(
        read_all(process.take_stdout().unwrap()).await,
        "stdin-reaches-it"
    );
}

async fn read_all(mut out: impl tokio::io::AsyncRead + Unpin) -> String {
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(30), out.read_to_string(&mut text))
        .await
        .expect("the program did not finish")
        .unwrap();
    text
}

/// Runs [`swapped_child`] in a copy of this binary.
pub async fn a_replaced_executable_is_never_the_forwarder() {
    let dir = tempfile::Builder::new()
        .prefix("agentd-swapped")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let copy = dir.path().join("confinement-copy");
    std::fs::copy("/proc/self/exe", &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let status = tokio::process::Command::new(&copy)
        .env(SWAPPED, &copy)
        .status()
        .await
        .unwrap();
    assert!(status.success(), "the swapped copy failed: {status}");
}

/// In a copy of this binary at `copy`: someone replaces the file (and plants
/// what a path-based lookup of the running executable finds, `… (deleted)`);
/// the forwarder is still this very executable.
pub async fn swapped_child(copy: &Path) {
    let planted = "#!/bin/sh\necho planted-forwarder-ran\nexit 0\n";
    let swap = copy.with_extension("new");
    for path in [
        &swap,
        &PathBuf::from(format!("{} (deleted)", copy.display())),
    ] {
        std::fs::write(path, planted).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::rename(&swap, copy).unwrap();
    let ws = workspace("agentd-egress-swapped");
    let socket = host_proxy(ws.path.parent().unwrap());
    let outcome = run(&policy(&ws, socket), CURL).await;
    assert!(!outcome.stdout.contains("planted"), "{outcome:?}");
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    assert_through(&outcome.stdout);
}
