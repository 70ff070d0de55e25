//! The commands panel in a real browser (`web/e2e/commands.mjs`): the button
//! runs the same command as `POST …/commands/{name}`, recorded the same way
//! (argv, transcript, audit). Needs what `web_ui` needs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use crate::serve_commands::{
    VM_COMMAND, assert_transcribed_and_audited, install_recorder, recorded,
};
use crate::serve_harness::Harness;
use crate::web_ui::run_scenarios;

#[tokio::test]
async fn the_commands_panel_runs_a_confirmed_command_and_records_it() {
    let script =
        json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "noted"}]}]});
    // Mutating: a danger button with a confirm step.
    let command = VM_COMMAND.replace("mutating = false", "mutating = true");
    let toml = format!("[server]\nauth = \"token\"\n{command}");
    let h = Harness::new(script, &toml).await;
    let token = h.token("local").await;
    let server = h.start().await.with_token(&token);
    let session = server.session().await;
    let record = install_recorder(&h, &session).join("argv.bin");

    let env = [("AGENTD_SESSION", session.as_str())];
    run_scenarios("commands.mjs", &h, &server, &token, "local", &env).await;
    assert_eq!(recorded(&record).unwrap(), ["qm", "reset", "102", "web-1"]);
    let events = server.all_events(&session).await;
    assert_eq!(
        events.iter().filter(|e| e.event == "command.ran").count(),
        1
    );
    assert_transcribed_and_audited(&h, &server, &session).await;
}
