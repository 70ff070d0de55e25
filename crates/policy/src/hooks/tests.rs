//! Unit tests: matchers, config validation, answer parsing and combination.
//! Real processes are exercised in `tests/engine/hooks.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::output::{feedback_verdict, pre_tool_verdict};
use super::run::{Ending, HookRun, hook_env};
use super::*;

fn hook(event: HookEvent) -> Hook {
    Hook {
        event,
        matcher: Matcher::All,
        command: "check.sh".into(),
        timeout: Duration::from_secs(5),
        sandboxed: false,
        callback: None,
    }
}

fn exited(code: i32, stdout: &str, stderr: &str) -> HookRun {
    HookRun {
        ending: Ending::Exited(code),
        stdout: stdout.into(),
        stderr: stderr.into(),
        stdout_truncated: false,
    }
}

fn pre(code: i32, stdout: &str, stderr: &str) -> PreToolUseOutcome {
    pre_tool_verdict(&hook(HookEvent::PreToolUse), &exited(code, stdout, stderr))
}

fn config(event: HookEvent, matcher: Option<&str>) -> HookConfig {
    HookConfig {
        event,
        matcher: matcher.map(str::to_owned),
        command: "true".into(),
        timeout_s: 1,
        sandboxed: false,
        callback: None,
    }
}

#[test]
fn hooks_matcher_forms() {
    let matches = |matcher: Option<&str>, name: &str| {
        Matcher::parse(matcher)
            .map(|m| m.matches(name))
            .unwrap_or(false)
    };
    for all in [None, Some(""), Some("*"), Some("  ")] {
        assert!(matches(all, "Bash"));
        assert!(matches(all, "mcp__x__y"));
    }
    assert!(matches(Some("Bash"), "Bash"));
    assert!(!matches(Some("Bash"), "BashOutput"));
    assert!(!matches(Some("Edit"), "NotebookEdit"));
    assert!(matches(Some("Edit|Write"), "Write"));
    assert!(matches(Some("Edit | Write"), "Edit"));
    assert!(!matches(Some("Edit|Write"), "Read"));
    assert!(matches(Some("mcp__.*"), "mcp__github__list"));
    assert!(!matches(Some("mcp__.*"), "Bash"));
    // Regexes match the whole name.
    assert!(!matches(Some("Notebook.*"), "MyNotebookEdit"));
    assert!(matches(Some("Notebook.*"), "NotebookEdit"));
    assert!(matches(Some("(Read|Grep)"), "Grep"));
}

#[test]
fn hooks_config_errors() {
    let err = Hooks::new(vec![
        config(HookEvent::PreToolUse, Some("Bash")),
        config(HookEvent::PreToolUse, Some("mcp__(")),
    ])
    .err();
    let Some(HookConfigError::InvalidMatcher { index, matcher, .. }) = &err else {
        panic!("expected an invalid-matcher error, got {err:?}");
    };
    assert_eq!((*index, matcher.as_str()), (1, "mcp__("));
    assert!(
        err.as_ref()
            .is_some_and(|e| e.to_string().contains("mcp__("))
    );

    let mut empty = config(HookEvent::Stop, None);
    empty.command = "  ".into();
    assert!(matches!(
        Hooks::new(vec![empty]),
        Err(HookConfigError::EmptyCommand { index: 0, .. })
    ));
    let mut zero = config(HookEvent::Stop, None);
    zero.timeout_s = 0;
    assert!(matches!(
        Hooks::new(vec![zero]),
        Err(HookConfigError::ZeroTimeout { index: 0, .. })
    ));

    let hooks = Hooks::new(vec![config(HookEvent::Stop, None)]).ok();
    assert!(hooks.as_ref().is_some_and(|h| !h.is_empty()));
    assert!(hooks.as_ref().is_some_and(|h| h.has_event(HookEvent::Stop)));
    assert!(hooks.is_some_and(|h| !h.has_event(HookEvent::PreToolUse)));
    assert!(Hooks::new(Vec::new()).is_ok_and(|h| h.is_empty()));
}

#[test]
fn hooks_config_deserializes() {
    let parsed: HookConfig = serde_json::from_value(json!({
        "event": "PreToolUse", "matcher": "Bash", "command": "x.sh"
    }))
    .unwrap();
    assert_eq!(parsed.event, HookEvent::PreToolUse);
    assert_eq!(parsed.timeout_s, DEFAULT_TIMEOUT_S);
    assert!(
        serde_json::from_value::<HookConfig>(json!({
            "event": "PreToolUse", "command": "x", "bogus": 1
        }))
        .is_err()
    );
    assert!(
        serde_json::from_value::<HookConfig>(json!({"event": "Nope", "command": "x"})).is_err()
    );
}

#[test]
fn hooks_pre_tool_answers() {
    assert_eq!(pre(0, "", ""), PreToolUseOutcome::default());
    assert_eq!(pre(0, "  \n", ""), PreToolUseOutcome::default());
    assert_eq!(pre(0, "{}", ""), PreToolUseOutcome::default());

    let allow = pre(
        0,
        r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"fine"}}"#,
        "",
    );
    assert_eq!(allow.decision, Some(HookDecision::Allow));
    assert_eq!(allow.reason.as_deref(), Some("fine"));

    let deny = pre(
        0,
        r#"{"hookSpecificOutput":{"permissionDecision":"deny"}}"#,
        "",
    );
    assert!(deny.is_denied());
    assert!(deny.reason.is_some_and(|r| r.contains("check.sh")));

    let legacy = pre(0, r#"{"decision":"approve","reason":"ok"}"#, "");
    assert_eq!(legacy.decision, Some(HookDecision::Allow));
    let legacy = pre(0, r#"{"decision":"block","reason":"no"}"#, "");
    assert_eq!(
        (legacy.decision, legacy.reason.as_deref()),
        (Some(HookDecision::Deny), Some("no"))
    );
    // The stricter of the two forms counts.
    let both = pre(
        0,
        r#"{"decision":"block","reason":"legacy","hookSpecificOutput":{"permissionDecision":"allow"}}"#,
        "",
    );
    assert_eq!(
        (both.decision, both.reason.as_deref()),
        (Some(HookDecision::Deny), Some("legacy"))
    );

    let stop = pre(0, r#"{"continue":false,"stopReason":"halt"}"#, "");
    assert_eq!(
        (stop.decision, stop.reason.as_deref()),
        (Some(HookDecision::Deny), Some("halt"))
    );

    let updated = pre(
        0,
        r#"{"hookSpecificOutput":{"updatedInput":{"command":"ls"},"additionalContext":"ctx"}}"#,
        "",
    );
    assert_eq!(updated.decision, None);
    assert_eq!(updated.updated_input, Some(json!({"command": "ls"})));
    assert_eq!(updated.additional_context, vec!["ctx".to_owned()]);
}

#[test]
fn hooks_pre_tool_failures_deny() {
    let garbage = pre(0, "sure, go ahead", "");
    assert!(garbage.is_denied());
    assert!(
        garbage
            .reason
            .is_some_and(|r| r.contains("not understood") && r.contains("check.sh"))
    );
    for bad in [
        r#"{"hookSpecificOutput":{"permissionDecision":"maybe"}}"#,
        r#"{"decision":"perhaps"}"#,
        r#"{"hookSpecificOutput":{"updatedInput":"rm -rf /"}}"#,
        r#"{"continue":"no"}"#,
        r#"{"decision":"allow""#,
        "[1,2]",
    ] {
        assert!(pre(0, bad, "").is_denied(), "{bad} should deny");
    }

    let exit2 = pre(2, "", "  not on main  \n");
    assert_eq!(
        (exit2.decision, exit2.reason.as_deref()),
        (Some(HookDecision::Deny), Some("not on main"))
    );
    assert!(
        pre(2, "", "")
            .reason
            .is_some_and(|r| r.contains("exit code 2"))
    );

    let crash = pre(1, r#"{"decision":"approve"}"#, "boom");
    assert!(crash.is_denied());
    assert!(
        crash
            .reason
            .is_some_and(|r| r.contains("exit code 1") && r.contains("boom"))
    );

    let h = hook(HookEvent::PreToolUse);
    for ending in [
        Ending::TimedOut(3),
        Ending::Signaled(9),
        Ending::Failed("could not be started".into()),
    ] {
        let run = HookRun {
            ending,
            stdout: r#"{"decision":"approve"}"#.into(),
            stderr: String::new(),
            stdout_truncated: false,
        };
        assert!(pre_tool_verdict(&h, &run).is_denied());
    }
    let run = HookRun {
        ending: Ending::TimedOut(3),
        stdout: String::new(),
        stderr: String::new(),
        stdout_truncated: false,
    };
    assert!(
        pre_tool_verdict(&h, &run)
            .reason
            .is_some_and(|r| r.contains("timed out after 3 s"))
    );
    let mut truncated = exited(0, "{}", "");
    truncated.stdout_truncated = true;
    assert!(pre_tool_verdict(&h, &truncated).is_denied());
}

#[test]
fn hooks_feedback_answers() {
    let ups = hook(HookEvent::UserPromptSubmit);
    let stop = hook(HookEvent::Stop);
    let text = feedback_verdict(&ups, &exited(0, "today is Tuesday\n", ""));
    assert_eq!(text.additional_context, vec!["today is Tuesday".to_owned()]);
    assert!(!text.block);
    assert_eq!(
        feedback_verdict(&stop, &exited(0, "today is Tuesday\n", "")),
        HookFeedback::default()
    );
    let json = feedback_verdict(
        &ups,
        &exited(
            0,
            r#"{"hookSpecificOutput":{"additionalContext":"ctx"}}"#,
            "",
        ),
    );
    assert_eq!(json.additional_context, vec!["ctx".to_owned()]);

    let block = feedback_verdict(
        &stop,
        &exited(0, r#"{"decision":"block","reason":"go on"}"#, ""),
    );
    assert_eq!(
        (block.block, block.reason.as_deref()),
        (true, Some("go on"))
    );
    let cont = feedback_verdict(&stop, &exited(0, r#"{"continue":false}"#, ""));
    assert!(cont.block && cont.reason.is_some());
    let exit2 = feedback_verdict(&ups, &exited(2, "", "secret in prompt"));
    assert_eq!(
        (exit2.block, exit2.reason.as_deref()),
        (true, Some("secret in prompt"))
    );

    // Failures never block and contribute nothing.
    assert_eq!(
        feedback_verdict(&ups, &exited(1, "ctx", "boom")),
        HookFeedback::default()
    );
    assert_eq!(
        feedback_verdict(&stop, &exited(0, r#"{"decision":"block","reason":3}"#, "")),
        HookFeedback::default()
    );
}

fn verdict(decision: Option<HookDecision>, reason: Option<&str>) -> PreToolUseOutcome {
    PreToolUseOutcome {
        decision,
        reason: reason.map(str::to_owned),
        ..PreToolUseOutcome::default()
    }
}

#[test]
fn hooks_combination() {
    use HookDecision::*;
    assert_eq!(combine_pre_tool(Vec::new()), PreToolUseOutcome::default());
    let combined = combine_pre_tool(vec![
        verdict(Some(Allow), Some("a")),
        verdict(Some(Deny), Some("d1")),
        verdict(Some(Ask), Some("q")),
        verdict(Some(Deny), Some("d2")),
    ]);
    assert_eq!(combined.decision, Some(Deny));
    assert_eq!(combined.reason.as_deref(), Some("d1\nd2"));

    let combined = combine_pre_tool(vec![
        verdict(Some(Allow), None),
        verdict(Some(Ask), Some("check")),
        verdict(None, None),
    ]);
    assert_eq!(
        (combined.decision, combined.reason.as_deref()),
        (Some(Ask), Some("check"))
    );

    let mut first = verdict(Some(Allow), None);
    first.updated_input = Some(json!({"n": 1}));
    first.additional_context = vec!["c1".into()];
    let mut second = verdict(None, None);
    second.updated_input = Some(json!({"n": 2}));
    second.additional_context = vec!["c2".into()];
    let combined = combine_pre_tool(vec![first.clone(), second.clone(), verdict(None, None)]);
    assert_eq!(combined.decision, Some(Allow));
    assert_eq!(combined.updated_input, Some(json!({"n": 2})));
    assert_eq!(
        combined.additional_context,
        vec!["c1".to_owned(), "c2".to_owned()]
    );
    // A deny drops any updated input.
    let combined = combine_pre_tool(vec![first, second, verdict(Some(Deny), Some("no"))]);
    assert_eq!(combined.updated_input, None);

    let feedback = combine_feedback(vec![
        HookFeedback {
            block: false,
            reason: None,
            additional_context: vec!["x".into()],
        },
        HookFeedback {
            block: true,
            reason: Some("r".into()),
            additional_context: vec!["y".into()],
        },
    ]);
    assert!(feedback.block);
    assert_eq!(feedback.reason.as_deref(), Some("r"));
    assert_eq!(
        feedback.additional_context,
        vec!["x".to_owned(), "y".to_owned()]
    );
}

fn context() -> HookContext {
    HookContext {
        session_id: "s-1".into(),
        cwd: PathBuf::from("/work/space"),
        transcript_path: None,
        env: BTreeMap::from([("EXTRA".to_owned(), "1".to_owned())]),
        run_as: None,
        workspace_pin: None,
        sandbox: None,
    }
}

#[test]
fn hooks_stdin_and_env() {
    let ctx = context();
    let bytes = stdin_json(
        &ctx,
        HookEvent::PreToolUse,
        json!({"tool_name": "Bash", "tool_input": {"command": "ls"}}),
    );
    let value: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(value["session_id"], "s-1");
    assert_eq!(value["cwd"], "/work/space");
    assert_eq!(value["transcript_path"], Value::Null);
    assert_eq!(value["hook_event_name"], "PreToolUse");
    assert_eq!(value["tool_input"]["command"], "ls");

    let env: BTreeMap<String, String> = hook_env(&ctx).into_iter().collect();
    let names: Vec<&str> = env.keys().map(String::as_str).collect();
    for name in &names {
        assert!(
            matches!(
                *name,
                "PATH" | "HOME" | "LANG" | "EXTRA" | "AGENTD_SESSION_ID" | "CLAUDE_PROJECT_DIR"
            ),
            "unexpected variable {name}"
        );
    }
    assert_eq!(
        env.get("CLAUDE_PROJECT_DIR").map(String::as_str),
        Some("/work/space")
    );
    assert_eq!(
        env.get("AGENTD_SESSION_ID").map(String::as_str),
        Some("s-1")
    );
    assert!(env.contains_key("PATH") && env.contains_key("LANG"));
}

#[test]
fn hooks_label_is_short() {
    let mut long = hook(HookEvent::PreToolUse);
    long.command = "é".repeat(300);
    let label = long.label();
    assert!(label.starts_with("PreToolUse hook `"));
    assert!(label.chars().count() < 120);
}

#[test]
fn a_project_hook_can_deny_or_ask_but_never_allow_or_rewrite() {
    let project = Hook {
        sandboxed: true,
        ..hook(HookEvent::PreToolUse)
    };
    let allow = r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "allow", "permissionDecisionReason": "fine",
        "updatedInput": {"command": "rm -rf /"}, "additionalContext": "note"}}"#;
    let outcome = pre_tool_verdict(&project, &exited(0, allow, ""));
    assert_eq!(outcome.decision, None);
    assert_eq!(outcome.updated_input, None);
    assert_eq!(outcome.additional_context, ["note"]);
    let operator = pre_tool_verdict(&hook(HookEvent::PreToolUse), &exited(0, allow, ""));
    assert_eq!(operator.decision, Some(HookDecision::Allow));
    let deny = r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "no"}}"#;
    assert!(pre_tool_verdict(&project, &exited(0, deny, "")).is_denied());
}
