//! `agentd chat --server` against a real `agentd serve` with tokens, in a
//! real terminal (tmux): the reply streams in, a Write asks and is approved
//! through the approvals API, Ctrl-C interrupts a stalled turn, `/compact`
//! works, and a bad token is a clear error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::chat::script;
use crate::chat_screen::Screen;
use crate::serve_harness::{Harness, Server};

/// A token server whose default profile asks before Write.
async fn server() -> (Harness, Server, String) {
    let toml = "[server]\nauth = \"token\"\n[profiles.default]\nmode = \"default\"\n";
    let h = Harness::new(script(), toml).await;
    let server = h.start().await;
    let token = h.token("alice").await;
    (h, server, token)
}

/// `agentd chat --server URL ARGS` with `token` in `AGENTD_TOKEN`.
fn chat(h: &Harness, server: &Server, token: &str, args: &[&str]) -> Screen {
    let mut all = vec!["chat", "--server", &server.url];
    all.extend_from_slice(args);
    let mut command = h.command(&all);
    command.env("AGENTD_TOKEN", token);
    Screen::start(command.as_std())
}

#[tokio::test]
async fn a_remote_chat_streams_approves_and_compacts() {
    let (h, server, token) = server().await;
    let screen = chat(&h, &server, &token, &[]);
    screen.say("hi there").await;
    screen.wait_for("streamed word by word.").await;

    screen.say("please write the note").await;
    let asked = screen.wait_for("allow? [y] once").await;
    assert!(asked.contains("Write(notes.txt)"), "{asked}");
    screen.keys(&["a"]);
    screen.wait_for("The note is written.").await;
    let session = server.as_user(&token);
    let (_, sessions) = session.get("/v1/sessions").await;
    let id = sessions["sessions"][0]["id"].as_str().unwrap();
    let workspace = h.data().join("workspaces").join(id);
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes.txt")).unwrap(),
        "from the chat\n"
    );
    let (_, events) = session.get(&format!("/v1/sessions/{id}/messages")).await;
    assert!(events.to_string().contains("The note is written."));

    screen.say("/compact").await;
    screen.wait_for("(conversation compacted").await;
    screen.say("/model").await;
    screen.wait_for("(model: ").await;
}

#[tokio::test]
async fn ctrl_c_interrupts_a_remote_turn_and_the_chat_goes_on() {
    let (h, server, token) = server().await;
    // Bash asks in `default` mode: `always` lets it run.
    let screen = chat(&h, &server, &token, &[]);
    screen.say("run the slow job").await;
    screen.wait_for("allow? [y] once").await;
    screen.keys(&["y"]);
    screen.wait_for("deny: once").await;
    let started = std::time::Instant::now();
    screen.keys(&["C-c"]);
    screen.wait_for("(turn interrupted").await;
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    screen.say("hi again").await;
    screen.wait_for("streamed word by word.").await;
}

#[tokio::test]
async fn a_bad_token_is_refused_clearly() {
    let (h, server, _) = server().await;
    let screen = chat(&h, &server, "agentd_not-a-token", &[]);
    let shown = screen.wait_exit().await;
    assert!(shown.contains("agentd:"), "{shown}");
    assert!(shown.to_lowercase().contains("401"), "{shown}");
}
