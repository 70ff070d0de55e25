//! `agentd run` end to end on PostgreSQL: the real binary with
//! `AGENTD_DATABASE_URL` naming a PostgreSQL database (a schema of its own in
//! the throwaway cluster `make test` starts, see `scripts/postgres.sh`): a
//! tool-using turn, then a second process resuming with full context.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::run_harness;
use crate::serve_harness;
use agentd_store::prelude::*;

use agentd_protocol::{Event, Role, TurnStatus};
use agentd_store::postgres::PostgresStore;
use run_harness::{Harness, Run, Wire};
use serde_json::json;
use serve_harness::fresh_database_url;

/// `agentd run` as `Harness::run` does, with the store at `url`.
async fn run_on(h: &Harness, url: &str, prompt: &str, extra: &[&str]) -> Run {
    let mut args = vec![
        "run",
        "--output-format",
        "stream-json",
        "--permission-mode",
        "bypass",
    ];
    args.extend_from_slice(extra);
    args.push(prompt);
    let mut cmd = h.command(&args);
    cmd.env("AGENTD_DATABASE_URL", url);
    let output = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    Run::from_output(output)
}

#[tokio::test]
async fn tool_turn_then_resume_in_a_new_process_on_postgres() {
    let url = fresh_database_url().await;
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [
            {"when": {"last_user_contains": "remember"}, "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "name": "Bash",
                 "input": {"command": "echo PINEAPPLE-42 > kw.txt && cat kw.txt"}}
            ]},
            {"when": {"last_tool_result_contains": "PINEAPPLE-42"}, "content": [
                {"type": "text", "text": "The keyword is PINEAPPLE-42."}
            ]},
            {"when": {"last_user_contains": "what was"}, "content": [
                {"type": "text", "text": "It was PINEAPPLE-42."}
            ]}
        ]}),
    )
    .await;

    let first = run_on(&h, &url, "remember the keyword from the shell", &[]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    first.assert_gapless_from(1);
    assert_eq!(first.finished().status, TurnStatus::Completed);
    assert!(
        first.events.iter().any(|e| matches!(
            &e.event,
            Event::ToolFinished {
                is_error: false,
                ..
            }
        )),
        "the Bash tool ran: {:?}",
        first.types()
    );
    assert_eq!(
        std::fs::read_to_string(h.ws().join("kw.txt")).unwrap(),
        "PINEAPPLE-42\n"
    );
    // Nothing went to SQLite.
    assert!(!h.data_dir.path().join("agentd.db").exists());

    // What was streamed is what PostgreSQL holds.
    let id = first.session_id();
    let store = PostgresStore::connect(&url).await.unwrap();
    assert_eq!(
        store.events_after(&id, 0, 10_000).await.unwrap(),
        first.events
    );
    let transcript = store.messages(&id).await.unwrap();
    assert_eq!(transcript.first().unwrap().message.role, Role::User);
    assert!(transcript.len() >= 4, "{transcript:?}");
    let last_seq = first.events.last().unwrap().seq;

    // A second process resumes from PostgreSQL with the whole conversation.
    let second = run_on(&h, &url, "what was the keyword?", &["--resume", &id]).await;
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(second.session_id(), id);
    second.assert_gapless_from(last_seq + 1);
    assert_eq!(
        second.finished().result.as_deref(),
        Some("It was PINEAPPLE-42.")
    );
    let body = h.model_requests().last().unwrap().body.to_string();
    for needle in [
        "remember the keyword from the shell",
        "echo PINEAPPLE-42",
        "The keyword is PINEAPPLE-42.",
        "\"tool_result\"",
        "what was the keyword?",
    ] {
        assert!(
            body.contains(needle),
            "resumed request lacks {needle:?}: {body}"
        );
    }
    let session = store.get_session(&id).await.unwrap().unwrap();
    assert_eq!(session.turns, 2);
    assert_eq!(session.last_seq, second.events.last().unwrap().seq);
    assert!(store.running_turns().await.unwrap().is_empty());
}

/// `agentd ARGS` with the store at `url` (`None`: SQLite in the data dir):
/// `(exit code, stdout, stderr)`.
async fn cli_on(h: &Harness, url: Option<&str>, args: &[&str]) -> (i32, String, String) {
    let mut cmd = h.command(args);
    if let Some(url) = url {
        cmd.env("AGENTD_DATABASE_URL", url);
    }
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn sessions_move_sqlite_to_postgres_and_back_with_export_import() {
    let url = fresh_database_url().await;
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [
            {"when": {"last_user_contains": "remember"}, "content": [
                {"type": "tool_use", "name": "Bash", "input": {"command": "echo PINEAPPLE-42"}}
            ]},
            {"when": {"last_tool_result_contains": "PINEAPPLE-42"}, "content": [
                {"type": "text", "text": "The keyword is PINEAPPLE-42."}
            ]},
            {"when": {"last_user_contains": "what was"}, "content": [
                {"type": "text", "text": "It was PINEAPPLE-42."}
            ]}
        ]}),
    )
    .await;
    // A tool-using turn on SQLite (the default store).
    let first = h.run("remember the keyword from the shell", &[]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let id = first.session_id();

    let (code, exported, stderr) = cli_on(&h, None, &["sessions", "export", &id]).await;
    assert_eq!(code, 0, "{stderr}");
    let file = h.data_dir.path().join("s.json");
    std::fs::write(&file, &exported).unwrap();

    // Into PostgreSQL: the same session, byte for byte.
    let file_arg = file.to_str().unwrap();
    let (code, stdout, stderr) = cli_on(&h, Some(&url), &["sessions", "import", file_arg]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), id);
    let (code, again, stderr) = cli_on(&h, Some(&url), &["sessions", "export", &id]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(again, exported);
    // Importing it twice is an error.
    let (code, _, stderr) = cli_on(&h, Some(&url), &["sessions", "import", file_arg]).await;
    assert_ne!(code, 0);
    assert!(stderr.contains("already exists"), "{stderr}");

    // It resumes on PostgreSQL with the whole conversation.
    let second = run_on(&h, &url, "what was the keyword?", &["--resume", &id]).await;
    assert_eq!(second.code, 0, "{}", second.stderr);
    second.assert_gapless_from(first.events.last().unwrap().seq + 1);
    assert_eq!(
        second.finished().result.as_deref(),
        Some("It was PINEAPPLE-42.")
    );
    let body = h.model_requests().last().unwrap().body.to_string();
    for needle in ["echo PINEAPPLE-42", "The keyword is PINEAPPLE-42."] {
        assert!(body.contains(needle), "resumed request lacks {needle:?}");
    }

    // And back to a new SQLite database, through stdin.
    let (code, from_postgres, stderr) = cli_on(&h, Some(&url), &["sessions", "export", &id]).await;
    assert_eq!(code, 0, "{stderr}");
    let back = format!("sqlite://{}", h.data_dir.path().join("back.db").display());
    let mut cmd = h.command(&["sessions", "import", "-"]);
    cmd.env("AGENTD_DATABASE_URL", &back)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(from_postgres.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, from_back, stderr) = cli_on(&h, Some(&back), &["sessions", "export", &id]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(from_back, from_postgres);
    let export: agentd_store::SessionExport = serde_json::from_str(&from_back).unwrap();
    assert_eq!(export.session.turns, 2);
    assert_eq!(export.turns.len(), 2);
}
