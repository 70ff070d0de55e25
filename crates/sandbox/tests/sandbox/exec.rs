//! `Sandbox::exec` against the real bubblewrap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agentd_sandbox::{ExecOutcome, ExecRequest, OutputChunk, Policy, Sandbox, bwrap_available};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::support::shared_pool;

/// `root/ws` is the workspace; `root/outside` a sibling the sandbox must not see.
struct Fixture {
    _pool: std::sync::RwLockReadGuard<'static, ()>,
    _root: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    assert!(bwrap_available(), "these tests need bubblewrap installed");
    // No spares while the test runs (see `shared_pool`).
    let pool = shared_pool();
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), "s3cret").unwrap();
    Fixture {
        _pool: pool,
        ws: ws.canonicalize().unwrap(),
        outside: outside.canonicalize().unwrap(),
        _root: root,
    }
}

fn request(command: &str) -> ExecRequest {
    ExecRequest {
        command: command.into(),
        timeout: Duration::from_secs(20),
        output_cap: 1 << 20,
    }
}

async fn run(policy: &Policy, command: &str) -> ExecOutcome {
    Sandbox
        .exec(policy, &request(command), None, CancellationToken::new())
        .await
        .unwrap()
}

/// A unique argument to find leftover processes by.
fn marker() -> String {
    format!("{}.{}", 1000 + std::process::id() % 1000, rand_suffix())
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        % 1_000_000
}

fn processes_with_arg(arg: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<_> = cmdline
            .split(|b| *b == 0)
            .map(String::from_utf8_lossy)
            .collect();
        if args.iter().any(|a| a == arg) {
            found.push(format!("{:?}: {}", entry.file_name(), args.join(" ")));
        }
    }
    found
}

/// Leftovers may need a moment to be reaped after SIGKILL.
async fn assert_gone(arg: &str) {
    for _ in 0..50 {
        if processes_with_arg(arg).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("processes survived: {:?}", processes_with_arg(arg));
}

#[tokio::test]
async fn echo_works_and_output_streams() {
    let f = fixture();
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let command = "echo hello; echo oops >&2; sleep 0.2; echo world";
    let outcome = Sandbox
        .exec(
            &Policy::new(&f.ws),
            &request(command),
            Some(sender),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!(outcome.stdout, "hello\nworld\n");
    assert_eq!(outcome.stderr, "oops\n");
    assert!(!outcome.truncated && !outcome.timed_out && !outcome.cancelled);

    let mut chunks = Vec::new();
    while let Some(chunk) = receiver.recv().await {
        chunks.push(chunk);
    }
    assert_eq!(chunks.first(), Some(&OutputChunk::Stdout("hello\n".into())));
    assert!(chunks.contains(&OutputChunk::Stderr("oops\n".into())));
    assert!(
        chunks.contains(&OutputChunk::Stdout("world\n".into())),
        "{chunks:?}"
    );
}

/// A command printing as fast as it can, its listener joined with it in one
/// task (as a tool relays its command's output): the listener takes each
/// chunk as it comes, so the output never piles up in between.
#[tokio::test]
async fn a_flood_does_not_queue_ahead_of_a_listener_in_the_same_task() {
    let f = fixture();
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let (policy, flood) = (
        Policy::new(&f.ws),
        request("yes abcdefghij | head -c 50000000"),
    );
    let exec = Sandbox.exec(&policy, &flood, Some(sender), CancellationToken::new());
    let listen = async {
        let (mut bytes, mut most_queued) = (0, 0);
        while let Some(chunk) = receiver.recv().await {
            most_queued = most_queued.max(receiver.len());
            if let OutputChunk::Stdout(text) = chunk {
                bytes += text.len();
            }
        }
        (bytes, most_queued)
    };
    let (outcome, (bytes, most_queued)) = tokio::join!(exec, listen);
    assert_eq!(outcome.unwrap().exit_code, Some(0));
    assert_eq!(bytes, 50_000_000, "every byte reached the listener");
    // Without the pump yielding to its task's listener: thousands of 8 KiB
    // chunks (tens of MiB) queued while the reads ran ahead.
    assert!(most_queued <= 4, "{most_queued} chunks queued");
}

#[tokio::test]
async fn closed_receiver_is_fine() {
    let f = fixture();
    let (sender, receiver) = mpsc::unbounded_channel();
    drop(receiver);
    let outcome = Sandbox
        .exec(
            &Policy::new(&f.ws),
            &request("echo hi"),
            Some(sender),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.stdout, "hi\n");
}

#[tokio::test]
async fn workspace_is_writable_cwd_and_home() {
    let f = fixture();
    let outcome = run(
        &Policy::new(&f.ws),
        "echo data > made.txt && pwd && echo $HOME",
    )
    .await;
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    let ws = f.ws.display();
    assert_eq!(outcome.stdout, format!("{ws}\n{ws}\n"));
    assert_eq!(
        std::fs::read_to_string(f.ws.join("made.txt")).unwrap(),
        "data\n"
    );
}

#[tokio::test]
async fn system_directories_are_read_only() {
    let f = fixture();
    for target in [
        "/etc/agentd-test",
        "/usr/agentd-test",
        "/usr/bin/agentd-test",
        "/agentd-test",
    ] {
        let outcome = run(&Policy::new(&f.ws), &format!("echo x > {target}")).await;
        assert_ne!(outcome.exit_code, Some(0), "{target}: {outcome:?}");
        assert!(!Path::new(target).exists());
    }
}

#[tokio::test]
async fn outside_directories_are_invisible() {
    let f = fixture();
    let secret = f.outside.join("secret");
    let outcome = run(&Policy::new(&f.ws), &format!("cat {}", secret.display())).await;
    assert_ne!(outcome.exit_code, Some(0));
    assert!(!outcome.stdout.contains("s3cret"));

    let crate_dir = env!("CARGO_MANIFEST_DIR");
    let outcome = run(&Policy::new(&f.ws), &format!("ls {crate_dir}")).await;
    assert_ne!(outcome.exit_code, Some(0), "{outcome:?}");
}

#[tokio::test]
async fn read_only_paths_are_visible_but_not_writable() {
    let f = fixture();
    let mut policy = Policy::new(&f.ws);
    policy.read_only_paths.push(f.outside.clone());
    let secret = f.outside.join("secret");
    let outcome = run(
        &policy,
        &format!("cat {0}; echo x >> {0}", secret.display()),
    )
    .await;
    assert_eq!(outcome.stdout, "s3cret");
    assert_ne!(outcome.exit_code, Some(0));
    assert_eq!(std::fs::read_to_string(secret).unwrap(), "s3cret");
}

#[tokio::test]
async fn read_only_path_inside_the_workspace_is_protected() {
    let f = fixture();
    std::fs::create_dir_all(f.ws.join(".git")).unwrap();
    std::fs::write(f.ws.join(".git/config"), "orig").unwrap();
    let mut policy = Policy::new(&f.ws);
    policy.read_only_paths.push(f.ws.join(".git"));
    let outcome = run(&policy, "echo x > .git/config; echo y > other.txt").await;
    assert!(
        outcome.stderr.contains("Read-only file system"),
        "{outcome:?}"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join(".git/config")).unwrap(),
        "orig"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("other.txt")).unwrap(),
        "y\n"
    );
}

async fn local_listener() -> (tokio::net::TcpListener, u16) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

#[tokio::test]
async fn network_is_off_by_default() {
    let f = fixture();
    let (_listener, port) = local_listener().await;
    let outcome = run(
        &Policy::new(&f.ws),
        &format!("echo hi > /dev/tcp/127.0.0.1/{port}"),
    )
    .await;
    assert_ne!(outcome.exit_code, Some(0), "{outcome:?}");
}

#[tokio::test]
async fn network_is_shared_when_allowed() {
    let f = fixture();
    let (listener, port) = local_listener().await;
    let accept = tokio::spawn(async move { listener.accept().await.is_ok() });
    let mut policy = Policy::new(&f.ws);
    policy.network = true;
    let outcome = run(&policy, &format!("echo hi > /dev/tcp/127.0.0.1/{port}")).await;
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    assert!(accept.await.unwrap());
}

#[tokio::test]
async fn environment_is_only_the_allowlist() {
    let f = fixture();
    let parent_only: Vec<String> = std::env::vars().map(|(key, _)| key).collect();
    assert!(
        parent_only.iter().any(|key| key.starts_with("CARGO")),
        "cargo sets CARGO_* vars"
    );
    let mut policy = Policy::new(&f.ws);
    policy.env.insert("AGENTD_ALLOWED".into(), "yes".into());
    let outcome = run(&policy, "env").await;
    let inside: Vec<&str> = outcome
        .stdout
        .lines()
        .filter_map(|line| line.split('=').next())
        .collect();
    let shell_own = ["PWD", "SHLVL", "_", "OLDPWD"];
    for key in &inside {
        let allowed = ["PATH", "HOME", "LANG", "TERM", "AGENTD_ALLOWED"].contains(key);
        assert!(
            allowed || shell_own.contains(key),
            "unexpected variable {key} inside"
        );
    }
    assert!(outcome.stdout.contains("AGENTD_ALLOWED=yes\n"));
    assert!(
        outcome
            .stdout
            .contains("PATH=/usr/local/bin:/usr/bin:/bin\n")
    );
    assert!(outcome.stdout.contains("LANG=C.UTF-8\n") && outcome.stdout.contains("TERM=dumb\n"));
}

#[tokio::test]
async fn exit_codes_propagate() {
    let f = fixture();
    assert_eq!(run(&Policy::new(&f.ws), "exit 3").await.exit_code, Some(3));
    assert_eq!(run(&Policy::new(&f.ws), "false").await.exit_code, Some(1));
    assert_eq!(run(&Policy::new(&f.ws), "true").await.exit_code, Some(0));
}

#[tokio::test]
async fn output_cap_truncates() {
    let f = fixture();
    let mut request = request("head -c 100000 /dev/zero | tr '\\0' a");
    request.output_cap = 1000;
    let outcome = Sandbox
        .exec(
            &Policy::new(&f.ws),
            &request,
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.stdout.len(), 1000);
    assert!(outcome.truncated);
    assert_eq!(outcome.dropped_bytes, 99_000);
    assert_eq!(outcome.exit_code, Some(0));
}

#[tokio::test]
async fn timeout_kills_the_command_and_its_background_children() {
    let f = fixture();
    let marker = marker();
    let mut request = request(&format!("sleep {marker} & sleep {marker}"));
    request.timeout = Duration::from_millis(500);
    let started = Instant::now();
    let outcome = Sandbox
        .exec(
            &Policy::new(&f.ws),
            &request,
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    assert!(outcome.timed_out && !outcome.cancelled);
    assert_ne!(outcome.exit_code, Some(0));
    assert_gone(&marker).await;
}

#[tokio::test]
async fn background_children_do_not_outlive_a_finished_command() {
    let f = fixture();
    let marker = marker();
    let started = Instant::now();
    let outcome = run(
        &Policy::new(&f.ws),
        &format!("sleep {marker} & echo started"),
    )
    .await;
    assert_eq!(outcome.stdout, "started\n");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_gone(&marker).await;
}

#[tokio::test]
async fn cancel_returns_within_a_second() {
    let f = fixture();
    let marker = marker();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let command = format!("sleep {marker}");
    let policy = Policy::new(&f.ws);
    let request = request(&command);
    let exec = Sandbox.exec(&policy, &request, None, cancel);
    let cancelled_at = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
        Instant::now()
    });
    let outcome = exec.await.unwrap();
    let returned_at = Instant::now();
    let latency = returned_at - cancelled_at.await.unwrap();
    assert!(
        latency < Duration::from_secs(1),
        "returned {latency:?} after cancel"
    );
    assert!(outcome.cancelled && !outcome.timed_out);
    assert_gone(&marker).await;
}

#[tokio::test]
async fn unsandboxed_runs_plain_bash_with_clean_env_and_group_kill() {
    let f = fixture();
    let mut policy = Policy::new(&f.ws);
    policy.unsandboxed = true;
    let outcome = run(&policy, "pwd; echo $HOME; env | grep -c CARGO").await;
    let ws = f.ws.display();
    assert_eq!(outcome.stdout, format!("{ws}\n{ws}\n0\n"));

    let marker = marker();
    let outcome = run(&policy, &format!("sleep {marker} & echo started")).await;
    assert_eq!(outcome.stdout, "started\n");
    assert_gone(&marker).await;
}

#[tokio::test]
async fn unsandboxed_commands_are_detached() {
    crate::support::unsandboxed_commands_are_detached().await;
}

#[tokio::test]
async fn escaped_grandchild_holding_the_pipe_does_not_hang() {
    let f = fixture();
    let mut policy = Policy::new(&f.ws);
    policy.unsandboxed = true;
    // `setsid` leaves the process group, so only the drain grace period ends the wait.
    let started = Instant::now();
    let outcome = run(&policy, "setsid sleep 3 & echo started").await;
    assert_eq!(outcome.stdout, "started\n");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn already_cancelled_runs_nothing() {
    let f = fixture();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let outcome = Sandbox
        .exec(&Policy::new(&f.ws), &request("touch ran.txt"), None, cancel)
        .await
        .unwrap();
    assert!(outcome.cancelled);
    assert!(!f.ws.join("ran.txt").exists());
}

#[tokio::test]
async fn dropping_the_call_kills_the_command() {
    for unsandboxed in [false, true] {
        let f = fixture();
        let marker = marker();
        let mut policy = Policy::new(&f.ws);
        policy.unsandboxed = unsandboxed;
        let command = format!("sleep {marker} & sleep {marker}");
        let task = tokio::spawn(async move {
            Sandbox
                .exec(&policy, &request(&command), None, CancellationToken::new())
                .await
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !processes_with_arg(&marker).is_empty(),
            "the command never started"
        );
        task.abort();
        let _ = task.await;
        assert_gone(&marker).await;
    }
}
