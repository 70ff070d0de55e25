//! The non-permission events: UserPromptSubmit, PostToolUse, Stop, PreCompact.

use serde_json::json;

use super::*;

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
async fn post_tool_use_gets_the_response() {
    let fx = Fixture::new();
    let cmd = fx.script(
        "post.sh",
        r#"cat > "$OUT/post.json"
echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"lint: 2 warnings"}}'"#,
    );
    let hooks = hooks(vec![hook(HookEvent::PostToolUse, Some("Bash"), &cmd)]);
    let feedback = hooks
        .post_tool_use(
            &fx.ctx(),
            "toolu_test",
            "Bash",
            &bash_input(),
            "removed 3 files",
            true,
        )
        .await;
    assert!(!feedback.block);
    assert_eq!(feedback.additional_context, vec!["lint: 2 warnings"]);
    let stdin = fx.read_json("post.json");
    assert_eq!(stdin["hook_event_name"], "PostToolUse");
    assert_eq!(stdin["tool_name"], "Bash");
    assert_eq!(stdin["tool_input"], bash_input());
    assert_eq!(stdin["tool_use_id"], "toolu_test");
    assert_eq!(
        stdin["tool_response"],
        json!({"output": "removed 3 files", "is_error": true})
    );

    // Not matched: nothing runs.
    std::fs::remove_file(fx.path("post.json")).unwrap();
    let feedback = hooks
        .post_tool_use(&fx.ctx(), "toolu_test", "Read", &json!({}), "", false)
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
