//! `agentd chat --server` against a real `agentd serve` with tokens, in a
//! real terminal (tmux): the reply streams in, a Write asks and is approved
//! through the approvals API, or by another client while the chat asks,
//! Ctrl-C interrupts a stalled turn, `/compact` works, resuming a session
//! whose turn runs or waits follows that turn, `--resume --model` greets
//! with the new model, and a bad token or local-only flags are clear errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{Value, json};

use crate::chat::script;
use crate::chat_screen::{SCREEN_WAIT, Screen};
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

/// The session's requests waiting for an answer, once there is one.
async fn pending(api: &Server, session: &str) -> Value {
    let deadline = tokio::time::Instant::now() + SCREEN_WAIT;
    loop {
        let (_, pending) = api.get(&format!("/v1/sessions/{session}/pending")).await;
        if pending["pending"].get(0).is_some() {
            return pending["pending"][0].clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "nothing pending");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_permission_answered_by_another_client_takes_the_prompt_down() {
    let (h, server, token) = server().await;
    let screen = chat(&h, &server, &token, &[]);
    screen.say("please write the note").await;
    screen.wait_for("allow? [y] once").await;
    // Another client (the web UI, say) answers; no key is pressed here.
    let api = server.as_user(&token);
    let (_, sessions) = api.get("/v1/sessions").await;
    let id = sessions["sessions"][0]["id"].as_str().unwrap().to_string();
    let request = pending(&api, &id).await["request_id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/v1/sessions/{id}/permissions/{request}");
    let (status, body) = api.post(&path, json!({"decision": "allow"})).await;
    assert_eq!(status, 200, "{body}");
    let shown = screen.wait_for("The note is written.").await;
    assert!(
        shown.contains("(answered elsewhere: allow by user:alice)"),
        "{shown}"
    );
    assert!(!shown.contains("error:"), "{shown}");
    // The turn finished: the prompt is back and takes a message.
    screen.say("hi there").await;
    screen.wait_for("streamed word by word.").await;
    let workspace = h.data().join("workspaces").join(&id);
    assert!(workspace.join("notes.txt").exists());
}

#[tokio::test]
async fn resuming_a_session_that_waits_for_a_permission_asks_it() {
    let (h, server, token) = server().await;
    let api = server.as_user(&token);
    let id = api.session().await;
    api.message(&id, "please write the note").await;
    pending(&api, &id).await;

    let screen = chat(&h, &server, &token, &["--resume", &id]);
    let asked = screen.wait_for("allow? [y] once").await;
    assert!(asked.contains("Write(notes.txt)"), "{asked}");
    screen.keys(&["y"]);
    screen.wait_for("The note is written.").await;
    screen.say("hi there").await;
    let shown = screen.wait_for("streamed word by word.").await;
    assert!(!shown.contains("error:"), "{shown}");
}

#[tokio::test]
async fn resuming_a_running_turn_does_not_ask_what_was_answered() {
    let (h, server, token) = server().await;
    let api = server.as_user(&token);
    let id = api.session().await;
    // Bash asks; allowed over HTTP, it then runs for a minute.
    api.message(&id, "run the slow job").await;
    let request = pending(&api, &id).await["request_id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/v1/sessions/{id}/permissions/{request}");
    let (status, _) = api.post(&path, json!({"decision": "allow"})).await;
    assert_eq!(status, 200);

    let screen = chat(&h, &server, &token, &["--resume", &id]);
    screen.wait_for("(a turn is running: following it").await;
    // Give a re-asked request the time to show.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!screen.text().contains("allow? [y]"), "{}", screen.text());
    screen.keys(&["Escape"]);
    screen.wait_for("(turn interrupted").await;
    screen.say("hi there").await;
    screen.wait_for("streamed word by word.").await;
}

#[tokio::test]
async fn resume_with_another_model_greets_with_it() {
    let toml = "[server]\nauth = \"token\"\n[models.quick]\nprovider = \"anthropic\"\n\
        model = \"claude-haiku-4-5\"\nbase_url = \"{URL}\"\n";
    let h = Harness::new(script(), toml).await;
    let server = h.start().await;
    let token = h.token("alice").await;
    let api = server.as_user(&token);
    let id = api.session().await;
    let (_, before) = api.get(&format!("/v1/sessions/{id}")).await;
    assert_ne!(before["model"], "quick");

    let screen = chat(&h, &server, &token, &["--resume", &id, "--model", "quick"]);
    let shown = screen.wait_prompt().await;
    assert!(shown.contains("· model quick ·"), "{shown}");
}

#[tokio::test]
async fn local_only_flags_are_refused_with_a_server() {
    let (h, server, token) = server().await;
    for flag in [
        &["--permission-mode", "bypass"][..],
        &["--allow", "Bash"],
        &["--cwd", "/tmp"],
    ] {
        let screen = chat(&h, &server, &token, flag);
        let shown = screen.wait_exit().await;
        assert!(
            shown.contains("the server's profile sets the permissions"),
            "{flag:?}: {shown}"
        );
    }
    let (_, sessions) = server.as_user(&token).get("/v1/sessions").await;
    assert_eq!(sessions["sessions"], json!([]), "a session was made");
}
