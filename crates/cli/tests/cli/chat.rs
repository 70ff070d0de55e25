//! `agentd chat` on this machine's store, in a real terminal (tmux): the
//! reply streams in, a Write asks and is approved with a key, Esc
//! interrupts a stalled turn, `/compact` and `/rewind` work, `--resume`
//! shows the transcript, the agent's questions are answered inline, and
//! Ctrl-C twice at the prompt leaves. Also: `n` denies, `/fork`, `/clear`,
//! `--continue`, keys typed during a turn start the next prompt,
//! `--dangerously-skip-permissions` asks nothing, and without a terminal
//! the chat refuses to start.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use crate::chat_screen::Screen;
use crate::run_harness::{Harness, Wire};

fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// What the scripted model answers, by what it is asked.
pub fn script() -> Value {
    json!({"replies": [
        {"repeat": true, "when": {"any_contains": "Summarise the conversation above"},
         "content": [text("SUMMARY-OF-THE-CHAT")]},
        // Three chunks, 300 ms apart: the first shows before the last comes.
        {"repeat": true, "when": {"last_user_contains": "hi "}, "delay_ms": 300,
         "content": [text("Hello from the scripted model, streamed word by word.")]},
        {"repeat": true, "when": {"last_user_contains": "database"}, "content": [
            {"type": "tool_use", "name": "AskUserQuestion", "input": {"questions": [
                {"question": "Which database?", "header": "Database", "multiSelect": false,
                 "options": [{"label": "SQLite", "description": "embedded"},
                             {"label": "Postgres", "description": "a server"}]}]}}]},
        {"repeat": true, "when": {"last_tool_result_contains": "Postgres"},
         "content": [text("Going with Postgres.")]},
        {"repeat": true, "when": {"last_user_contains": "write"}, "content": [
            text("Writing the note."),
            {"type": "tool_use", "name": "Write",
             "input": {"file_path": "notes.txt", "content": "from the chat\n"}}]},
        {"repeat": true, "when": {"last_tool_name": "Write"},
         "content": [text("The note is written.")]},
        {"repeat": true, "when": {"last_user_contains": "slow"}, "content": [
            text("Starting the long job."),
            {"type": "tool_use", "name": "Bash", "input": {"command": "sleep 60"}}]},
        {"repeat": true, "when": {"last_tool_name": "Bash"},
         "content": [text("The long job ended.")]},
        {"repeat": true, "content": [text("ok")]}
    ]})
}

/// `agentd chat ARGS` in a terminal, on the harness's model and store.
fn chat(h: &Harness, args: &[&str]) -> Screen {
    let mut all = vec!["chat"];
    all.extend_from_slice(args);
    Screen::start(&h.command(&all))
}

#[tokio::test]
async fn a_message_streams_its_reply_and_resume_shows_the_transcript() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    let screen = chat(&h, &["--permission-mode", "bypass"]);
    screen.say("hi there").await;
    screen
        .wait_until("the reply's first words alone", |text| {
            text.contains("Hello from the") && !text.contains("word by word.")
        })
        .await;
    let shown = screen.wait_for("streamed word by word.").await;
    let session = greeted_session(&shown);
    screen.wait_prompt().await;
    screen.keys(&["C-c"]);
    screen.wait_for("press Ctrl-C again to exit").await;
    screen.keys(&["C-c"]);
    screen.wait_exit().await;

    let resumed = chat(&h, &["--resume", &session]);
    let shown = resumed.wait_for("› hi there").await;
    assert!(shown.contains("Hello from the scripted model"), "{shown}");
    resumed.wait_prompt().await;
    resumed.keys(&["C-d"]);
    resumed.wait_exit().await;
    assert_eq!(
        h.model_requests().len(),
        1,
        "resuming asks the model nothing"
    );
}

#[tokio::test]
async fn a_write_asks_and_is_approved_then_rewound() {
    // `default` mode: Write asks.
    let h = Harness::new(Wire::Anthropic, script()).await;
    let screen = chat(&h, &["--permission-mode", "default"]);
    screen.say("please write the note").await;
    let asked = screen.wait_for("allow? [y] once").await;
    assert!(asked.contains("Write(notes.txt)"), "{asked}");
    assert!(
        !h.ws().join("notes.txt").exists(),
        "written before the answer"
    );
    screen.keys(&["y"]);
    let done = screen.wait_for("The note is written.").await;
    assert!(done.contains("Write(notes.txt) ✓"), "{done}");
    assert_eq!(
        std::fs::read_to_string(h.ws().join("notes.txt")).unwrap(),
        "from the chat\n"
    );

    screen.say("/rewind 1").await;
    screen.wait_for("(rewound: 1 files restored").await;
    assert!(
        !h.ws().join("notes.txt").exists(),
        "the rewind kept the file"
    );
}

#[tokio::test]
async fn escape_interrupts_a_stalled_turn_and_compact_summarises() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    let screen = chat(&h, &["--permission-mode", "bypass"]);
    screen.say("run the slow job").await;
    screen.wait_for("Starting the long job.").await;
    let started = std::time::Instant::now();
    screen.keys(&["Escape"]);
    let shown = screen.wait_for("(turn interrupted").await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "the interrupt waited for the tool"
    );
    assert!(!shown.contains("The long job ended."), "{shown}");

    // The chat goes on.
    screen.say("/compact").await;
    screen.wait_for("(conversation compacted").await;
    let summarised = h.model_requests().iter().any(|r| {
        r.body
            .to_string()
            .contains("Summarise the conversation above")
    });
    assert!(summarised, "no compaction request reached the model");
    screen.say("/cost").await;
    screen.wait_for("turns, ").await;
}

#[tokio::test]
async fn the_agents_question_is_answered_inline() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    let screen = chat(&h, &["--permission-mode", "bypass"]);
    screen.say("pick a database").await;
    let asked = screen.wait_for("answer (a number").await;
    assert!(asked.contains("Which database?"), "{asked}");
    assert!(asked.contains("2. Postgres"), "{asked}");
    screen.type_line("2");
    screen.wait_for("Going with Postgres.").await;
}

/// Wait for a line that is `line` alone.
async fn wait_line(screen: &Screen, line: &str) {
    screen
        .wait_until(&format!("the line {line:?}"), |text| {
            text.lines().any(|l| l.trim() == line)
        })
        .await;
}

/// The session id of the chat's greeting.
fn greeted_session(shown: &str) -> String {
    shown
        .split("session ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn n_denies_the_write() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    let screen = chat(&h, &["--permission-mode", "default"]);
    screen.say("please write the note").await;
    screen.wait_for("allow? [y] once").await;
    screen.keys(&["n"]);
    let shown = screen.wait_for("The note is written.").await;
    assert!(shown.contains("deny: deny"), "{shown}");
    assert!(shown.contains("Write(notes.txt) ✗"), "{shown}");
    assert!(!h.ws().join("notes.txt").exists(), "written though denied");
}

/// As in Claude Code, the flag bypasses permissions even beside a
/// `--permission-mode` that would ask.
#[tokio::test]
async fn skipping_permissions_writes_without_asking() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    let screen = chat(
        &h,
        &[
            "--permission-mode",
            "default",
            "--dangerously-skip-permissions",
        ],
    );
    screen.say("please write the note").await;
    let shown = screen.wait_for("The note is written.").await;
    assert!(shown.contains("Write(notes.txt) ✓"), "{shown}");
    assert!(!shown.contains("allow? [y] once"), "{shown}");
    assert_eq!(
        std::fs::read_to_string(h.ws().join("notes.txt")).unwrap(),
        "from the chat\n"
    );
}

#[tokio::test]
async fn fork_and_clear_move_to_new_sessions_and_continue_resumes_the_latest() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    let screen = chat(&h, &["--permission-mode", "bypass"]);
    screen.say("hi there").await;
    let shown = screen.wait_for("streamed word by word.").await;
    let first = greeted_session(&shown);

    screen.say("/fork").await;
    let shown = screen.wait_for("now in session ").await;
    let forked = shown
        .split("now in session ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap()
        .to_string();
    assert!(shown.contains(&format!("(forked {first}")), "{shown}");
    assert_ne!(forked, first);

    screen.say("/clear").await;
    screen.wait_for("(new session ").await;
    screen.say("/cost").await;
    let shown = screen.wait_for("turns, ").await;
    assert!(
        shown.contains("0 turns, "),
        "a cleared session has no turns: {shown}"
    );
    screen.say("tell me a secret").await;
    wait_line(&screen, "ok").await;
    screen.wait_prompt().await;
    screen.keys(&["C-d"]);
    screen.wait_exit().await;

    // `--continue`: the latest session on this directory, the cleared one.
    let continued = chat(&h, &["--continue"]);
    let shown = continued.wait_for("› tell me a secret").await;
    assert!(!shown.contains("› hi there"), "{shown}");
    continued.wait_prompt().await;
}

#[tokio::test]
async fn keys_typed_during_a_turn_start_the_next_prompt() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    let screen = chat(&h, &["--permission-mode", "bypass"]);
    screen.say("run the slow job").await;
    screen.wait_for("Starting the long job.").await;
    screen.keys(&["-l", "and after"]);
    screen.keys(&["Escape"]);
    screen.wait_for("(turn interrupted").await;
    screen
        .wait_until("the typed keys at the prompt", |text| {
            text.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::trim)
                == Some("› and after")
        })
        .await;
    screen.keys(&["Enter"]);
    // The script's answer after a Bash call.
    screen.wait_for("The long job ended.").await;
    let last = h.model_requests().last().unwrap().body.to_string();
    assert!(last.contains("and after"), "{last}");
}

#[tokio::test]
async fn without_a_terminal_chat_refuses_clearly() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    let mut command = h.command(&["chat"]);
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("agentd chat needs a terminal"), "{stderr}");
    assert!(h.model_requests().is_empty());
}
