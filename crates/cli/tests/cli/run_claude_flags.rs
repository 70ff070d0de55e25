//! `agentd run` with Claude Code's spellings: `-p`, `--permission-mode
//! acceptEdits`/`dontAsk`, `--allowedTools`, `--disallowedTools`,
//! `--continue`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_protocol::Event;
use serde_json::json;

use crate::run_harness::{self, Harness, Wire};

/// On "go": a git command, then a file written; then a short answer.
fn script() -> serde_json::Value {
    json!({"replies": [
        {"when": {"last_user_contains": "go"}, "content": [
            {"type": "tool_use", "name": "Bash",
             "input": {"command": "git init -q . && git status --short"}}]},
        {"when": {"last_tool_name": "Bash"}, "content": [
            {"type": "tool_use", "name": "Write",
             "input": {"file_path": "notes.md", "content": "written\n"}}]},
        {"repeat": true, "content": [{"type": "text", "text": "all done"}]}
    ]})
}

fn denials(run: &run_harness::Run) -> Vec<String> {
    run.events
        .iter()
        .filter_map(|e| match &e.event {
            Event::PermissionResolved { decision, by, .. } if decision == "deny" => {
                Some(format!("{by:?}"))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn accept_edits_and_allowed_tools_run_as_in_claude_code() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    let run = h
        .run_as_is(
            "go",
            &[
                "-p",
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                "Bash(git *) Read",
            ],
        )
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        h.ws().join(".git").is_dir(),
        "the allowed git command ran unasked"
    );
    assert_eq!(
        std::fs::read_to_string(h.ws().join("notes.md")).unwrap(),
        "written\n",
        "acceptEdits lets Write through"
    );
    assert!(denials(&run).is_empty(), "{:?}", denials(&run));
    assert!(!run.types().contains(&"permission.requested"));
}

#[tokio::test]
async fn disallowed_tools_and_dont_ask_deny_without_asking() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    let run = h
        .run_as_is(
            "go",
            &[
                "--permission-mode",
                "bypassPermissions",
                "--disallowedTools",
                "Write,Bash(rm *)",
            ],
        )
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(h.ws().join(".git").is_dir(), "bypass runs the rest");
    assert!(
        !h.ws().join("notes.md").exists(),
        "--disallowedTools Write wins over bypass"
    );

    // dontAsk: what no rule allows is denied at once, never asked.
    let h = Harness::new(Wire::Anthropic, script()).await;
    let run = h
        .run_as_is(
            "go",
            &["--permission-mode", "dontAsk", "--allowedTools", "Write"],
        )
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!h.ws().join(".git").exists(), "Bash was not allowed");
    assert!(h.ws().join("notes.md").is_file(), "the allowed Write ran");
    assert!(
        !run.types().contains(&"permission.requested"),
        "nothing asked"
    );
    let requests = h.model_requests();
    let last = run_harness::request_text(requests.last().unwrap());
    assert!(last.contains("dontAsk"), "the model is told why: {last}");
}

#[tokio::test]
async fn continue_resumes_this_directorys_latest_session() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    let first = h.run("remember the word kestrel", &[]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let again = h.run("what was the word?", &["--continue"]).await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.session_id(), first.session_id());
    let requests = h.model_requests();
    let last = run_harness::request_text(requests.last().unwrap());
    assert!(last.contains("kestrel"), "the history came along: {last}");

    let elsewhere = tempfile::tempdir().unwrap();
    let out = h
        .command(&[
            "run",
            "-c",
            "--cwd",
            &elsewhere.path().display().to_string(),
            "hi",
        ])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "--continue takes this directory's session only"
    );
}

/// The tool names the model was offered in the last request.
fn offered(h: &Harness) -> Vec<String> {
    let requests = h.model_requests();
    let body = &requests.last().unwrap().body;
    let mut names: Vec<String> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_tool_no_call_of_which_could_run_is_not_offered() {
    let answer =
        json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "ok"}]}]});
    let h = Harness::new(Wire::Anthropic, answer.clone()).await;
    let run = h.run_as_is("hi", &["--profile", "read_only"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let names = offered(&h);
    for mutating in [
        "Bash",
        "BashOutput",
        "KillShell",
        "Write",
        "Edit",
        "MultiEdit",
    ] {
        assert!(
            !names.iter().any(|n| n == mutating),
            "{mutating} offered: {names:?}"
        );
    }
    assert!(names.iter().any(|n| n == "Read"), "{names:?}");

    let h = Harness::new(Wire::Anthropic, answer).await.with_config(
        "[profiles.default]\nmode = \"bypass\"\n\
             tools = [\"Read\", \"Grep\", \"Bash\", \"WebFetch\"]\n\
             disallowed_tools = [\"Grep\"]\ndeny = [\"WebFetch\", \"Read(.env)\"]\n",
    );
    let run = h.run_as_is("hi", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let names = offered(&h);
    assert_eq!(
        names,
        ["AskUserQuestion", "Bash", "Read", "TodoWrite"],
        "the profile's list (no Task, no background companions unless listed), less the \
         disallowed and the wholly denied"
    );
}
