//! Claude Agent SDK apps on agentd: the real Python `claude-agent-sdk`
//! (installed into `.tools/venv` by `scripts/install-deps.sh`) runs
//! `agent_sdk/driver.py` with `cli_path` set to a link named `claude` to
//! the `agentd` binary, against the scripted model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};

use crate::run_harness::{Harness, Wire, request_text};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// What the app printed: the messages the SDK gave it, and what its
/// callbacks saw.
struct SdkRun {
    code: i32,
    lines: Vec<Value>,
    stderr: String,
}

impl SdkRun {
    fn messages(&self, class: &str) -> Vec<&Value> {
        let of_class = |line: &&Value| line["class"] == class;
        self.lines.iter().filter(of_class).collect()
    }

    fn callbacks(&self, name: &str) -> Vec<&Value> {
        self.lines
            .iter()
            .filter(|l| l["callback"] == name)
            .collect()
    }

    fn results(&self) -> Vec<&Value> {
        self.messages("ResultMessage")
            .into_iter()
            .map(|m| &m["data"])
            .collect()
    }

    fn session_id(&self) -> String {
        let results = self.results();
        let result = results
            .last()
            .unwrap_or_else(|| panic!("no result: {}", self.stderr));
        result["session_id"].as_str().unwrap().to_string()
    }
}

/// Runs `driver.py scenario` with `env`, the SDK pointed at agentd.
async fn sdk(h: &Harness, scenario: &str, env: &[(&str, &str)]) -> SdkRun {
    let repo = repo();
    let python = repo.join(".tools/venv/bin/python");
    assert!(
        python.is_file(),
        "the Agent SDK's venv is missing ({}): run bash scripts/install-deps.sh",
        python.display()
    );
    let link_dir = h.data_dir.path().join("bin");
    std::fs::create_dir_all(&link_dir).unwrap();
    let claude = link_dir.join("claude");
    if !claude.exists() {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_agentd"), &claude).unwrap();
    }
    let mut command = std::process::Command::new(python);
    command
        .arg(repo.join("crates/cli/tests/cli/agent_sdk/driver.py"))
        .arg(scenario)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("HOME", h.data_dir.path())
        .env("AGENTD_DATA_DIR", h.data_dir.path())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", h.server.url())
        .env("AGENTD_CLAUDE", &claude)
        .env("WORKSPACE", h.ws())
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    if let Some(config) = &h.config {
        command.env("AGENTD_CONFIG", config);
    }
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    SdkRun {
        code: output.status.code().unwrap_or(-1),
        lines,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn bash(command: &str) -> Value {
    json!({"type": "tool_use", "name": "Bash", "input": {"command": command}})
}

fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

#[tokio::test]
async fn query_runs_a_turn_whose_bash_is_confined_to_the_workspace() {
    let escape = format!("/tmp/agentd-sdk-escape-{}", std::process::id());
    let probe = format!(
        "echo made > made.txt; echo net=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ,); \
         touch {escape} && echo tmp-private; touch /etc/agentd-sdk-probe || echo etc-refused"
    );
    let script = json!({"replies": [
        {"when": {"last_user_contains": "PROBE"}, "content": [text("Probing."), bash(&probe)]},
        {"when": {"last_tool_name": "Bash"}, "content": [text("PROBE-DONE")]},
    ]});
    let h = Harness::new(Wire::Anthropic, script).await;
    let env = [
        ("PROMPT", "PROBE the sandbox"),
        ("PERMISSION_MODE", "bypassPermissions"),
    ];
    let run = sdk(&h, "query", &env).await;
    assert_eq!(run.code, 0, "{}", run.stderr);

    let classes: Vec<&str> = run
        .lines
        .iter()
        .filter_map(|l| l["class"].as_str())
        .collect();
    assert_eq!(
        classes,
        [
            "SystemMessage",
            "AssistantMessage",
            "UserMessage",
            "AssistantMessage",
            "ResultMessage"
        ],
        "{:#?}",
        run.lines
    );
    let init = &run.messages("SystemMessage")[0]["data"];
    assert_eq!(init["subtype"], "init");
    let ws = h.ws().canonicalize().unwrap();
    assert_eq!(init["data"]["cwd"], ws.display().to_string());
    let call = &run.messages("AssistantMessage")[0]["data"]["content"][1];
    assert_eq!(call["name"], "Bash");
    let result = run.results()[0];
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["result"], "PROBE-DONE");
    assert!(result["total_cost_usd"].as_f64().unwrap() > 0.0, "{result}");
    assert!(result["usage"]["input_tokens"].as_u64().unwrap() > 0);
    let session = run.session_id();
    assert_eq!(init["data"]["session_id"], session);

    // The file is in the workspace; the agent reached no network and
    // wrote nowhere else on the host.
    assert_eq!(
        std::fs::read_to_string(ws.join("made.txt")).unwrap(),
        "made\n"
    );
    let output = run.messages("UserMessage")[0]["data"]["content"][0]["content"].clone();
    let output = output.as_str().unwrap();
    assert!(output.contains("net=lo,"), "{output}");
    assert!(output.contains("etc-refused"), "{output}");
    assert!(
        !Path::new(&escape).exists(),
        "a write outside the workspace reached the host"
    );
    assert!(!Path::new("/etc/agentd-sdk-probe").exists());

    // The session is agentd's: in its store, with the turn.
    let listed = h
        .command(&["sessions", "show", &session, "--json"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success() && shown.contains("PROBE-DONE"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_client_holds_two_turns_then_an_interrupt_stops_the_third() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "first turn"}, "content": [bash("echo one > one.txt")]},
        {"when": {"last_tool_name": "Bash"}, "content": [text("FIRST-DONE")]},
        {"when": {"last_user_contains": "second turn"}, "content": [text("SECOND-DONE")]},
        {"when": {"last_user_contains": "slow turn"}, "delay_ms": 300, "content": [
            text("a slow answer that goes on and on and on and on and on and on and on")]},
    ]});
    let h = Harness::new(Wire::Anthropic, script)
        .await
        .with_config("[profiles.default]\nmode = \"bypass\"\n");
    let run = sdk(&h, "client", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let results = run.results();
    let subtypes: Vec<&str> = results
        .iter()
        .map(|r| r["subtype"].as_str().unwrap())
        .collect();
    assert_eq!(
        subtypes,
        ["success", "success", "error_during_execution"],
        "{:#?}",
        run.lines
    );
    assert_eq!(results[0]["result"], "FIRST-DONE");
    assert_eq!(results[1]["result"], "SECOND-DONE");
    assert!(
        results
            .iter()
            .all(|r| r["session_id"] == results[0]["session_id"])
    );
    assert_eq!(run.callbacks("interrupt").len(), 1);
    assert_eq!(
        std::fs::read_to_string(h.ws().join("one.txt")).unwrap(),
        "one\n"
    );
    // Partial messages streamed, and the second turn saw the first.
    assert!(!run.messages("StreamEvent").is_empty());
    let requests = h.model_requests();
    let second = request_text(&requests[2]);
    assert!(
        second.contains("FIRST-DONE") && second.contains("second turn"),
        "{second}"
    );
}

#[tokio::test]
async fn can_use_tool_denies_one_call_and_rewrites_another() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "TIDY"}, "content": [bash("rm -f keep.txt")]},
        {"when": {"last_tool_result_contains": "no deleting"}, "content": [
            bash("echo original > note.txt; cat note.txt")]},
        {"when": {"last_tool_name": "Bash"}, "content": [text("TIDIED")]},
    ]});
    let h = Harness::new(Wire::Anthropic, script).await;
    std::fs::write(h.ws().join("keep.txt"), "precious\n").unwrap();
    let run = sdk(&h, "permissions", &[("PROMPT", "TIDY up")]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.callbacks("can_use_tool").len(), 2, "{:#?}", run.lines);
    assert_eq!(run.results()[0]["result"], "TIDIED");
    // The denied call did not run; the rewritten one ran as rewritten.
    assert_eq!(
        std::fs::read_to_string(h.ws().join("keep.txt")).unwrap(),
        "precious\n"
    );
    assert_eq!(
        std::fs::read_to_string(h.ws().join("note.txt")).unwrap(),
        "rewritten\n"
    );
    let requests = h.model_requests();
    let after_deny = request_text(&requests[1]);
    assert!(
        after_deny.contains("no deleting in this app"),
        "{after_deny}"
    );
    let after_rewrite = request_text(&requests[2]);
    assert!(
        after_rewrite.contains(r#""content":"rewritten""#),
        "{after_rewrite}"
    );
    let denials = &run.results()[0]["permission_denials"];
    assert_eq!(denials.as_array().unwrap().len(), 1, "{denials}");
}

#[tokio::test]
async fn questions_go_to_the_callback_and_a_deny_may_stop_the_turn() {
    let ask = json!({"type": "tool_use", "name": "AskUserQuestion", "input": {"questions": [{
        "question": "Which colour?", "header": "Colour", "multiSelect": false,
        "options": [{"label": "Blue", "description": "b"}, {"label": "Red", "description": "r"}]}]}});
    let script = json!({"replies": [
        {"when": {"last_user_contains": "CHOOSE"}, "content": [ask]},
        {"when": {"last_tool_name": "AskUserQuestion"}, "content": [bash("touch chosen.txt")]},
        {"when": {"last_tool_name": "Bash"}, "content": [text("should not be asked for")]},
    ]});
    let h = Harness::new(Wire::Anthropic, script).await;
    let run = sdk(&h, "ask", &[("PROMPT", "CHOOSE a colour")]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let asked: Vec<&Value> = run.callbacks("can_use_tool");
    assert_eq!(asked[0]["tool"], "AskUserQuestion");
    assert_eq!(asked[1]["tool"], "Bash");
    // The answer the callback gave is the tool result the model reads
    // (both colours are in the question itself).
    let request = h.model_requests()[1].body.clone();
    let last = request["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"][0]["type"], "tool_result", "{last}");
    let answer = last["content"][0]["content"].to_string();
    assert!(
        answer.contains("Blue") && !answer.contains("Red"),
        "{answer}"
    );
    // The deny with `interrupt` ended the turn: no further model call.
    assert_eq!(h.model_requests().len(), 2);
    assert_eq!(run.results()[0]["subtype"], "error_during_execution");
    assert!(!h.ws().join("chosen.txt").exists());
    // As with the CLI, the SDK raises for a run that ended in an error.
    let raised = run
        .lines
        .iter()
        .find(|l| l.get("raised").is_some())
        .unwrap();
    assert_eq!(raised["raised"], "ResultError", "{raised}");
}

#[tokio::test]
async fn a_mode_the_app_sets_during_a_turn_applies_to_its_next_calls() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "TWO FILES"}, "content": [bash("touch a.txt")]},
        {"when": {"last_tool_name": "Bash"}, "content": [bash("touch b.txt")]},
        {"when": {"last_tool_name": "Bash"}, "content": [text("BOTH")]},
    ]});
    let h = Harness::new(Wire::Anthropic, script).await;
    let run = sdk(&h, "mode", &[("PROMPT", "make TWO FILES")]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(h.ws().join("a.txt").exists() && h.ws().join("b.txt").exists());
    assert_eq!(run.callbacks("can_use_tool").len(), 1, "{:#?}", run.lines);
}

#[tokio::test]
async fn a_pre_tool_use_hook_registered_through_the_sdk_blocks_a_call() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "GUARD"}, "content": [bash("touch forbidden.txt")]},
        {"when": {"last_tool_name": "Bash"}, "content": [bash("touch allowed.txt")]},
        {"when": {"last_tool_result_contains": ""}, "content": [text("GUARDED")]},
    ]});
    let h = Harness::new(Wire::Anthropic, script).await;
    let run = sdk(&h, "hook", &[("PROMPT", "GUARD this")]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let seen = run.callbacks("PreToolUse");
    assert_eq!(seen.len(), 2, "{:#?}", run.lines);
    assert_eq!(seen[0]["tool"], "Bash");
    // The callback is told which call it is about, as the CLI tells it.
    let calls = run.messages("AssistantMessage");
    assert_eq!(seen[0]["tool_use_id"], calls[0]["data"]["content"][0]["id"]);
    assert!(
        !h.ws().join("forbidden.txt").exists(),
        "the hook's deny was ignored"
    );
    assert!(h.ws().join("allowed.txt").exists());
    let after = request_text(&h.model_requests()[1]);
    assert!(after.contains("the app's hook refuses this"), "{after}");
}

#[tokio::test]
async fn an_in_process_sdk_mcp_tool_is_called_by_the_model() {
    let add = json!({"type": "tool_use", "name": "mcp__calc__add", "input": {"a": 2, "b": 40}});
    let script = json!({"replies": [
        {"when": {"last_user_contains": "ADD"}, "content": [add]},
        {"when": {"last_tool_name": "mcp__calc__add"}, "content": [text("ADDED")]},
    ]});
    let h = Harness::new(Wire::Anthropic, script).await;
    let run = sdk(&h, "mcp", &[("PROMPT", "ADD two numbers")]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.callbacks("add")[0]["args"], json!({"a": 2, "b": 40}));
    assert_eq!(run.results()[0]["result"], "ADDED");
    let requests = h.model_requests();
    let offered = requests[0].body["tools"].to_string();
    assert!(offered.contains("mcp__calc__add"), "{offered}");
    let after = request_text(&requests[1]);
    assert!(after.contains("the sum is 42"), "{after}");
}

#[tokio::test]
async fn subagents_the_app_defines_are_task_types() {
    let task = json!({"type": "tool_use", "name": "Task", "input": {"description": "review",
        "prompt": "REVIEW the change", "subagent_type": "reviewer"}});
    let script = json!({"replies": [
        {"when": {"last_user_contains": "DELEGATE"}, "content": [task]},
        {"when": {"last_user_contains": "REVIEW the change"}, "content": [text("LGTM")]},
        {"when": {"last_tool_name": "Task"}, "content": [text("REVIEWED")]},
    ]});
    let h = Harness::new(Wire::Anthropic, script).await;
    let run = sdk(&h, "agents", &[("PROMPT", "DELEGATE a review")]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.results()[0]["result"], "REVIEWED");
    let requests = h.model_requests();
    let parent = requests[0].body.to_string();
    assert!(
        parent.contains("reviewer") && parent.contains("Reviews a change"),
        "{parent}"
    );
    let sub = &requests[1].body;
    assert!(
        sub["system"]
            .to_string()
            .contains("REVIEWER defined by the app"),
        "{sub}"
    );
    let offered: Vec<&str> = sub["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(offered, ["Read"], "the agent's tools only");
}

#[tokio::test]
async fn a_new_process_resumes_the_session_with_its_history() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "kestrel"}, "content": [text("noted the falcon")]},
        {"when": {"last_user_contains": "which bird"}, "content": [text("it was a kestrel")]},
    ]});
    let h = Harness::new(Wire::Anthropic, script).await;
    let first = sdk(&h, "query", &[("PROMPT", "remember the word kestrel")]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let session = first.session_id();
    let env = [
        ("PROMPT", "which bird was it?"),
        ("RESUME", session.as_str()),
    ];
    let second = sdk(&h, "resume", &env).await;
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(second.session_id(), session);
    assert_eq!(second.results()[0]["result"], "it was a kestrel");
    let request = request_text(&h.model_requests()[1]);
    assert!(
        request.contains("remember the word kestrel") && request.contains("noted the falcon"),
        "the resumed turn sees the first process's history: {request}"
    );
}

#[tokio::test]
async fn flags_and_lines_agentd_cannot_honour_are_refused_by_name() {
    let h = Harness::new(Wire::Anthropic, json!({"replies": []})).await;
    for (args, expected) in [
        (
            vec!["claude", "-p", "hi", "--no-such-flag"],
            "--no-such-flag",
        ),
        (
            vec![
                "claude",
                "-p",
                "hi",
                "--permission-prompt-tool",
                "mcp__x__ask",
            ],
            "only `stdio`",
        ),
        (
            vec!["claude", "-p", "hi", "--settings", r#"{"env": {"A": "1"}}"#],
            "\"env\" is not supported",
        ),
        (
            vec!["claude", "-p", "hi", "--add-dir", "/etc"],
            "--add-dir /etc",
        ),
        (
            vec![
                "claude",
                "-p",
                "hi",
                "--settings",
                r#"{"permissions": {"deny": "Bash(rm *)"}}"#,
            ],
            "permissions.deny must be an array",
        ),
        (
            vec![
                "claude",
                "-p",
                "hi",
                "--mcp-config",
                r#"{"mcpServers": {"calc": {"type": "sdk"}}}"#,
                "--mcp-config",
                r#"{"mcpServers": {"calc": {"type": "sdk"}}}"#,
            ],
            "given twice",
        ),
        (
            vec!["claude", "-p", "hi", "--fork-session"],
            "--fork-session needs",
        ),
        (
            vec![
                "claude",
                "--input-format",
                "stream-json",
                "--output-format",
                "json",
            ],
            "needs --output-format stream-json",
        ),
    ] {
        let output = h.command(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    // `-v` answers as the CLI does, with the protocol version first.
    let version = h.command(&["claude", "-v"]).output().unwrap();
    let version = String::from_utf8_lossy(&version.stdout);
    assert!(
        version.starts_with("2.") && version.contains("agentd"),
        "{version}"
    );
    // A line of another kind ends the run with a reason, and a control
    // request agentd does not know is answered with an error, not ignored.
    let mut child = h
        .command(&[
            "claude",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = concat!(
        r#"{"type":"control_request","request_id":"r1","request":{"subtype":"rewind_files"}}"#,
        "\n",
        r#"{"type":"assistant","message":{}}"#,
        "\n"
    );
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(lines.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("stdin line 2") && stderr.contains("\"assistant\""),
        "{stderr}"
    );
    let answer: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(answer["response"]["subtype"], "error", "{stdout}");
    assert_eq!(answer["response"]["request_id"], "r1");
    // Input with no usable message made no session.
    let listed = h.command(&["sessions", "ls", "--json"]).output().unwrap();
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed, json!([]), "an empty session was left behind");
}

/// `agentd claude -p "TOUCH it" --output-format json` with `flags`, off the
/// test's runtime (the scripted model answers on it): its result.
async fn touch_it(h: &Harness, flags: &[&str]) -> Value {
    let mut args = vec!["claude", "-p", "TOUCH it", "--output-format", "json"];
    args.extend(flags);
    let mut command = h.command(&args);
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tokio::task::spawn_blocking(move || command.output().unwrap()),
    )
    .await
    .expect("agentd claude did not finish within a minute (waiting for an answer?)")
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap()
}

#[tokio::test]
async fn a_prompt_argument_with_stdio_permissions_is_denied_not_stuck() {
    // Nobody reads stdin, so nobody can answer: the call is denied at once.
    let script = json!({"replies": [
        {"when": {"last_user_contains": "TOUCH"}, "content": [bash("touch asked.txt")]},
        {"when": {"last_tool_name": "Bash"}, "content": [text("NOT ALLOWED")]},
    ]});
    let h = Harness::new(Wire::Anthropic, script).await;
    let result = touch_it(&h, &["--permission-prompt-tool", "stdio"]).await;
    assert_eq!(result["result"], "NOT ALLOWED", "{result}");
    assert_eq!(result["permission_denials"].as_array().unwrap().len(), 1);
    assert!(!h.ws().join("asked.txt").exists());
}

/// `agentd claude`, run with `-p` or as an Agent SDK app runs it (stream-json
/// on stdin), starts its turn's first sandbox beside the first model call,
/// as `agentd run` does: the first `Bash` finds it set up and runs in the
/// serving sandbox (PID 1 is agentd's sandbox server), not in a bubblewrap
/// started when the command came.
#[tokio::test]
async fn a_claude_process_starts_its_first_sandbox_beside_the_first_model_call() {
    let probe = "tr '\\0' ' ' < /proc/1/cmdline > pid1.txt";
    let script = json!({"replies": [
        {"when": {"last_user_contains": "PID"}, "repeat": true, "content": [bash(probe)]},
        {"when": {"last_tool_name": "Bash"}, "repeat": true, "content": [text("done")]},
    ]});
    let h = Harness::new(Wire::Anthropic, script).await;
    let streamed = r#"{"type":"user","message":{"role":"user","content":"PID 1?"},"parent_tool_use_id":null,"session_id":"default"}"#;
    let ways: [(&str, Vec<&str>, Option<&str>); 2] = [
        (
            "-p",
            vec![
                "-p",
                "PID 1?",
                "--output-format",
                "json",
                "--permission-mode",
                "bypassPermissions",
            ],
            None,
        ),
        (
            "stream-json",
            vec![
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-mode",
                "bypassPermissions",
            ],
            Some(streamed),
        ),
    ];
    for (way, flags, stdin) in ways {
        let _ = std::fs::remove_file(h.ws().join("pid1.txt"));
        let mut args = vec!["claude"];
        args.extend(flags);
        let mut command = h.command(&args);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let line = stdin.map(|line| format!("{line}\n"));
        let finished = tokio::task::spawn_blocking(move || {
            let mut child = command.spawn().unwrap();
            let mut input = child.stdin.take().unwrap();
            if let Some(line) = line {
                std::io::Write::write_all(&mut input, line.as_bytes()).unwrap();
            }
            drop(input);
            child.wait_with_output().unwrap()
        });
        let output = tokio::time::timeout(std::time::Duration::from_secs(60), finished)
            .await
            .unwrap_or_else(|_| panic!("{way}: agentd claude did not finish within a minute"))
            .unwrap();
        assert!(
            output.status.success(),
            "{way}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let pid1 = std::fs::read_to_string(h.ws().join("pid1.txt"))
            .unwrap_or_else(|err| panic!("{way}: the command did not run: {err}"));
        assert!(
            pid1.contains("__sandbox-serve"),
            "{way}: the first command started its own sandbox: {pid1}"
        );
    }
}

/// `--dangerously-skip-permissions` is Claude Code's `bypassPermissions`,
/// and wins over a `--permission-mode` given beside it, as there: the call
/// `a_prompt_argument_with_stdio_permissions_is_denied_not_stuck` sees
/// denied runs unasked. `agentd run` takes it too.
#[tokio::test]
async fn dangerously_skip_permissions_bypasses_as_in_claude_code() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "TOUCH"}, "repeat": true, "content": [bash("touch asked.txt")]},
        {"when": {"last_tool_name": "Bash"}, "repeat": true, "content": [text("RAN")]},
    ]});
    let h = Harness::new(Wire::Anthropic, script).await;
    let asked = h.ws().join("asked.txt");
    for flags in [
        &["--dangerously-skip-permissions"][..],
        &[
            "--permission-mode",
            "plan",
            "--dangerously-skip-permissions",
        ],
    ] {
        let _ = std::fs::remove_file(&asked);
        let result = touch_it(&h, flags).await;
        assert_eq!(
            result["permission_denials"],
            json!([]),
            "{flags:?}: {result}"
        );
        assert!(asked.exists(), "{flags:?}: the command ran");
    }
    std::fs::remove_file(&asked).unwrap();
    let mut command = h.command(&["run", "TOUCH it", "--dangerously-skip-permissions"]);
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tokio::task::spawn_blocking(move || command.output().unwrap()),
    )
    .await
    .expect("agentd run did not finish within a minute (waiting for an answer?)")
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(asked.exists(), "agentd run: the command ran");
}
