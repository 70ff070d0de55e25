//! Finding sessions in the web UI (`web/e2e/search.mjs` in a real browser,
//! driven as `web_ui.rs` drives its scenarios): a word only a tool printed
//! finds its session, which opens; pin and archive from the list. The
//! server then holds what the clicks did.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use crate::serve_harness::Harness;
use crate::web_ui::run_scenarios;

#[tokio::test]
async fn the_web_ui_finds_pins_and_archives_sessions() {
    let script = json!({"replies": [
        {"repeat": true, "when": {"last_tool_result_contains": "PANGOLIN"},
         "content": [{"type": "text", "text": "Printed it."}]},
        {"repeat": true, "when": {"last_user_contains": "print"},
         "content": [{"type": "tool_use", "name": "Bash",
                      "input": {"command": "printf 'PANGO%s\\n' LIN"}}]},
        {"repeat": true, "content": [{"type": "text", "text": "Nothing to see."}]}
    ]});
    let toml = "[server]\nauth = \"token\"\n[profiles.default]\nallow = [\"Bash\"]\n";
    let h = Harness::new(script, toml).await;
    let token = h.token("alice").await;
    let server = h.start().await;
    let alice = server.as_user(&token);
    let other = alice.session().await;
    alice.message(&other, "just chat").await;
    alice.wait_idle(&other).await;
    let found = alice.session().await;
    alice.message(&found, "print the animal").await;
    assert_eq!(alice.wait_idle(&found).await["status"], "idle");

    // What the scenarios look for.
    let env = [
        ("SEARCH_WORD", "PANGOLIN"),
        ("SEARCH_SESSION", found.as_str()),
        ("OTHER_SESSION", other.as_str()),
    ];
    run_scenarios("search.mjs", &h, &server, &token, "alice", &env).await;

    let (_, pinned) = alice.get(&format!("/v1/sessions/{found}")).await;
    assert_eq!(
        (pinned["pinned"].clone(), pinned["archived"].clone()),
        (json!(true), json!(false))
    );
    let (_, archived) = alice.get(&format!("/v1/sessions/{other}")).await;
    assert_eq!(archived["archived"], true, "{archived}");
}
