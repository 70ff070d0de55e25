//! Hooks run as real processes: bash scripts written to a temp dir.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentd_policy::hooks::{HookConfig, HookContext, HookDecision, HookEvent, Hooks};
use serde_json::{Value, json};

mod events;
mod process;

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
            run_as: None,
            workspace_pin: None,
            sandbox: None,
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
        sandboxed: false,
        callback: None,
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
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
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
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
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
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
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
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
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
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
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
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
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
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
        .await;
    assert_eq!(outcome.decision, Some(HookDecision::Allow));
    assert_eq!(outcome.reason.as_deref(), Some("legacy ok"));

    let block = fx.script(
        "block.sh",
        r#"echo '{"decision":"block","reason":"legacy no"}'"#,
    );
    let outcome = pre_hook(&block)
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
        .await;
    assert!(outcome.is_denied());
    assert_eq!(outcome.reason.as_deref(), Some("legacy no"));

    let stop = fx.script(
        "stop.sh",
        r#"echo '{"continue":false,"stopReason":"maintenance window"}'"#,
    );
    let outcome = pre_hook(&stop)
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
        .await;
    assert!(outcome.is_denied());
    assert_eq!(outcome.reason.as_deref(), Some("maintenance window"));
}

#[tokio::test]
async fn crash_denies_with_reason() {
    let fx = Fixture::new();
    let cmd = fx.script(
        "crash.sh",
        "echo '{\"decision\":\"approve\"}'\necho 'jq: command not found' >&2\nexit 1",
    );
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
        .await;
    assert!(outcome.is_denied());
    let reason = outcome.reason.unwrap();
    assert!(reason.contains("crash.sh"), "{reason}");
    assert!(reason.contains("exit code 1"), "{reason}");
    assert!(reason.contains("jq: command not found"), "{reason}");
}

#[tokio::test]
async fn garbage_output_denies() {
    let fx = Fixture::new();
    let cmd = fx.script("garbage.sh", "echo 'looks fine to me!'");
    let outcome = pre_hook(&cmd)
        .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
        .await;
    assert!(outcome.is_denied());
    let reason = outcome.reason.unwrap();
    assert!(reason.contains("not understood"), "{reason}");
    assert!(reason.contains("garbage.sh"), "{reason}");

    let broken = fx.script("broken.sh", r#"echo '{"decision": "approve"'"#);
    assert!(
        pre_hook(&broken)
            .pre_tool_use(&fx.ctx(), "toolu_test", "Bash", &bash_input())
            .await
            .is_denied()
    );
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
        let outcome = hooks
            .pre_tool_use(&ctx, "toolu_test", tool, &json!({}))
            .await;
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
    let outcome = both
        .pre_tool_use(&ctx, "toolu_test", "Bash", &bash_input())
        .await;
    assert!(outcome.is_denied());
    assert_eq!(outcome.reason.as_deref(), Some("denied by policy"));
    assert_eq!(outcome.additional_context, vec!["from allow", "from deny"]);

    let allow_ask = hooks(vec![
        hook(HookEvent::PreToolUse, None, &allow),
        hook(HookEvent::PreToolUse, None, &ask),
    ]);
    let outcome = allow_ask
        .pre_tool_use(&ctx, "toolu_test", "Bash", &bash_input())
        .await;
    assert_eq!(outcome.decision, Some(HookDecision::Ask));
    assert_eq!(outcome.updated_input, Some(json!({"command": "ls"})));
}

#[test]
fn bad_matcher_is_a_config_error() {
    let err = Hooks::new(vec![hook(HookEvent::PreToolUse, Some("Bash("), "true")]).unwrap_err();
    assert!(err.to_string().contains("Bash("), "{err}");
}

#[tokio::test]
async fn a_hook_runs_only_in_the_pinned_workspace() {
    use std::os::unix::fs::MetadataExt;
    let fx = Fixture::new();
    let cmd = fx.script("where.sh", "cat >/dev/null; pwd > \"$OUT/ran-in\"");
    let meta = std::fs::metadata(&fx.workspace).unwrap();
    let mut ctx = fx.ctx();
    ctx.workspace_pin = Some((meta.dev(), meta.ino()));
    pre_hook(&cmd)
        .pre_tool_use(&ctx, "toolu_test", "Bash", &bash_input())
        .await;
    let ran_in = std::fs::read_to_string(fx.path("ran-in")).unwrap();
    assert_eq!(ran_in.trim(), fx.workspace.display().to_string());

    // Another directory put where the workspace was: the hook does not run.
    std::fs::remove_file(fx.path("ran-in")).unwrap();
    std::fs::rename(&fx.workspace, fx.path("moved")).unwrap();
    std::fs::create_dir(&fx.workspace).unwrap();
    pre_hook(&cmd)
        .pre_tool_use(&ctx, "toolu_test", "Bash", &bash_input())
        .await;
    assert!(
        !fx.path("ran-in").exists(),
        "the hook ran in the replaced directory"
    );
}

/// A hook answered by a client callback instead of a command.
fn callback_hook(
    answer: impl Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
    timeout_s: u64,
) -> Hooks {
    use futures::FutureExt as _;
    let answer = std::sync::Arc::new(answer);
    let callback = agentd_policy::hooks::HookCallback::new(move |input| {
        let answer = answer.clone();
        async move {
            if input["tool_input"]["command"] == "hang" {
                std::future::pending::<()>().await;
            }
            answer(input)
        }
        .boxed()
    });
    let mut config = hook(
        HookEvent::PreToolUse,
        Some("Bash"),
        "client callback hook_0",
    );
    config.callback = Some(callback);
    config.timeout_s = timeout_s;
    hooks(vec![config])
}

/// What `hooks` say of `Bash(command)`.
async fn bash_call(
    hooks: &Hooks,
    fixture: &Fixture,
    command: &str,
) -> agentd_policy::hooks::PreToolUseOutcome {
    let input = json!({ "command": command });
    hooks
        .pre_tool_use(&fixture.ctx(), "toolu_test", "Bash", &input)
        .await
}

#[tokio::test]
async fn a_callback_hook_is_read_as_a_commands_output_and_fails_closed() {
    let fixture = Fixture::new();
    let deny = callback_hook(
        |input| {
            assert_eq!(input["hook_event_name"], "PreToolUse");
            assert_eq!(input["session_id"], "sess-42");
            Ok(json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": "deny", "permissionDecisionReason": "the app refuses"}}))
        },
        5,
    );
    let outcome = bash_call(&deny, &fixture, "ls").await;
    assert_eq!(outcome.decision, Some(HookDecision::Deny));
    assert_eq!(outcome.reason.as_deref(), Some("the app refuses"));

    let silent = callback_hook(|_| Ok(json!({})), 5);
    let outcome = bash_call(&silent, &fixture, "ls").await;
    assert_eq!(outcome.decision, None);

    let broken = callback_hook(|_| Err("the app went away".into()), 5);
    let outcome = bash_call(&broken, &fixture, "ls").await;
    assert!(outcome.is_denied(), "{outcome:?}");
    assert!(outcome.reason.unwrap().contains("the app went away"));

    let hanging = callback_hook(|_| Ok(json!({})), 1);
    let outcome = bash_call(&hanging, &fixture, "hang").await;
    assert!(
        outcome.is_denied(),
        "a callback that never answers denies: {outcome:?}"
    );
}

#[tokio::test]
async fn an_apps_rewrite_does_not_undo_the_operators() {
    use futures::FutureExt as _;
    let fixture = Fixture::new();
    let wrap = fixture.script(
        "wrap.sh",
        r#"echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"command":"timeout 60 ls"}}}'"#,
    );
    let app = agentd_policy::hooks::HookCallback::new(|_| {
        async {
            Ok(json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "updatedInput": {"command": "ls --app"}}}))
        }
        .boxed()
    });
    let mut client = hook(HookEvent::PreToolUse, None, "client callback hook_0");
    client.callback = Some(app);
    let both = hooks(vec![
        hook(HookEvent::PreToolUse, None, &wrap),
        client.clone(),
    ]);
    let outcome = bash_call(&both, &fixture, "ls").await;
    assert_eq!(
        outcome.updated_input,
        Some(json!({"command": "timeout 60 ls"}))
    );
    // Alone, the app's rewrite applies.
    let alone = hooks(vec![client]);
    let outcome = bash_call(&alone, &fixture, "ls").await;
    assert_eq!(outcome.updated_input, Some(json!({"command": "ls --app"})));
}

/// A project's hook passes the workspace gate like the agent's own commands,
/// and its timeout covers the wait: behind a sandboxed command started before
/// `.git` existed (which could rename what the hook's sandbox binds there), it
/// times out and denies instead of holding the turn until that command ends.
#[tokio::test]
async fn a_sandboxed_hook_waits_at_the_gate_no_longer_than_its_timeout() {
    use agentd_sandbox::{Policy, Sandbox};
    let fx = Fixture::new();
    let never = tokio_util::sync::CancellationToken::new();
    let before_git = Sandbox
        .spawn_gated(
            &Policy::new(&fx.workspace),
            &["sleep".to_string(), "30".to_string()],
            &never,
        )
        .await
        .unwrap()
        .expect("started");
    std::fs::create_dir(fx.workspace.join(".git")).unwrap();
    let ran = fx.workspace.join("ran");
    let mut config = hook(
        HookEvent::PreToolUse,
        None,
        &format!("cat >/dev/null; touch '{}'", ran.display()),
    );
    (config.sandboxed, config.timeout_s) = (true, 1);
    let mut ctx = fx.ctx();
    ctx.sandbox = Some(Policy::new(&fx.workspace));
    let started = std::time::Instant::now();
    let outcome = hooks(vec![config])
        .pre_tool_use(&ctx, "toolu_test", "Bash", &bash_input())
        .await;
    let waited = started.elapsed();
    before_git.kill();
    assert!(outcome.is_denied(), "{outcome:?}");
    assert!(
        outcome.reason.as_deref().unwrap_or("").contains("gate"),
        "{outcome:?}"
    );
    assert!(waited < Duration::from_secs(5), "held for {waited:?}");
    assert!(!ran.exists(), "the hook ran beside the ungated command");
}
