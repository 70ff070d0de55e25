//! Command tools (`[[commands]]`) end to end: injection attempts refused
//! before anything runs, by the model's tool call and by the HTTP route; a
//! valid call runs exactly the configured argv in the session's sandbox;
//! `confirm = true` asks even in bypass mode; a run by the user is in the
//! transcript, the model's next context and the audit log; only a command
//! configured so runs on the host, and then as its unprivileged uid.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::serve_harness::{Harness, Server};

/// Records its arguments NUL-separated (to `$RECORD_TO`, else
/// `$HOME/argv.bin`: the workspace in a sandbox) and its uid beside them.
pub(crate) const RECORDER: &str = "#!/bin/sh\n\
out=\"${RECORD_TO:-$HOME/argv.bin}\"\n\
printf '%s\\0' \"$@\" > \"$out\"\n\
id -u > \"$out.uid\"\n\
echo \"recorded $# arguments\"\n";

/// A VM verb with an enum, an integer range and a pattern. The pattern is
/// permissive on purpose (anything but `=`): the injection attempts below
/// are refused by agentd's own checks, not by the operator's regex.
pub(crate) const VM_COMMAND: &str = r#"
[[commands]]
name = "vm"
description = "Operate a VM"
argv = ["./record.sh", "qm", "{action}", "{vm}", "{name}"]
mutating = false
parameters = { action = { type = "string", enum = ["status", "reset"] }, vm = { type = "integer", minimum = 100, maximum = 999 }, name = { type = "string", pattern = "[^=]+", maxLength = 16, description = "The VM's name" } }
"#;

/// Every one refused before anything runs.
fn injection_attempts() -> Vec<Value> {
    let with_name = |name: &str| json!({"action": "status", "vm": 102, "name": name});
    vec![
        with_name("web;reboot"),
        with_name("$(reboot)"),
        with_name("`reboot`"),
        with_name("web\nreboot"),
        // Without `=`, which the pattern refuses: agentd's own check does.
        with_name("-oProxyCommand"),
        with_name("--"),
        with_name("web 1"),
        with_name("ｗeb"), // fullwidth w
        with_name("wеb"),  // Cyrillic е
        with_name(&"a".repeat(17)),
        json!({"action": "status; reboot", "vm": 102, "name": "web"}),
        json!({"action": "status", "vm": "102; reboot", "name": "web"}),
        json!({"action": "status", "vm": 1000, "name": "web"}),
        json!({"action": "status", "vm": 102}),
        json!({"action": "status", "vm": 102, "name": "web", "then": "reboot"}),
    ]
}

/// The session's workspace, with the recorder in it.
pub(crate) fn install_recorder(h: &Harness, session: &str) -> PathBuf {
    let workspace = h.data().join("workspaces").join(session);
    let script = workspace.join("record.sh");
    std::fs::write(&script, RECORDER).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    workspace
}

/// The arguments the recorder got, or `None` when it never ran.
pub(crate) fn recorded(file: &Path) -> Option<Vec<String>> {
    let bytes = std::fs::read(file).ok()?;
    let text = String::from_utf8(bytes).unwrap();
    Some(
        text.strip_suffix('\0')
            .unwrap_or(&text)
            .split('\0')
            .map(str::to_string)
            .collect(),
    )
}

fn tool_uses(arguments: &[Value]) -> Vec<Value> {
    arguments
        .iter()
        .enumerate()
        .map(|(n, input)| json!({"type": "tool_use", "id": format!("toolu_inject_{n}"), "name": "vm", "input": input}))
        .collect()
}

async fn run(server: &Server, session: &str, name: &str, body: Value) -> (StatusCode, Value) {
    server
        .post(&format!("/v1/sessions/{session}/commands/{name}"), body)
        .await
}

#[tokio::test]
async fn injections_are_refused_before_anything_runs_and_a_valid_call_runs_exactly_the_argv() {
    let attempts = injection_attempts();
    let script = json!({"replies": [
        {"when": {"last_user_contains": "inject"}, "content": tool_uses(&attempts)},
        {"when": {"last_user_contains": "check web-1"}, "content": [
            {"type": "tool_use", "id": "toolu_valid", "name": "vm",
             "input": {"action": "status", "vm": 102, "name": "web-1"}}
        ]},
        {"repeat": true, "content": [{"type": "text", "text": "done"}]}
    ]});
    let toml =
        format!("[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n{VM_COMMAND}");
    let h = Harness::new(script, &toml).await;
    let server = h.start().await;
    let session = server.session().await;
    let workspace = install_recorder(&h, &session);
    let record = workspace.join("argv.bin");

    // The model is offered the command with its schema.
    server.message(&session, "inject").await;
    server.wait_idle(&session).await;
    let first = &h.model_requests()[0].body;
    let tool = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "vm")
        .unwrap();
    assert_eq!(
        tool["input_schema"]["properties"]["action"]["enum"],
        json!(["status", "reset"])
    );
    assert_eq!(tool["input_schema"]["additionalProperties"], false);

    // By the model: every attempt a tool error, nothing ran.
    let events = server.all_events(&session).await;
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e.event == "tool.finished")
        .map(|e| &e.data)
        .collect();
    assert_eq!(finished.len(), attempts.len());
    for result in &finished {
        assert_eq!(result["is_error"], true, "{result}");
        assert!(
            result["output"]
                .as_str()
                .unwrap()
                .contains("Refused, nothing ran"),
            "{result}"
        );
    }
    assert!(recorded(&record).is_none(), "the recorder ran");

    // By the HTTP route: the same refusals, with the reason.
    for attempt in &attempts {
        let (status, body) = run(&server, &session, "vm", json!({"arguments": attempt})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{attempt}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("nothing ran"), "{body}");
        if attempt["name"] == "-oProxyCommand" {
            assert!(message.contains("could be read as an option"), "{body}");
        }
    }
    let (status, _) = run(&server, &session, "nope", json!({"arguments": {}})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(recorded(&record).is_none(), "the recorder ran");

    // A valid call by the model runs exactly the argv, as the agent's uid.
    server.message(&session, "check web-1").await;
    server.wait_idle(&session).await;
    assert_eq!(recorded(&record).unwrap(), ["qm", "status", "102", "web-1"]);
    let uid = std::fs::read_to_string(workspace.join("argv.bin.uid")).unwrap();
    assert_ne!(uid.trim(), "0", "a sandboxed command ran as root");
    let result = h.model_requests().last().unwrap().body.to_string();
    assert!(result.contains("recorded 4 arguments"), "{result}");
    std::fs::remove_file(&record).unwrap();

    // And by the user over HTTP: the same argv, recorded.
    let body = json!({"arguments": {"action": "reset", "vm": 999, "name": "db-2"}});
    let (status, ran) = run(&server, &session, "vm", body).await;
    assert_eq!(status, StatusCode::OK, "{ran}");
    assert_eq!(ran["exit_code"], 0);
    assert_eq!(
        ran["argv"],
        json!(["./record.sh", "qm", "reset", "999", "db-2"])
    );
    assert!(
        ran["stdout"]
            .as_str()
            .unwrap()
            .contains("recorded 4 arguments")
    );
    assert_eq!(recorded(&record).unwrap(), ["qm", "reset", "999", "db-2"]);
    assert_transcribed_and_audited(&h, &server, &session).await;
}

/// The user's run is a `command.ran` event, the model reads it next turn,
/// and the audit log names the user.
pub(crate) async fn assert_transcribed_and_audited(h: &Harness, server: &Server, session: &str) {
    let events = server.all_events(session).await;
    let ran = events
        .iter()
        .find(|e| e.event == "command.ran")
        .expect("no command.ran event");
    assert_eq!(ran.data["command"], "vm");
    assert_eq!(ran.data["by"], "user:local");
    assert_eq!(ran.data["exit_code"], 0);
    // Its transcript message is under the run's id, not loose history.
    let (_, listed) = server
        .get(&format!("/v1/sessions/{session}/messages"))
        .await;
    let noted = listed["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m.to_string().contains("The user ran the command `vm`"))
        .expect("no transcript message for the run");
    assert_eq!(noted["turn_id"], ran.data["run_id"]);
    server.message(session, "what happened?").await;
    server.wait_idle(session).await;
    let context = h.model_requests().last().unwrap().body.to_string();
    assert!(
        context.contains("The user ran the command `vm`"),
        "{context}"
    );
    let (code, stdout, stderr) = h.cli(&["audit", "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let entry = stdout
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|e| e["action"] == "session.command")
        .expect("no audit entry");
    assert_eq!(entry["actor"], "local");
    assert_eq!(entry["target"], session);
    assert_eq!(entry["detail"]["command"], "vm");
}

#[tokio::test]
async fn confirm_asks_even_in_bypass_mode_and_a_denial_runs_nothing() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "reset"}, "content": [
            {"type": "tool_use", "id": "toolu_reset", "name": "reset_vm", "input": {"vm": 102}}
        ]},
        {"repeat": true, "content": [{"type": "text", "text": "ok"}]}
    ]});
    let toml = "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\nallow = [\"reset_vm\"]\n\
        [[commands]]\nname = \"reset_vm\"\ndescription = \"Reset a VM\"\nargv = [\"./record.sh\", \"reset\", \"{vm}\"]\n\
        confirm = true\nparameters = { vm = { type = \"integer\", minimum = 100, maximum = 999 } }\n";
    let h = Harness::new(script, toml).await;
    let server = h.start().await;
    let session = server.session().await;
    let record = install_recorder(&h, &session).join("argv.bin");
    let mut stream = server.events(&session, None).await;
    server.message(&session, "reset it").await;
    let requested = loop {
        let event = stream.next().await.unwrap();
        if event.event == "permission.requested" {
            break event;
        }
    };
    assert_eq!(requested.data["tool"], "reset_vm");
    assert!(
        requested.data["reason"]
            .as_str()
            .unwrap()
            .contains("confirm"),
        "{}",
        requested.data
    );
    // Whoever confirms sees the whole argv, not one argument.
    assert!(
        requested.data["reason"]
            .as_str()
            .unwrap()
            .ends_with("; it runs: ./record.sh reset 102"),
        "{}",
        requested.data
    );
    let request_id = requested.data["request_id"].as_str().unwrap();
    let path = format!("/v1/sessions/{session}/permissions/{request_id}");
    let (status, _) = server.post(&path, json!({"decision": "deny"})).await;
    assert_eq!(status, StatusCode::OK);
    let events = stream.until_finished(1).await;
    let finished = events.iter().find(|e| e.event == "tool.finished").unwrap();
    assert_eq!(finished.data["is_error"], true);
    assert!(recorded(&record).is_none(), "a denied command ran");

    // Over HTTP: refused without `confirmed`, run with it.
    let (status, body) = run(
        &server,
        &session,
        "reset_vm",
        json!({"arguments": {"vm": 102}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("confirmed"),
        "{body}"
    );
    assert!(recorded(&record).is_none());
    let (_, listed) = server
        .get(&format!("/v1/sessions/{session}/commands"))
        .await;
    assert_eq!(listed["commands"][0]["confirm"], true, "{listed}");
    let body = json!({"arguments": {"vm": 102}, "confirmed": true});
    let (status, ran) = run(&server, &session, "reset_vm", body).await;
    assert_eq!(status, StatusCode::OK, "{ran}");
    assert_eq!(recorded(&record).unwrap(), ["reset", "102"]);
}

#[tokio::test]
async fn confirm_is_not_given_by_on_no_answer_allow() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "reset"}, "content": [
            {"type": "tool_use", "id": "toolu_reset", "name": "reset_vm", "input": {"vm": 102}}
        ]},
        {"repeat": true, "content": [{"type": "text", "text": "ok"}]}
    ]});
    let toml = "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n\
        on_no_answer = \"allow\"\napproval_timeout_s = 1\n\
        [[commands]]\nname = \"reset_vm\"\ndescription = \"Reset a VM\"\nargv = [\"./record.sh\", \"reset\", \"{vm}\"]\n\
        confirm = true\nparameters = { vm = { type = \"integer\", minimum = 100, maximum = 999 } }\n";
    let h = Harness::new(script, toml).await;
    let server = h.start().await;
    let session = server.session().await;
    let record = install_recorder(&h, &session).join("argv.bin");
    server.message(&session, "reset it").await;
    server.wait_idle(&session).await;
    let events = server.all_events(&session).await;
    let resolved = events
        .iter()
        .find(|e| e.event == "permission.resolved")
        .expect("it did not ask");
    assert_eq!(resolved.data["by"], "timeout", "{}", resolved.data);
    assert_eq!(resolved.data["decision"], "deny", "{}", resolved.data);
    let finished = events.iter().find(|e| e.event == "tool.finished").unwrap();
    assert_eq!(finished.data["is_error"], true);
    assert!(
        finished.data["output"]
            .as_str()
            .unwrap()
            .contains("only when a person confirms it"),
        "{}",
        finished.data
    );
    assert!(recorded(&record).is_none(), "an unconfirmed command ran");
}

#[tokio::test]
async fn only_a_host_command_runs_on_the_host_and_as_its_unprivileged_uid() {
    // A directory only the host has, readable by the command's uid.
    let host_dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(host_dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let recorder = host_dir.path().join("record.sh");
    std::fs::write(&recorder, RECORDER).unwrap();
    std::fs::set_permissions(&recorder, std::fs::Permissions::from_mode(0o755)).unwrap();
    let marker = host_dir.path().display().to_string();
    let out = host_dir.path().join("host-argv.bin");
    let toml = format!(
        "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n\
        commands = [\"peek_sandboxed\", \"peek_host\"]\n\
        [[commands]]\nname = \"peek_sandboxed\"\ndescription = \"Look for the host dir\"\n\
        argv = [\"test\", \"-d\", \"{marker}\"]\nmutating = false\n\
        [[commands]]\nname = \"peek_host\"\ndescription = \"Record on the host\"\n\
        argv = [\"{}\", \"{{what}}\"]\nmutating = false\nruns_on = \"host\"\nhost_uid = 54321\nhost_gid = 54321\n\
        env = {{ RECORD_TO = \"{}\" }}\n\
        parameters = {{ what = {{ type = \"string\", enum = [\"status\"] }} }}\n",
        recorder.display(),
        out.display()
    );
    let h = Harness::new(json!({"replies": []}), &toml).await;
    let server = h.start().await;
    let session = server.session().await;

    let (status, sandboxed) = run(&server, &session, "peek_sandboxed", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{sandboxed}");
    assert_eq!(
        sandboxed["exit_code"], 1,
        "the sandbox saw a host-only directory"
    );

    let body = json!({"arguments": {"what": "status"}});
    let (status, host) = run(&server, &session, "peek_host", body).await;
    assert_eq!(status, StatusCode::OK, "{host}");
    assert_eq!(host["exit_code"], 0, "{host}");
    assert_eq!(recorded(&out).unwrap(), ["status"]);
    let uid = std::fs::read_to_string(host_dir.path().join("host-argv.bin.uid")).unwrap();
    assert_eq!(uid.trim(), "54321");
}

#[tokio::test]
async fn unsafe_or_unclear_command_configs_stop_the_server() {
    let cases = [
        (
            "argv = [\"echo\", \"{x}\"]\nparameters = { x = { type = \"string\" } }",
            "needs an `enum` or a `pattern`",
        ),
        (
            "argv = [\"echo\", \"{y}\"]\nparameters = { x = { type = \"integer\" } }",
            "not a declared parameter",
        ),
        (
            "argv = [\"echo\", \"--vm={x}\"]\nparameters = { x = { type = \"integer\" } }",
            "whole element",
        ),
        (
            "argv = [\"true\"]\nruns_on = \"host\"\nhost_uid = 0\nhost_gid = 0",
            "unprivileged",
        ),
        ("argv = [\"true\"]\nhost_user = \"nobody\"", "need runs_on"),
        (
            "argv = [\"true\"]\nruns_on = \"host\"\nhost_uid = 4242\nhost_gid = 0",
            "unprivileged",
        ),
        (
            "argv = [\"echo\", \"{x}\"]\nparameters = { x = { type = \"string\", pattern = \"a)|(b\" } }",
            "pattern does not compile",
        ),
    ];
    for (body, expected) in cases {
        let toml = format!("[[commands]]\nname = \"c\"\ndescription = \"d\"\n{body}\n");
        let h = Harness::new(json!({"replies": []}), &toml).await;
        let (code, _, stderr) = h.cli(&["serve", "--bind", "127.0.0.1:0"]).await;
        assert_ne!(code, 0);
        assert!(stderr.contains(expected), "{expected:?} not in {stderr}");
    }
    let toml = "[profiles.open]\nsandbox = \"off\"\ncommands = [\"c\"]\n\
        [[commands]]\nname = \"c\"\ndescription = \"d\"\nargv = [\"true\"]\n";
    let h = Harness::new(json!({"replies": []}), toml).await;
    let (code, _, stderr) = h.cli(&["serve", "--bind", "127.0.0.1:0"]).await;
    assert_ne!(code, 0);
    assert!(stderr.contains("sandbox = \"off\""), "{stderr}");
    let toml = "[[commands]]\nname = \"bash\"\ndescription = \"d\"\nargv = [\"true\"]\n";
    let h = Harness::new(json!({"replies": []}), toml).await;
    let (code, _, stderr) = h.cli(&["serve", "--bind", "127.0.0.1:0"]).await;
    assert_ne!(code, 0);
    assert!(stderr.contains("built-in tool"), "{stderr}");
}

#[tokio::test]
async fn a_commands_secret_env_values_are_masked_and_off_the_command_line() {
    let secret = "s3cret-9f2e7c-value";
    let toml = format!(
        "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n\
        [[commands]]\nname = \"show\"\ndescription = \"Print the token\"\nmutating = false\n\
        argv = [\"sh\", \"-c\", \"echo out $TOKEN; echo err $TOKEN >&2; sleep 2\"]\n\
        env = {{ TOKEN = {{ value = \"{secret}\", secret = true }} }}\n"
    );
    let h = Harness::new(json!({"replies": []}), &toml).await;
    let server = h.start().await;
    let session = server.session().await;
    let path = format!("/v1/sessions/{session}/commands/show");
    let running = server.post(&path, json!({}));
    // While it runs, no process's command line (bubblewrap's) holds it.
    let watch = async {
        let mut seen = Vec::new();
        for _ in 0..15 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            for entry in std::fs::read_dir("/proc").unwrap().flatten() {
                if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
                    && String::from_utf8_lossy(&cmdline).contains(secret)
                {
                    seen.push(String::from_utf8_lossy(&cmdline).replace('\0', " "));
                }
            }
        }
        seen
    };
    let ((status, ran), seen) = tokio::join!(running, watch);
    assert_eq!(status, StatusCode::OK, "{ran}");
    assert!(seen.is_empty(), "on a command line: {seen:?}");
    let stdout = ran["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("out "), "{ran}");
    assert!(!ran.to_string().contains(secret), "{ran}");
    let events = server.all_events(&session).await;
    assert!(
        !events.iter().any(|e| e.data.to_string().contains(secret)),
        "in an event"
    );
}

#[tokio::test]
async fn a_revoked_profile_runs_none_of_its_commands() {
    let toml = "[access]\nadmins = [\"carol\"]\n[profiles.default]\n[profiles.yolo]\nmode = \"bypass\"\n\
        [[commands]]\nname = \"hello\"\ndescription = \"Say hello\"\nargv = [\"echo\", \"hello\"]\nmutating = false\n";
    let h = Harness::new(json!({"replies": []}), toml).await;
    let (code, admin_token, stderr) = h
        .cli(&["tokens", "create", "--user", "root", "--admin"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let alice_token = h.token("alice").await;
    let server = h.start().await;
    let root = server.as_user(admin_token.trim());
    let alice = server.as_user(&alice_token);
    let grants = "/v1/admin/users/alice/grants";
    let (status, body) = root
        .post(grants, json!({"kind": "profile", "name": "yolo"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, session) = alice.post("/v1/sessions", json!({"profile": "yolo"})).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let id = session["id"].as_str().unwrap();
    let path = format!("/v1/sessions/{id}/commands/hello");
    let (status, ran) = alice.post(&path, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{ran}");

    let (status, _) = root
        .send(root.request(reqwest::Method::DELETE, &format!("{grants}/profile/yolo")))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, error) = alice.post(&path, json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{error}");
    assert_eq!(error["error"]["code"], "not_granted", "{error}");
    let (status, _) = alice.get(&format!("/v1/sessions/{id}/commands")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (code, stdout, stderr) = h.cli(&["audit", "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let refused = stdout
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|e| e["action"] == "session.command")
        .find(|e| e["detail"]["refused"].is_string());
    assert!(refused.is_some(), "the refusal is not audited: {stdout}");
}

#[tokio::test]
async fn a_secret_across_the_output_cap_is_not_cut_in_half() {
    let secret = "s3cret-straddling-the-cap";
    // 65 530 bytes (spaces, then `a`), then the secret: it starts 6 bytes
    // before the 64 KiB cap and ends past it.
    let toml = format!(
        "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n\
        [[commands]]\nname = \"long\"\ndescription = \"Print a lot\"\nmutating = false\n\
        argv = [\"sh\", \"-c\", \"printf '%65530s' a; echo $TOKEN; echo tail\"]\n\
        env = {{ TOKEN = {{ value = \"{secret}\", secret = true }} }}\n"
    );
    let h = Harness::new(json!({"replies": []}), &toml).await;
    let server = h.start().await;
    let session = server.session().await;
    let path = format!("/v1/sessions/{session}/commands/long");
    let (status, ran) = server.post(&path, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{ran}");
    let stdout = ran["stdout"].as_str().unwrap();
    assert!(
        stdout.starts_with("    "),
        "{}",
        &stdout[..40.min(stdout.len())]
    );
    assert!(
        stdout.ends_with("a[secret TOKEN]"),
        "{}",
        &stdout[stdout.len().saturating_sub(60)..]
    );
    assert!(
        !stdout.contains(&secret[..6]),
        "a piece of the secret shows"
    );
    assert_eq!(ran["truncated"], true, "{}", ran["truncated"]);
}

/// A message while the user's command runs is refused at once
/// (`409 command_running`, not kept waiting until the command ends, nor
/// queued); once it has ended the message is accepted.
#[tokio::test]
async fn a_message_while_a_command_runs_is_refused_at_once() {
    let toml = "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n\
        [[commands]]\nname = \"slow\"\ndescription = \"Take a while\"\nmutating = false\n\
        argv = [\"sh\", \"-c\", \"sleep 4; echo done\"]\n";
    let h = Harness::new(
        json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "ok"}]}]}),
        toml,
    )
    .await;
    let server = h.start().await;
    let session = server.session().await;
    let path = format!("/v1/sessions/{session}/commands/slow");
    let running = server.post(&path, json!({}));
    let messages = format!("/v1/sessions/{session}/messages");
    let refused = async {
        tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
        let mut answers = Vec::new();
        for body in [
            json!({"content": "now?"}),
            json!({"content": "later", "queue": true}),
        ] {
            let asked = std::time::Instant::now();
            let (status, error) = server.post(&messages, body).await;
            answers.push((status, error, asked.elapsed()));
        }
        answers
    };
    let ((status, ran), answers) = tokio::join!(running, refused);
    assert_eq!(status, StatusCode::OK, "{ran}");
    assert_eq!(ran["stdout"], "done\n", "{ran}");
    for (status, error, took) in answers {
        assert_eq!(status, StatusCode::CONFLICT, "{error}");
        assert_eq!(error["error"]["code"], "command_running", "{error}");
        assert!(
            took < std::time::Duration::from_secs(2),
            "the message waited {took:?} for the command"
        );
    }
    server.message(&session, "now").await;
    server.wait_idle(&session).await;
}

#[tokio::test]
async fn a_command_past_its_timeout_is_stopped_and_one_that_left_a_child_returns() {
    let toml = "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n\
        [[commands]]\nname = \"hang\"\ndescription = \"Sleeps\"\nmutating = false\ntimeout_s = 1\n\
        argv = [\"sleep\", \"30\"]\n\
        [[commands]]\nname = \"detach\"\ndescription = \"Leaves a child\"\nmutating = false\n\
        timeout_s = 20\nargv = [\"sh\", \"-c\", \"sleep 30 & echo started\"]\n";
    let h = Harness::new(json!({"replies": []}), toml).await;
    let server = h.start().await;
    let session = server.session().await;
    let started = std::time::Instant::now();
    let (status, ran) = server
        .post(&format!("/v1/sessions/{session}/commands/hang"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{ran}");
    assert_eq!(ran["timed_out"], true, "{ran}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let started = std::time::Instant::now();
    let (status, ran) = server
        .post(
            &format!("/v1/sessions/{session}/commands/detach"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{ran}");
    assert_eq!(ran["timed_out"], false, "{ran}");
    assert_eq!(ran["stdout"].as_str().unwrap().trim(), "started", "{ran}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{ran}"
    );
}
