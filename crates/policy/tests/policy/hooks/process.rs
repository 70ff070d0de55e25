//! Hook processes: timeouts, cleanup, output caps, stdin, working directory and environment.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use super::*;

#[tokio::test]
async fn timeout_denies_and_kills_the_group() {
    let fx = Fixture::new();
    let cmd = fx.script(
        "slow.sh",
        "echo $$ > \"$OUT/main.pid\"\nsleep 30 &\necho $! > \"$OUT/sleep.pid\"\nwait",
    );
    let mut config = hook(HookEvent::PreToolUse, Some("Bash"), &cmd);
    config.timeout_s = 1;
    let started = Instant::now();
    let outcome = hooks(vec![config])
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
        .await;
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_millis(2500), "took {elapsed:?}");
    assert!(outcome.is_denied());
    let reason = outcome.reason.unwrap();
    assert!(reason.contains("timed out after 1 s"), "{reason}");
    for pidfile in ["main.pid", "sleep.pid"] {
        let pid = read_pid(&fx.path(pidfile));
        assert!(wait_gone(pid).await, "{pidfile} ({pid}) still running");
    }
}

#[tokio::test]
async fn dropping_the_call_kills_the_hook() {
    let fx = Fixture::new();
    let cmd = fx.script("slow.sh", "sleep 30 &\necho $! > \"$OUT/sleep.pid\"\nwait");
    let hooks = pre_hook(&cmd);
    let ctx = fx.ctx();
    let input = bash_input();
    let call = hooks.pre_tool_use(&ctx, "toolu_test", "Bash", &input);
    assert!(
        tokio::time::timeout(Duration::from_millis(700), call)
            .await
            .is_err()
    );
    let pid = read_pid(&fx.path("sleep.pid"));
    assert!(
        wait_gone(pid).await,
        "sleep ({pid}) outlived the dropped call"
    );
}

#[tokio::test]
async fn background_leftovers_are_killed() {
    let fx = Fixture::new();
    let cmd = fx.script(
        "bg.sh",
        "sleep 30 >/dev/null 2>&1 &\necho $! > \"$OUT/sleep.pid\"\nexit 0",
    );
    let started = Instant::now();
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
        .await;
    assert_eq!(outcome.decision, None);
    assert!(started.elapsed() < Duration::from_secs(3));
    let pid = read_pid(&fx.path("sleep.pid"));
    assert!(wait_gone(pid).await, "background sleep ({pid}) left behind");
}

#[tokio::test]
async fn huge_output_is_capped_and_denied() {
    let fx = Fixture::new();
    let cmd = fx.script("huge.sh", "head -c 3000000 /dev/zero | tr '\\0' a");
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
        .await;
    assert!(outcome.is_denied());
    assert!(outcome.reason.unwrap().len() < 10_000);
}

#[tokio::test]
async fn unspawnable_hook_denies() {
    let fx = Fixture::new();
    let mut ctx = fx.ctx();
    ctx.cwd = fx.path("does-not-exist");
    let outcome = pre_hook("true")
        .pre_tool_use(&ctx, "toolu_test", "Bash", &bash_input())
        .await;
    assert!(outcome.is_denied());
    assert!(outcome.reason.unwrap().contains("could not be started"));
}

#[tokio::test]
async fn hook_that_ignores_a_large_stdin() {
    let fx = Fixture::new();
    let cmd = fx.script("noread.sh", "exit 0");
    let input = json!({"content": "x".repeat(2 * 1024 * 1024)});
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&fx.ctx(), "toolu_test", "Write", &input)
        .await;
    assert_eq!(outcome.decision, None);
}

#[tokio::test]
async fn hooks_run_in_parallel() {
    let fx = Fixture::new();
    let slow = fx.script("slow.sh", "sleep 1");
    let hooks = hooks(vec![
        hook(HookEvent::PreToolUse, None, &slow),
        hook(HookEvent::PreToolUse, None, &slow),
        hook(HookEvent::PreToolUse, None, &slow),
    ]);
    let started = Instant::now();
    let outcome = hooks
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
        .await;
    assert_eq!(outcome.decision, None);
    assert!(started.elapsed() < Duration::from_millis(2500));
}

#[tokio::test]
async fn hook_sees_stdin_fields() {
    let fx = Fixture::new();
    let cmd = fx.script(
        "stdin.sh",
        "cat > \"$OUT/stdin.json\"\npwd > \"$OUT/pwd.txt\"",
    );
    let ctx = fx.ctx();
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&ctx, "toolu_test", "Bash", &bash_input())
        .await;
    assert_eq!(outcome.decision, None);
    let stdin = fx.read_json("stdin.json");
    assert_eq!(stdin["session_id"], "sess-42");
    assert_eq!(stdin["hook_event_name"], "PreToolUse");
    assert_eq!(stdin["tool_name"], "Bash");
    assert_eq!(stdin["tool_input"], bash_input());
    assert_eq!(stdin["cwd"], fx.workspace.display().to_string());
    assert_eq!(
        stdin["transcript_path"],
        fx.path("transcript.jsonl").display().to_string()
    );
    let pwd = std::fs::read_to_string(fx.path("pwd.txt")).unwrap();
    assert_eq!(Path::new(pwd.trim()), fx.workspace);
}

#[tokio::test]
async fn hook_env_is_clean() {
    let fx = Fixture::new();
    // Present in this test process (cargo sets it), and must not reach the hook.
    assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
    let cmd = fx.script("env.sh", "env -0 > \"$OUT/env.bin\"");
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
        .await;
    assert_eq!(outcome.decision, None);
    let raw = std::fs::read(fx.path("env.bin")).unwrap();
    let env: BTreeMap<String, String> = raw
        .split(|b| *b == 0)
        .filter(|entry| !entry.is_empty())
        .filter_map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            let (name, value) = entry.split_once('=')?;
            Some((name.to_owned(), value.to_owned()))
        })
        .collect();

    assert!(!env.contains_key("CARGO_PKG_NAME"), "{env:?}");
    assert!(!env.contains_key("CARGO_MANIFEST_DIR"), "{env:?}");
    // Only the allowlist, the context's extras and what bash itself sets.
    let allowed: BTreeSet<&str> = [
        "PATH",
        "HOME",
        "LANG",
        "HOOK_EXTRA",
        "AGENTD_SESSION_ID",
        "CLAUDE_PROJECT_DIR",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
    ]
    .into();
    for name in env.keys() {
        assert!(
            allowed.contains(name.as_str()),
            "unexpected {name} in {env:?}"
        );
    }
    assert_eq!(
        env.get("HOOK_EXTRA").map(String::as_str),
        Some("extra-value")
    );
    assert_eq!(
        env.get("AGENTD_SESSION_ID").map(String::as_str),
        Some("sess-42")
    );
    assert_eq!(
        env.get("CLAUDE_PROJECT_DIR").map(PathBuf::from),
        Some(fx.workspace.clone())
    );
}

/// A root server runs hooks as the agent's user: a hook works in the
/// workspace the agent writes (and may run a script from it).
#[tokio::test]
async fn a_root_servers_hooks_run_as_the_agents_user() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    std::fs::set_permissions(fx.dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let cmd = fx.script(
        "whoami.sh",
        "id -u > \"$OUT/uid\"; id -G > \"$OUT/groups\"; ls > \"$OUT/listing\"",
    );
    // The workspace lies in a directory only root may walk (as under the
    // server's data dir), and belongs to the agent's user.
    let private = fx.dir.path().join("private");
    let workspace = private.join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("mine.txt"), "x").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let root = rustix::process::geteuid().is_root();
    if root {
        std::os::unix::fs::chown(&workspace, Some(231_020), Some(231_020)).unwrap();
    }
    let mut ctx = fx.ctx();
    ctx.cwd = workspace;
    ctx.run_as = Some(agentd_sandbox::confined::FsIdentity {
        uid: 231_020,
        gid: 231_020,
    });
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&ctx, "toolu_test", "Bash", &bash_input())
        .await;
    assert!(!outcome.is_denied(), "{:?}", outcome.reason);
    let uid = std::fs::read_to_string(fx.path("uid")).unwrap();
    let groups = std::fs::read_to_string(fx.path("groups")).unwrap();
    let listing = std::fs::read_to_string(fx.path("listing")).unwrap();
    assert_eq!(listing.trim(), "mine.txt", "it ran in the workspace");
    if root {
        assert_eq!((uid.trim(), groups.trim()), ("231020", "231020"));
    } else {
        assert_eq!(uid.trim(), rustix::process::geteuid().as_raw().to_string());
    }
}
