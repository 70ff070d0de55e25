//! `env`, `env_from_host` and `ssh_agent` over the real HTTP API: a secret
//! is usable by a command and masked everywhere the model, the event log,
//! the transcript, the database and the server's log could show it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use agentd_testkit::ssh_agent::HostAgent;

use crate::serve_harness::{Harness, Server};

const SECRET: &str = "tok-9f8e7d6c5b4a3210";
const HOST_SECRET: &str = "host-5e5e5e-secret";

fn bash(id: &str, command: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": command}})
}

/// The reply to `prompt` runs `command`; the next one ends the turn.
fn one_command(prompt: &str, id: &str, command: &str) -> Value {
    json!({"replies": [
        {"when": {"last_user_contains": prompt}, "content": [bash(id, command)]},
        {"when": {"last_tool_name": "Bash"}, "content": [{"type": "text", "text": "done"}]}
    ]})
}

fn sha256(text: &str) -> String {
    let out = Command::new("bash")
        .args(["-c", "printf %s \"$1\" | sha256sum", "-", text])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

/// Runs one turn and returns the session, its events and its transcript as text.
async fn turn(server: &Server, prompt: &str) -> (String, String, String) {
    let session = server.session().await;
    server.message(&session, prompt).await;
    server.wait_idle(&session).await;
    let events = server.all_events(&session).await;
    let finished = events.last().unwrap();
    assert_eq!(finished.event, "turn.finished");
    assert_eq!(finished.data["status"], "completed", "{:?}", finished.data);
    let events: Vec<Value> = events
        .iter()
        .map(|e| json!({"event": e.event, "data": e.data}))
        .collect();
    let (_, messages) = server
        .get(&format!("/v1/sessions/{session}/messages"))
        .await;
    (
        session,
        serde_json::to_string(&events).unwrap(),
        messages.to_string(),
    )
}

/// Every file under `dir` but the config (which holds the secret), as bytes.
fn files_under(dir: &Path, config: &Path, found: &mut Vec<(PathBuf, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            files_under(&path, config, found);
        } else if kind.is_file() && path != config {
            found.push((path.clone(), std::fs::read(&path).unwrap_or_default()));
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[tokio::test]
async fn a_secret_is_usable_and_masked_in_events_messages_and_logs() {
    // The command never spells the value out: it would be in the model's call.
    let command = "test \"$API_TOKEN\" = \"tok-$(printf 9f8e7d6c5b4a3210)\" && echo token-ok; \
        printf %s \"$API_TOKEN\" | sha256sum; echo \"token=$API_TOKEN\"; \
        echo \"err $API_TOKEN\" >&2; echo \"host=$HOST_TOKEN\"; \
        echo \"plain=$PLAIN_VAR shared=$SHARED\"; \
        for i in $(seq 300); do printf '%s%s\\n' \"$i\" \"$API_TOKEN\"; done";
    let toml = format!(
        "[server]\nauth = \"none\"\n\
         [profiles.default]\nmode = \"bypass\"\n\
         env = {{ PLAIN_VAR = \"plain-visible\", SHARED = \"from-profile\", \
         API_TOKEN = {{ value = \"{SECRET}\", secret = true }} }}\n\
         env_from_host = [\"HOST_TOKEN\"]\n\
         [users.local]\nenv = {{ SHARED = \"from-user\" }}\n"
    );
    let h = Harness::new(one_command("use the token", "env_call_1", command), &toml).await;
    let server = h
        .start_with_env(&[("HOST_TOKEN", HOST_SECRET), ("AGENTD_LOG", "debug")])
        .await;
    let (_, events, messages) = turn(&server, "use the token").await;

    for secret in [SECRET, HOST_SECRET] {
        assert!(!events.contains(secret), "in the events: {events}");
        assert!(!messages.contains(secret), "in the messages: {messages}");
    }
    for seen in [&events, &messages] {
        assert!(
            seen.contains("token-ok"),
            "the command saw the value: {seen}"
        );
        assert!(seen.contains(&sha256(SECRET)), "{seen}");
        assert!(seen.contains("token=[secret API_TOKEN]"), "{seen}");
        assert!(seen.contains("err [secret API_TOKEN]"), "{seen}");
        assert!(seen.contains("300[secret API_TOKEN]"), "{seen}");
        assert!(seen.contains("host=[secret HOST_TOKEN]"), "{seen}");
        assert!(
            seen.contains("plain=plain-visible shared=from-user"),
            "{seen}"
        );
    }
    // The live output was masked too, not only the result.
    assert!(events.contains("\"tool.output\""), "{events}");
    // What the model was sent.
    let sent: String = h
        .model_requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert!(sent.contains("token=[secret API_TOKEN]"), "{sent}");
    assert!(!sent.contains(SECRET) && !sent.contains(HOST_SECRET));

    let log = server.log();
    assert!(log.contains("DEBUG") || log.contains("INFO"), "{log}");
    let mut files = Vec::new();
    files_under(h.data(), &h.config, &mut files);
    assert!(files.len() > 2, "{files:?}");
    for (path, bytes) in &files {
        for secret in [SECRET, HOST_SECRET] {
            assert!(
                !contains(bytes, secret),
                "{} holds a secret",
                path.display()
            );
        }
    }
}

#[tokio::test]
async fn ssh_agent_reaches_the_hosts_agent_through_its_socket_only() {
    // A root server runs the agent as the user's uid; the agent must be theirs.
    let root = rustix::process::geteuid().is_root();
    let uid = root.then_some(5150);
    let user = match uid {
        Some(uid) => format!("[users.local]\nuid = {uid}\n"),
        None => String::new(),
    };
    let toml = format!(
        "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\nssh_agent = true\n{user}"
    );
    let command = "echo \"sock=$SSH_AUTH_SOCK\"; ssh-add -l; echo \"exit=$?\"";
    let h = Harness::new(one_command("list keys", "ssh_call_1", command), &toml).await;
    let agent = HostAgent::start(uid);
    let socket = agent.socket.to_str().unwrap();
    let server = h.start_with_env(&[("SSH_AUTH_SOCK", socket)]).await;
    let (_, _, messages) = turn(&server, "list keys").await;
    assert!(
        messages.contains("sock=/run/agentd/ssh-agent.sock"),
        "{messages}"
    );
    assert!(
        messages.contains("The agent has no identities."),
        "{messages}"
    );
    assert!(messages.contains("exit=1"), "{messages}");
    assert!(!messages.contains("Could not open"), "{messages}");
}

#[tokio::test]
async fn a_stdio_mcp_server_gets_the_variables_and_its_answer_is_masked() {
    let tools = crate::serve_mcp::tools_dir();
    let entry = tools.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let script = json!({"replies": [
        {"when": {"last_user_contains": "print the env"}, "content": [
            {"type": "tool_use", "id": "mcp_env_call_1", "name": "mcp__everything__get-env", "input": {}}]},
        {"when": {"last_tool_name": "mcp__everything__get-env"}, "content": [
            {"type": "text", "text": "done"}]}
    ]});
    let toml = format!(
        "[server]\nauth = \"none\"\n\
         [profiles.default]\nallow = [\"mcp__everything__*\"]\n\
         env = {{ PLAIN_VAR = \"plain-visible\", API_TOKEN = {{ value = \"{SECRET}\", secret = true }} }}\n\
         [[mcp_servers]]\nname = \"everything\"\ncommand = \"node\"\n\
         args = [\"{entry}\"]\nread_only_paths = [\"{tools}\"]\nstartup_timeout_s = 60\n",
        entry = entry.display(),
        tools = tools.display()
    );
    let h = Harness::new(script, &toml).await;
    let server = h.start().await;
    let (_, events, messages) = turn(&server, "print the env").await;
    assert!(!events.contains(SECRET), "{events}");
    assert!(!messages.contains(SECRET), "{messages}");
    // JSON inside JSON: the quotes are escaped once more.
    for seen in [&events, &messages] {
        assert!(seen.contains("plain-visible"), "{seen}");
        assert!(seen.contains("[secret API_TOKEN]"), "{seen}");
    }
}
