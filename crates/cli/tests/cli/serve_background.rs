//! Background commands over the real HTTP API: `Bash` with
//! `run_in_background`, `BashOutput`, `KillShell`, the session's listing,
//! and their end with the session and with the server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_testkit::processes::{assert_none_left, processes_mentioning};

use crate::serve_harness;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentd_model::scripted::Script;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use serve_harness::{Harness, Server, SseEvent, WAIT};

/// Tool call ids, unique over the whole test binary.
fn call_id(kind: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{kind}_{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

fn marker(name: &str) -> String {
    format!("{name}-{}-{}", std::process::id(), call_id("m"))
}

fn ticking_loop(marker: &str) -> String {
    format!("i=0; while true; do i=$((i+1)); echo \"tick $i {marker}\"; sleep 0.1; done")
}

/// A turn that makes one tool call, then says `done`.
fn one_call(h: &Harness, tool: &str, input: Value) -> String {
    let id = call_id("call");
    let script = json!({"replies": [
        {"when": {"last_user_contains": "go"}, "content": [
            {"type": "tool_use", "id": id, "name": tool, "input": input}]},
        {"when": {"last_tool_name": tool}, "content": [{"type": "text", "text": "done"}]}
    ]});
    h.model
        .set_script(serde_json::from_value::<Script>(script).unwrap());
    id
}

/// Runs a turn with one call of `tool`; that call's `tool.finished`.
pub(crate) async fn call(
    h: &Harness,
    server: &Server,
    session: &str,
    tool: &str,
    input: Value,
) -> Value {
    let id = one_call(h, tool, input);
    server.message(session, "go").await;
    server.wait_idle(session).await;
    let events = server.all_events(session).await;
    let finished = events
        .iter()
        .find(|e: &&SseEvent| e.event == "tool.finished" && e.data["call_id"] == id.as_str());
    finished.expect("no tool.finished").data.clone()
}

pub(crate) async fn start(h: &Harness, server: &Server, session: &str, command: &str) -> String {
    let input = json!({"command": command, "run_in_background": true});
    let finished = call(h, server, session, "Bash", input).await;
    assert_eq!(finished["is_error"], false, "{finished}");
    let output = finished["output"].as_str().unwrap();
    let id = output
        .strip_prefix("Command running in background with ID: ")
        .unwrap_or_else(|| panic!("{output}"));
    id.to_string()
}

fn ticks(output: &str) -> Vec<u64> {
    output
        .lines()
        .filter_map(|line| line.strip_prefix("tick ")?.split(' ').next()?.parse().ok())
        .collect()
}

/// `BashOutput` turns until one returns ticks; those ticks.
async fn read_ticks(h: &Harness, server: &Server, session: &str, id: &str) -> Vec<u64> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let finished = call(h, server, session, "BashOutput", json!({"bash_id": id})).await;
        let output = finished["output"].as_str().unwrap();
        assert!(output.starts_with("<status>running</status>"), "{output}");
        let ticks = ticks(output);
        if !ticks.is_empty() {
            return ticks;
        }
        assert!(tokio::time::Instant::now() < deadline, "no output in time");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_background_command_is_listed_read_and_killed_over_http() {
    let h = Harness::open(json!({"replies": []})).await;
    let server = h.start().await;
    let session = server.session().await;
    let marker = marker("serve-bg-tick");
    let id = start(&h, &server, &session, &ticking_loop(&marker)).await;

    let (_, info) = server.get(&format!("/v1/sessions/{session}")).await;
    let listed = info["background"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{info}");
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["status"], "running");
    assert!(listed[0]["command"].as_str().unwrap().contains(&marker));
    assert!(listed[0]["started_at"].is_string());
    assert!(processes_mentioning(&marker) > 0);

    let first = read_ticks(&h, &server, &session, &id).await;
    let second = read_ticks(&h, &server, &session, &id).await;
    assert!(second[0] > *first.last().unwrap(), "{first:?} {second:?}");

    let killed = call(&h, &server, &session, "KillShell", json!({"shell_id": id})).await;
    assert_eq!(killed["is_error"], false, "{killed}");
    assert!(
        killed["output"]
            .as_str()
            .unwrap()
            .starts_with(&format!("Successfully killed shell: {id}")),
        "{killed}"
    );
    assert_none_left(&marker).await;
    let (_, info) = server.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(info["background"], json!([]), "{info}");

    let unknown = json!({"bash_id": "bash_999999"});
    let gone = call(&h, &server, &session, "BashOutput", unknown).await;
    assert_eq!(gone["is_error"], true);
    assert!(
        gone["output"].as_str().unwrap().contains("is gone"),
        "{gone}"
    );
}

#[tokio::test]
async fn deleting_the_session_kills_its_background_commands() {
    let h = Harness::open(json!({"replies": []})).await;
    let server = h.start().await;
    let session = server.session().await;
    let marker = marker("serve-bg-delete");
    start(&h, &server, &session, &ticking_loop(&marker)).await;
    assert!(processes_mentioning(&marker) > 0);
    let (status, body) = server
        .send(server.request(Method::DELETE, &format!("/v1/sessions/{session}")))
        .await;
    assert!(status.is_success(), "{status} {body}");
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn a_restart_ends_background_commands_and_says_so() {
    let h = Harness::open(json!({"replies": []})).await;
    let server = h.start().await;
    let session = server.session().await;
    let marker = marker("serve-bg-restart");
    let id = start(&h, &server, &session, &ticking_loop(&marker)).await;
    assert!(processes_mentioning(&marker) > 0);
    // Killed without a chance to clean up: the sandbox dies with its parent.
    server.kill9().await;
    assert_none_left(&marker).await;

    let server = h.start().await;
    let (status, info) = server.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(info["background"], json!([]), "{info}");
    let gone = call(&h, &server, &session, "BashOutput", json!({"bash_id": id})).await;
    assert_eq!(gone["is_error"], true);
    let output = gone["output"].as_str().unwrap();
    assert!(output.contains(&format!("Shell {id} is gone")), "{output}");
    assert!(output.contains("agentd restarted"), "{output}");
    // A new command gets an id the old one never had.
    let new_id = start(&h, &server, &session, "sleep 1").await;
    assert_ne!(new_id, id);
}

#[tokio::test]
async fn a_background_command_runs_under_the_profile_s_sandbox() {
    let h = Harness::open(json!({"replies": []})).await;
    let server = h.start().await;
    let session = server.session().await;
    let probe = "id -u; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; \
                 touch /etc/agentd-bg-probe 2>/dev/null && echo wrote-etc";
    let id = start(&h, &server, &session, probe).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    // Each read returns what is new: a read while it runs may take some.
    let mut stdout = String::new();
    let output = loop {
        let read = call(&h, &server, &session, "BashOutput", json!({"bash_id": id})).await;
        let output = read["output"].as_str().unwrap().to_string();
        if let Some(section) = output.split("<stdout>\n").nth(1) {
            for line in section.lines().take_while(|l| *l != "</stdout>") {
                stdout.push_str(line);
                stdout.push('\n');
            }
        }
        if !output.starts_with("<status>running</status>") {
            break output;
        }
        assert!(tokio::time::Instant::now() < deadline, "{output}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(output.starts_with("<status>failed</status>"), "{output}");
    let lines: Vec<&str> = stdout.lines().collect();
    // No network: loopback only; never root when the server is.
    assert_eq!(lines[1..], ["lo"], "{output}");
    let uid: u32 = lines[0].parse().unwrap();
    if rustix::process::geteuid().is_root() {
        assert_ne!(uid, 0, "{output}");
    }
    assert!(!std::path::Path::new("/etc/agentd-bg-probe").exists());
}
