//! Browser notifications in the web UI: `node web/e2e/notify.mjs` against a
//! real `agentd serve` drives headless chromium (notification permission
//! granted, `window.Notification` spied on): a background session's
//! permission request — one older than the list's first page — makes one
//! notification that opens the session; the session in view makes none.
//! The browser plumbing is web_ui.rs's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use crate::serve_harness::Harness;
use crate::web_ui::run_scenarios;

const USER: &str = "alice";

#[tokio::test]
async fn a_background_session_waiting_for_a_permission_notifies() {
    let script = json!({"replies": [
        {"when": {"last_tool_name": "Bash"}, "repeat": true,
         "content": [{"type": "text", "text": "Stopped."}]},
        {"when": {"last_user_contains": "touch it"}, "repeat": true, "content": [
            {"type": "tool_use", "id": "toolu_notify_1", "name": "Bash",
             "input": {"command": "touch notified.txt"}}]},
    ]});
    let toml = "[server]\nauth = \"token\"\n\
        [models.default]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = \"{URL}\"\n\
        [profiles.default]\nmode = \"default\"\napproval_timeout_s = 3600\n";
    let h = Harness::new(script, toml).await;
    let token = h.token(USER).await;
    let server = h.start().await;
    let stdout = run_scenarios("notify.mjs", &h, &server, &token, USER, &[]).await;
    println!("{stdout}");
    assert_eq!(stdout.matches("ok - ").count(), 4, "{stdout}");
}
