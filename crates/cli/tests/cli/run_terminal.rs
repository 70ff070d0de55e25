//! `agentd run --input-format stream-json` in a real terminal (tmux): stdin
//! holds the messages, so a permission is never asked there (its reader
//! would take the next message's line): the profile's `on_no_answer`
//! applies, as without a terminal, and every typed message is a turn.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use crate::chat::script;
use crate::chat_screen::Screen;
use crate::run_harness::{Harness, Wire, stream_json_run};

fn user_line(text: &str) -> String {
    json!({"type": "user", "message": {"role": "user", "content": text}}).to_string()
}

#[tokio::test]
async fn stream_json_input_on_a_terminal_answers_permissions_without_asking() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    // `default` mode: Write asks.
    let screen = Screen::start(&h.command(&stream_json_run("default")));
    screen.type_line(&user_line("please write the note"));
    let shown = screen.wait_for("\"no_terminal\"").await;
    assert!(
        !shown.contains("allow? [y]es"),
        "asked on the terminal: {shown}"
    );
    screen.wait_for("The note is written.").await;
    assert!(!h.ws().join("notes.txt").exists(), "the Write ran unasked");

    // The next line is a message, not an answer.
    screen.type_line(&user_line("hi there"));
    screen.wait_for("streamed word by word.").await;
    screen.keys(&["C-d"]);
    let shown = screen.wait_exit().await;
    assert_eq!(
        shown.matches("\"type\":\"turn.finished\"").count(),
        2,
        "two turns: {shown}"
    );
}
