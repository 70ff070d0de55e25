//! How `agentd run` sets an agent up: skills (global and per user), system
//! prompt templates and flags, and WebFetch's reach from the profile's rules.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::run_harness;

use std::path::Path;

use agentd_protocol::{Event, TurnStatus};
use run_harness::{Harness, Wire};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn skill(root: &Path, name: &str, description: &str, body: &str) {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n"),
    )
    .unwrap();
}

fn system_of(request: &agentd_testkit::RecordedRequest) -> String {
    match &request.body["system"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        other => other.to_string(),
    }
}

fn result_of(run: &run_harness::Run, call: &str) -> (String, bool) {
    run.events
        .iter()
        .find_map(|e| match &e.event {
            Event::ToolFinished {
                call_id,
                output,
                is_error,
                ..
            } if call_id == call => Some((output.clone(), *is_error)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for {call}"))
}

fn tool_result(run: &run_harness::Run, name: &str) -> (String, bool) {
    let call = run
        .events
        .iter()
        .find_map(|e| match &e.event {
            Event::ToolStarted {
                call_id, name: n, ..
            } if n == name => Some(call_id.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {name} call"));
    run.events
        .iter()
        .find_map(|e| match &e.event {
            Event::ToolFinished {
                call_id,
                output,
                is_error,
                ..
            } if *call_id == call => Some((output.clone(), *is_error)),
            _ => None,
        })
        .unwrap()
}

#[tokio::test]
async fn skills_are_listed_and_a_users_own_skill_wins() {
    let skills = tempfile::TempDir::new().unwrap();
    let root = skills.path().canonicalize().unwrap();
    let reference = root.join("users/local/deploy/reference.md");
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [
            {"when": {"last_user_contains": "deploy"}, "content": [
                {"type": "tool_use", "name": "Skill", "input": {"skill": "deploy"}}]},
            {"when": {"last_tool_name": "Skill"}, "content": [
                {"type": "tool_use", "id": "ref", "name": "Skill", "input": {"skill": "deploy", "file": "reference.md"}},
                {"type": "tool_use", "id": "escape", "name": "Skill", "input": {"skill": "deploy", "file": "../../../global/lint/SKILL.md"}},
                {"type": "tool_use", "name": "Bash",
                 "input": {"command": format!("cat {}", reference.display())}}]},
            {"when": {"last_tool_name": "Bash"}, "content": [
                {"type": "tool_use", "name": "Write", "input": {"file_path": reference, "content": "pwned"}}]},
            {"content": [{"type": "text", "text": "followed the skill"}]}
        ]}),
    )
    .await
    .with_config(&format!(
        "[skills]\ndir = \"{}/global\"\nuser_dir = \"{}/users/{{user}}\"\n",
        root.display(),
        root.display()
    ));
    skill(
        &root.join("global"),
        "deploy",
        "Global deploy steps",
        "GLOBAL-STEPS",
    );
    skill(&root.join("global"), "lint", "How to lint", "LINT-STEPS");
    skill(
        &root.join("users/local"),
        "deploy",
        "My own deploy steps",
        "USER-STEPS",
    );
    std::fs::write(&reference, "REFERENCE-TEXT").unwrap();
    let run = h.run("deploy the app", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);

    let system = system_of(&h.model_requests()[0]);
    assert!(system.contains("deploy: My own deploy steps"), "{system}");
    assert!(system.contains("lint: How to lint"), "{system}");
    assert!(!system.contains("Global deploy steps"), "{system}");
    let (output, is_error) = tool_result(&run, "Skill");
    assert!(!is_error, "{output}");
    assert!(
        output.contains("USER-STEPS") && !output.contains("GLOBAL-STEPS"),
        "{output}"
    );
    assert!(
        output.contains("reference.md"),
        "supporting files are listed: {output}"
    );
    assert!(
        !output.contains("description:"),
        "front matter is not part of the instructions"
    );
    // Supporting files are readable by the file tools and in the sandbox, never writable.
    let (read, is_error) = result_of(&run, "ref");
    assert!(!is_error && read.contains("REFERENCE-TEXT"), "{read}");
    let (cat, is_error) = tool_result(&run, "Bash");
    assert!(!is_error && cat.contains("REFERENCE-TEXT"), "{cat}");
    let (write, is_error) = tool_result(&run, "Write");
    assert!(is_error && write.contains("outside"), "{write}");
    let (escape, is_error) = result_of(&run, "escape");
    assert!(
        is_error && escape.contains("outside the skill's folder"),
        "{escape}"
    );
    assert_eq!(
        std::fs::read_to_string(&reference).unwrap(),
        "REFERENCE-TEXT"
    );
}

#[tokio::test]
async fn system_prompt_flags_and_profile_templates() {
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "ok"}]}]}),
    )
    .await
    .with_config(
        "[profiles.default]\nappend_system_prompt = \"PROFILE-ADDITION for {{workspace}}\"\n\
         [profiles.custom]\nsystem_prompt = \"Terse agent. Mode: {{permissions}}\"\n",
    );
    let ws = h.ws().canonicalize().unwrap().display().to_string();

    let run = h.run("hi", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let default = system_of(&h.model_requests()[0]);
    assert!(
        default.contains(&ws) && default.contains("sandbox"),
        "{default}"
    );
    assert!(
        default.ends_with(&format!("PROFILE-ADDITION for {ws}")),
        "{default}"
    );

    let run = h
        .run(
            "hi",
            &[
                "--system-prompt",
                "Only {{workspace}}",
                "--append-system-prompt",
                "FLAG",
            ],
        )
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let flagged = system_of(&h.model_requests()[1]);
    assert_eq!(
        flagged,
        format!("Only {ws}\n\nPROFILE-ADDITION for {ws}\n\nFLAG")
    );

    let run = h.run("hi", &["--profile", "custom"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let custom = system_of(&h.model_requests()[2]);
    assert!(custom.starts_with("Terse agent. Mode: "), "{custom}");
    assert!(
        custom.contains("bypass"),
        "the mode in force is described: {custom}"
    );

    let run = h.run("hi", &["--system-prompt", "Hello {{nope}}"]).await;
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("nope"), "{}", run.stderr);
    assert_eq!(h.model_requests().len(), 3, "a bad template calls no model");

    // A bad template in the config is a startup error naming the profile.
    let h = h.with_config("[profiles.broken]\nsystem_prompt = \"Hello {{nope}}\"\n");
    let run = h.run("hi", &[]).await;
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("broken") && run.stderr.contains("nope"),
        "{}",
        run.stderr
    );
}

/// A one-page web server on loopback; returns its port.
async fn web_server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = socket.read(&mut buf).await;
                let body = "<html><body><h1>Release notes</h1><p>PAGE-BODY</p></body></html>";
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    port
}

#[tokio::test]
async fn web_fetch_reaches_loopback_only_when_a_rule_names_it() {
    let port = web_server().await;
    let script = |url: String| {
        json!({"replies": [
            {"when": {"last_user_contains": "fetch"}, "content": [
                {"type": "tool_use", "name": "WebFetch", "input": {"url": url, "prompt": "summarize"}}]},
            {"content": [{"type": "text", "text": "done"}]}
        ]})
    };
    let allowed = format!("http://127.0.0.1:{port}/notes");
    let h = Harness::new(Wire::Anthropic, script(allowed.clone()))
        .await
        .with_config("[profiles.default]\nallow = [\"WebFetch(domain:127.0.0.1)\"]\n");
    let run = h.run_as_is("fetch it", &[]).await;
    assert_eq!(
        run.finished().status,
        TurnStatus::Completed,
        "{}",
        run.stderr
    );
    let (output, is_error) = tool_result(&run, "WebFetch");
    assert!(!is_error, "{output}");
    assert!(
        output.contains("PAGE-BODY") && output.contains("Release notes"),
        "{output}"
    );
    assert!(
        !output.contains("<h1>"),
        "HTML is turned into text: {output}"
    );

    // `localhost` resolves to 127.0.0.1, but no rule names it: refused even in bypass mode.
    let h = Harness::new(
        Wire::Anthropic,
        script(format!("http://localhost:{port}/notes")),
    )
    .await
    .with_config("[profiles.default]\nallow = [\"WebFetch(domain:127.0.0.1)\"]\n");
    let run = h.run("fetch it", &[]).await;
    let (output, is_error) = tool_result(&run, "WebFetch");
    assert!(is_error, "{output}");
    assert!(!output.contains("PAGE-BODY"));

    // Without an allow rule, default mode asks; with nobody at the terminal, denied.
    let h = Harness::new(Wire::Anthropic, script(allowed)).await;
    let run = h.run_as_is("fetch it", &[]).await;
    let (output, is_error) = tool_result(&run, "WebFetch");
    assert!(is_error && output.contains("denied"), "{output}");
    assert!(run.events.iter().any(
        |e| matches!(&e.event, Event::PermissionRequested { tool, .. } if tool == "WebFetch")
    ));
}
