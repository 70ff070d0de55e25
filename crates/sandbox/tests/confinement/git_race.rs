//! `.git` swapped for links to a host directory while sandboxes start: no
//! host path outside the workspace is ever mounted, written or created.
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentd_sandbox::Policy;
use agentd_sandbox::confined::FsIdentity;
use rustix::fs::{CWD, RenameFlags};

use crate::run_as::AGENT_UID;
use crate::support::{run, workspace};

const SHADOW: &str = "host-shadow-secret-7f3a";
/// Commands started while `.git` flips, over both phases.
const STARTS: usize = 240;

pub async fn git_swaps_never_reach_the_host(served: bool) {
    let ws = workspace("agentd-git-race");
    let root = ws.path.parent().unwrap().to_path_buf();
    // The "host directory": root's (or, for a non-root run, not writable).
    let host = root.join("host");
    std::fs::create_dir(&host).unwrap();
    std::fs::write(host.join("shadow"), SHADOW).unwrap();
    std::fs::set_permissions(host.join("shadow"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(&host, std::fs::Permissions::from_mode(0o555)).unwrap();
    let is_root = rustix::process::geteuid().is_root();
    if is_root {
        std::os::unix::fs::chown(&ws.path, Some(AGENT_UID), Some(AGENT_UID)).unwrap();
    }
    let mut policy = Policy::new(&ws.path);
    policy.run_as = Some(FsIdentity {
        uid: AGENT_UID,
        gid: AGENT_UID,
    });
    let before = snapshot(&root);
    let spares_before = agentd_sandbox::spares_used();

    // Phase 1: a host thread (stronger than any command: no mount pins it)
    // swaps `.git` with links to the host directory, and removes the
    // protection's pieces so that each start makes them again.
    std::fs::create_dir_all(ws.path.join(".git/objects")).unwrap();
    let depth = ws.path.components().count();
    let links = [
        format!(
            "{}{}",
            "../".repeat(depth - 1),
            host.strip_prefix("/").unwrap().display()
        ),
        "../host".to_string(),
        host.display().to_string(),
        format!("{}oldroot{}", "../".repeat(depth + 1), host.display()),
    ];
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicUsize::new(0));
    let swapper = {
        let (ws, stop, swaps) = (ws.path.clone(), stop.clone(), swaps.clone());
        std::thread::spawn(move || swap_loop(&ws, &links, &stop, &swaps))
    };
    let mut outputs = Vec::new();
    let mut started = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while started < STARTS / 2 && Instant::now() < deadline {
        for outcome in batch(&policy, &probe(&host), 4).await {
            outputs.push(format!("{}{}", outcome.stdout, outcome.stderr));
            started += 1;
        }
        if served {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        swaps.load(Ordering::Relaxed) > 50,
        "the swapper must really swap"
    );
    restore_git(&ws.path);

    // Phase 2: the swapper is a command of the same session, in a sandbox
    // started while `.git` did not exist (so nothing pins it there).
    std::fs::remove_dir_all(ws.path.join(".git")).unwrap();
    let _ = std::fs::remove_file(ws.path.join(".git-swap"));
    let attacker = {
        let policy = policy.clone();
        let script = sandboxed_swapper(&host, depth);
        tokio::spawn(async move { run(&policy, &script).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while started < STARTS && Instant::now() < deadline {
        for outcome in batch(&policy, &probe(&host), 4).await {
            outputs.push(format!("{}{}", outcome.stdout, outcome.stderr));
            started += 1;
        }
    }
    let attacker = attacker.await.unwrap();
    assert!(
        attacker.stdout.contains("swapped"),
        "the sandboxed swapper must run: {attacker:?}"
    );
    assert!(started >= STARTS, "only {started} starts");
    let served_commands = agentd_sandbox::spares_used() - spares_before;
    assert_eq!(
        served_commands > 0,
        served,
        "{served_commands} commands ran in spares"
    );

    for output in &outputs {
        assert!(!output.contains(SHADOW), "host file read: {output}");
        for line in output.lines().filter_map(|l| l.strip_prefix("mount ")) {
            let (mount_root, point) = line.split_once(' ').unwrap();
            assert!(
                !Path::new(point).starts_with(&host) && !mount_root.ends_with("/host"),
                "a host directory was mounted: {line}"
            );
            // What is mounted from the test's directory is the workspace's
            // own content (a pinned `.git` shows under the name the host
            // thread renamed it to), never a sibling of it.
            if Path::new(mount_root).starts_with(&root) || Path::new(point).starts_with(&root) {
                assert!(
                    Path::new(mount_root).starts_with(&ws.path)
                        && Path::new(point).starts_with(&ws.path),
                    "a mount from outside the workspace: {line}"
                );
            }
        }
    }
    let after = snapshot(&root);
    assert_eq!(
        before, after,
        "nothing outside the workspace was created or written"
    );
    assert_eq!(
        std::fs::read_to_string(host.join("shadow")).unwrap(),
        SHADOW
    );
    std::fs::set_permissions(&host, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// What each command reports: the host file (which it must not reach) and
/// its mounts as `mount <root> <mount point>`.
fn probe(host: &Path) -> String {
    format!(
        "cat {0}/shadow 2>/dev/null; ls {0} 2>/dev/null; awk '{{print \"mount \" $4 \" \" $5}}' /proc/self/mountinfo",
        host.display()
    )
}

/// `count` runs of `command` at once.
async fn batch(policy: &Policy, command: &str, count: usize) -> Vec<agentd_sandbox::ExecOutcome> {
    let mut runs = tokio::task::JoinSet::new();
    for _ in 0..count {
        let (policy, command) = (policy.clone(), command.to_string());
        runs.spawn(async move { run_or_refused(&policy, &command).await });
    }
    runs.join_all().await
}

/// A start refused because the workspace changed under it is a fine outcome.
async fn run_or_refused(policy: &Policy, command: &str) -> agentd_sandbox::ExecOutcome {
    let request = crate::support::request(command, Duration::from_secs(20));
    match agentd_sandbox::Sandbox
        .exec(
            policy,
            &request,
            None,
            tokio_util::sync::CancellationToken::new(),
        )
        .await
    {
        Ok(outcome) => outcome,
        Err(err) => {
            let message = err.to_string();
            assert!(message.contains("changed while"), "{message}");
            agentd_sandbox::ExecOutcome {
                exit_code: Some(126),
                stdout: String::new(),
                stderr: message,
                truncated: false,
                dropped_bytes: 0,
                timed_out: false,
                cancelled: false,
                duration: Duration::ZERO,
            }
        }
    }
}

fn swap_loop(ws: &Path, links: &[String], stop: &AtomicBool, swaps: &AtomicUsize) {
    let git = ws.join(".git");
    let swap = ws.join(".git-swap");
    let mut round = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let _ = std::fs::remove_file(&swap);
        let _ = std::os::unix::fs::symlink(&links[round % links.len()], &swap);
        if round.is_multiple_of(7) {
            let _ = std::fs::remove_dir(git.join("hooks"));
            let _ = std::fs::remove_file(git.join("config"));
        }
        for _ in 0..20 {
            if rustix::fs::renameat_with(CWD, &git, CWD, &swap, RenameFlags::EXCHANGE).is_ok() {
                swaps.fetch_add(1, Ordering::Relaxed);
            }
            std::thread::yield_now();
        }
        // Leave the real directory in place for a moment now and then.
        if std::fs::symlink_metadata(&git).is_ok_and(|m| m.file_type().is_symlink()) {
            let _ = rustix::fs::renameat_with(CWD, &git, CWD, &swap, RenameFlags::EXCHANGE);
        }
        std::thread::sleep(Duration::from_micros(200));
        round += 1;
    }
}

/// Put the real `.git` back in place after the swapper stopped.
fn restore_git(ws: &Path) {
    let git = ws.join(".git");
    if std::fs::symlink_metadata(&git).is_ok_and(|m| m.file_type().is_symlink()) {
        rustix::fs::renameat_with(CWD, &git, CWD, ws.join(".git-swap"), RenameFlags::EXCHANGE)
            .unwrap();
    }
    let _ = std::fs::remove_file(ws.join(".git-swap"));
}

/// A command that makes `.git` and swaps it with links to the host
/// directory for three seconds (renameat2 through ctypes).
fn sandboxed_swapper(host: &Path, depth: usize) -> String {
    let relative = format!(
        "{}{}",
        "../".repeat(depth - 1),
        host.strip_prefix("/").unwrap().display()
    );
    format!(
        r#"python3 - <<'EOF'
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs(".git/objects", exist_ok=True)
targets = ["{relative}", "../host", "{absolute}"]
n = 0
end = time.time() + 3
while time.time() < end:
    try: os.unlink(".git-swap")
    except FileNotFoundError: pass
    os.symlink(targets[n % len(targets)], ".git-swap")
    for _ in range(50):
        if libc.renameat2(-100, b".git", -100, b".git-swap", 2) == 0:
            n += 1
    time.sleep(0.0005)
print("swapped", n)
EOF"#,
        absolute = host.display()
    )
}

/// Every path below `root` outside its `ws/` with its size and mode: what
/// must not change.
fn snapshot(root: &Path) -> Vec<(PathBuf, u64, u32)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.file_name().is_some_and(|n| n == "ws") && dir == root {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            out.push((path.clone(), meta.len(), meta.permissions().mode()));
            if meta.is_dir() {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}
