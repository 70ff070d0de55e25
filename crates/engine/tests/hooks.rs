//! Hooks run as real processes: bash scripts written to a temp dir.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agentd_engine::hooks::{HookConfig, HookContext, HookDecision, HookEvent, Hooks};
use serde_json::{Value, json};

struct Fixture {
    dir: tempfile::TempDir,
    workspace: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir(&workspace).unwrap();
        Self { dir, workspace }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Write an executable bash script; returns the command that runs it.
    /// `$OUT` in the body is the fixture's directory.
    fn script(&self, name: &str, body: &str) -> String {
        let path = self.path(name);
        let text = format!(
            "#!/usr/bin/env bash\nOUT='{}'\n{body}\n",
            self.dir.path().display()
        );
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        format!("'{}'", path.display())
    }

    fn ctx(&self) -> HookContext {
        HookContext {
            session_id: "sess-42".into(),
            cwd: self.workspace.clone(),
            transcript_path: Some(self.path("transcript.jsonl")),
            env: BTreeMap::from([("HOOK_EXTRA".to_owned(), "extra-value".to_owned())]),
        }
    }

    fn read_json(&self, name: &str) -> Value {
        let text = std::fs::read_to_string(self.path(name)).unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

fn hook(event: HookEvent, matcher: Option<&str>, command: &str) -> HookConfig {
    HookConfig {
        event,
        matcher: matcher.map(str::to_owned),
        command: command.to_owned(),
        timeout_s: 10,
    }
}

fn hooks(configs: Vec<HookConfig>) -> Hooks {
    Hooks::new(configs).unwrap()
}

fn pre_hook(command: &str) -> Hooks {
    hooks(vec![hook(HookEvent::PreToolUse, None, command)])
}

fn bash_input() -> Value {
    json!({"command": "rm -rf build"})
}

/// A process is gone when /proc has no entry for it, or only a zombie's.
fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

async fn wait_gone(pid: i32) -> bool {
    for _ in 0..40 {
        if process_gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn allow() {
    let fx = Fixture::new();
    let cmd = fx.script(
        "allow.sh",
        r#"cat >/dev/null
echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"safe"}}'"#,
    );
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
        .await;
    assert_eq!(outcome.decision, Some(HookDecision::Allow));
    assert_eq!(outcome.reason.as_deref(), Some("safe"));
    assert_eq!(outcome.updated_input, None);
}

#[tokio::test]
async fn no_output_is_no_opinion() {
    let fx = Fixture::new();
    let cmd = fx.script("quiet.sh", "cat >/dev/null; exit 0");
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
        .await;
    assert_eq!(outcome, Default::default());
}

#[tokio::test]
async fn deny_json() {
    let fx = Fixture::new();
    let cmd = fx.script(
        "deny.sh",
        r#"echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no rm here"}}'"#,
    );
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
        .await;
    assert!(outcome.is_denied());
    assert_eq!(outcome.reason.as_deref(), Some("no rm here"));
}

#[tokio::test]
async fn deny_exit_2_uses_stderr() {
    let fx = Fixture::new();
    let cmd = fx.script(
        "exit2.sh",
        "cat >/dev/null\necho 'rm is not allowed in this repo' >&2\nexit 2",
    );
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
        .await;
    assert!(outcome.is_denied());
    assert_eq!(
        outcome.reason.as_deref(),
        Some("rm is not allowed in this repo")
    );
}

#[tokio::test]
async fn ask() {
    let fx = Fixture::new();
    let cmd = fx.script(
        "ask.sh",
        r#"echo '{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"check with a human"}}'"#,
    );
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
        .await;
    assert_eq!(outcome.decision, Some(HookDecision::Ask));
    assert_eq!(outcome.reason.as_deref(), Some("check with a human"));
}

#[tokio::test]
async fn updated_input() {
    let fx = Fixture::new();
    let cmd = fx.script(
        "update.sh",
        r#"echo '{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"command":"rm -rf build --dry-run"},"additionalContext":"rewritten to a dry run"}}'"#,
    );
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
        .await;
    assert_eq!(outcome.decision, Some(HookDecision::Allow));
    assert_eq!(
        outcome.updated_input,
        Some(json!({"command": "rm -rf build --dry-run"}))
    );
    assert_eq!(outcome.additional_context, vec!["rewritten to a dry run"]);
}

#[tokio::test]
async fn legacy_decisions() {
    let fx = Fixture::new();
    let approve = fx.script(
        "approve.sh",
        r#"echo '{"decision":"approve","reason":"legacy ok"}'"#,
    );
    let outcome = pre_hook(&approve)
        .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
        .await;
    assert_eq!(outcome.decision, Some(HookDecision::Allow));
    assert_eq!(outcome.reason.as_deref(), Some("legacy ok"));

    let block = fx.script(
        "block.sh",
        r#"echo '{"decision":"block","reason":"legacy no"}'"#,
    );
    let outcome = pre_hook(&block)
        .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
        .await;
    assert!(outcome.is_denied());
    assert_eq!(outcome.reason.as_deref(), Some("legacy no"));

    let stop = fx.script(
        "stop.sh",
        r#"echo '{"continue":false,"stopReason":"maintenance window"}'"#,
    );
    let outcome = pre_hook(&stop)
        .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
        .await;
    assert!(outcome.is_denied());
    assert_eq!(outcome.reason.as_deref(), Some("maintenance window"));
}

#[tokio::test]
async fn user_prompt_submit_context() {
    let fx = Fixture::new();
    let json_hook = fx.script(
        "ups_json.sh",
        r#"cat > "$OUT/ups.json"
echo '{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"branch: main"}}'"#,
    );
    let text_hook = fx.script("ups_text.sh", "echo 'it is Tuesday'");
    let hooks = hooks(vec![
        hook(HookEvent::UserPromptSubmit, None, &json_hook),
        hook(HookEvent::UserPromptSubmit, None, &text_hook),
    ]);
    let feedback = hooks.user_prompt_submit(&fx.ctx(), "fix the build").await;
    assert!(!feedback.block);
    assert_eq!(
        feedback.additional_context,
        vec!["branch: main", "it is Tuesday"]
    );
    let stdin = fx.read_json("ups.json");
    assert_eq!(stdin["prompt"], "fix the build");
    assert_eq!(stdin["hook_event_name"], "UserPromptSubmit");
}

#[tokio::test]
async fn user_prompt_submit_block_and_failure() {
    let fx = Fixture::new();
    let block = fx.script(
        "ups_block.sh",
        r#"echo '{"decision":"block","reason":"prompt contains a key"}'"#,
    );
    let feedback = hooks(vec![hook(HookEvent::UserPromptSubmit, None, &block)])
        .user_prompt_submit(&fx.ctx(), "sk-123")
        .await;
    assert!(feedback.block);
    assert_eq!(feedback.reason.as_deref(), Some("prompt contains a key"));

    // A crashing hook on a non-permission event blocks nothing and adds nothing.
    let crash = fx.script("ups_crash.sh", "echo 'context'; echo oops >&2; exit 1");
    let feedback = hooks(vec![hook(HookEvent::UserPromptSubmit, None, &crash)])
        .user_prompt_submit(&fx.ctx(), "hello")
        .await;
    assert_eq!(feedback, Default::default());
}

#[tokio::test]
async fn crash_denies_with_reason() {
    let fx = Fixture::new();
    let cmd = fx.script(
        "crash.sh",
        "echo '{\"decision\":\"approve\"}'\necho 'jq: command not found' >&2\nexit 1",
    );
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
        .await;
    assert!(outcome.is_denied());
    let reason = outcome.reason.unwrap();
    assert!(reason.contains("crash.sh"), "{reason}");
    assert!(reason.contains("exit code 1"), "{reason}");
    assert!(reason.contains("jq: command not found"), "{reason}");
}

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
        .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
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
    let call = hooks.pre_tool_use(&ctx, "Bash", &input);
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
        .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
        .await;
    assert_eq!(outcome.decision, None);
    assert!(started.elapsed() < Duration::from_secs(3));
    let pid = read_pid(&fx.path("sleep.pid"));
    assert!(wait_gone(pid).await, "background sleep ({pid}) left behind");
}

#[tokio::test]
async fn garbage_output_denies() {
    let fx = Fixture::new();
    let cmd = fx.script("garbage.sh", "echo 'looks fine to me!'");
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
        .await;
    assert!(outcome.is_denied());
    let reason = outcome.reason.unwrap();
    assert!(reason.contains("not understood"), "{reason}");
    assert!(reason.contains("garbage.sh"), "{reason}");

    let broken = fx.script("broken.sh", r#"echo '{"decision": "approve"'"#);
    assert!(
        pre_hook(&broken)
            .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
            .await
            .is_denied()
    );
}

#[tokio::test]
async fn huge_output_is_capped_and_denied() {
    let fx = Fixture::new();
    let cmd = fx.script("huge.sh", "head -c 3000000 /dev/zero | tr '\\0' a");
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
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
        .pre_tool_use(&ctx, "Bash", &bash_input())
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
        .pre_tool_use(&fx.ctx(), "Write", &input)
        .await;
    assert_eq!(outcome.decision, None);
}

#[tokio::test]
async fn matcher_filtering() {
    let fx = Fixture::new();
    let deny_with = |name: &str| {
        fx.script(
            &format!("{name}.sh"),
            &format!(r#"echo '{{"decision":"block","reason":"{name}"}}'"#),
        )
    };
    let hooks = hooks(vec![
        hook(HookEvent::PreToolUse, Some("Bash"), &deny_with("bash")),
        hook(
            HookEvent::PreToolUse,
            Some("Edit|Write"),
            &deny_with("edits"),
        ),
        hook(HookEvent::PreToolUse, Some("mcp__.*"), &deny_with("mcp")),
        hook(HookEvent::PostToolUse, None, &deny_with("post")),
    ]);
    let ctx = fx.ctx();
    for (tool, expected) in [
        ("Bash", Some("bash")),
        ("Edit", Some("edits")),
        ("Write", Some("edits")),
        ("mcp__github__list_issues", Some("mcp")),
        ("Read", None),
        ("BashOutput", None),
        ("NotebookEdit", None),
    ] {
        let outcome = hooks.pre_tool_use(&ctx, tool, &json!({})).await;
        assert_eq!(outcome.reason.as_deref(), expected, "tool {tool}");
    }
}

#[tokio::test]
async fn several_hooks_combine() {
    let fx = Fixture::new();
    let allow = fx.script(
        "allow.sh",
        r#"echo '{"hookSpecificOutput":{"permissionDecision":"allow","additionalContext":"from allow"}}'"#,
    );
    let deny = fx.script(
        "deny.sh",
        r#"echo '{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"denied by policy","additionalContext":"from deny"}}'"#,
    );
    let ask = fx.script(
        "ask.sh",
        r#"echo '{"hookSpecificOutput":{"permissionDecision":"ask","updatedInput":{"command":"ls"}}}'"#,
    );
    let ctx = fx.ctx();

    let both = hooks(vec![
        hook(HookEvent::PreToolUse, None, &allow),
        hook(HookEvent::PreToolUse, Some("Bash"), &deny),
    ]);
    let outcome = both.pre_tool_use(&ctx, "Bash", &bash_input()).await;
    assert!(outcome.is_denied());
    assert_eq!(outcome.reason.as_deref(), Some("denied by policy"));
    assert_eq!(outcome.additional_context, vec!["from allow", "from deny"]);

    let allow_ask = hooks(vec![
        hook(HookEvent::PreToolUse, None, &allow),
        hook(HookEvent::PreToolUse, None, &ask),
    ]);
    let outcome = allow_ask.pre_tool_use(&ctx, "Bash", &bash_input()).await;
    assert_eq!(outcome.decision, Some(HookDecision::Ask));
    assert_eq!(outcome.updated_input, Some(json!({"command": "ls"})));
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
    let outcome = hooks.pre_tool_use(&fx.ctx(), "Bash", &bash_input()).await;
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
        .pre_tool_use(&ctx, "Bash", &bash_input())
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
        .pre_tool_use(&fx.ctx(), "Bash", &bash_input())
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

#[tokio::test]
async fn post_tool_use_gets_the_response() {
    let fx = Fixture::new();
    let cmd = fx.script(
        "post.sh",
        r#"cat > "$OUT/post.json"
echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"lint: 2 warnings"}}'"#,
    );
    let hooks = hooks(vec![hook(HookEvent::PostToolUse, Some("Bash"), &cmd)]);
    let feedback = hooks
        .post_tool_use(&fx.ctx(), "Bash", &bash_input(), "removed 3 files", true)
        .await;
    assert!(!feedback.block);
    assert_eq!(feedback.additional_context, vec!["lint: 2 warnings"]);
    let stdin = fx.read_json("post.json");
    assert_eq!(stdin["hook_event_name"], "PostToolUse");
    assert_eq!(stdin["tool_name"], "Bash");
    assert_eq!(stdin["tool_input"], bash_input());
    assert_eq!(
        stdin["tool_response"],
        json!({"output": "removed 3 files", "is_error": true})
    );

    // Not matched: nothing runs.
    std::fs::remove_file(fx.path("post.json")).unwrap();
    let feedback = hooks
        .post_tool_use(&fx.ctx(), "Read", &json!({}), "", false)
        .await;
    assert_eq!(feedback, Default::default());
    assert!(!fx.path("post.json").exists());
}

#[tokio::test]
async fn stop_block() {
    let fx = Fixture::new();
    let cmd = fx.script(
        "stop.sh",
        r#"cat > "$OUT/stop.json"
echo '{"decision":"block","reason":"the tests are still failing"}'"#,
    );
    let feedback = hooks(vec![hook(HookEvent::Stop, Some("ignored"), &cmd)])
        .stop(&fx.ctx(), "All done!")
        .await;
    assert!(feedback.block);
    assert_eq!(
        feedback.reason.as_deref(),
        Some("the tests are still failing")
    );
    let stdin = fx.read_json("stop.json");
    assert_eq!(stdin["hook_event_name"], "Stop");
    assert_eq!(stdin["stop_hook_active"], false);
    assert_eq!(stdin["last_assistant_message"], "All done!");

    let exit2 = fx.script("stop2.sh", "echo 'keep going' >&2; exit 2");
    let feedback = hooks(vec![hook(HookEvent::Stop, None, &exit2)])
        .stop(&fx.ctx(), "done")
        .await;
    assert!(feedback.block);
    assert_eq!(feedback.reason.as_deref(), Some("keep going"));
}

#[tokio::test]
async fn pre_compact_matches_the_trigger() {
    let fx = Fixture::new();
    let cmd = fx.script("compact.sh", r#"cat > "$OUT/compact.json""#);
    let hooks = hooks(vec![hook(HookEvent::PreCompact, Some("auto"), &cmd)]);
    let feedback = hooks.pre_compact(&fx.ctx(), "manual").await;
    assert_eq!(feedback, Default::default());
    assert!(!fx.path("compact.json").exists());
    hooks.pre_compact(&fx.ctx(), "auto").await;
    let stdin = fx.read_json("compact.json");
    assert_eq!(stdin["hook_event_name"], "PreCompact");
    assert_eq!(stdin["trigger"], "auto");
}

#[test]
fn bad_matcher_is_a_config_error() {
    let err = Hooks::new(vec![hook(HookEvent::PreToolUse, Some("Bash("), "true")]).unwrap_err();
    assert!(err.to_string().contains("Bash("), "{err}");
}
