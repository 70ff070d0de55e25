//! `agentd run` end to end: the real binary, real HTTP to the testkit model
//! server in both wire formats, real bubblewrap, a real SQLite store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::run_harness;
use agentd_store::prelude::*;

use agentd_protocol::{Event, TurnStatus};
use run_harness::{Harness, Wire};
use serde_json::json;

fn multi_step_script() -> serde_json::Value {
    json!({"replies": [
        {"content": [
            {"type": "text", "text": "I'll create the file first."},
            {"type": "tool_use", "name": "Bash",
             "input": {"command": "echo hello from bash > notes.txt && cat notes.txt", "description": "write"}}
        ]},
        {"when": {"last_tool_result_contains": "hello from bash"}, "content": [
            {"type": "tool_use", "name": "Edit",
             "input": {"file_path": "notes.txt", "old_string": "hello", "new_string": "goodbye"}}
        ]},
        {"content": [{"type": "text", "text": "All done: notes.txt now says goodbye."}]}
    ]})
}

async fn multi_step_turn(wire: Wire) {
    let h = Harness::new(wire, multi_step_script()).await;
    let run = h.run("make notes", &[]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);

    let notes = std::fs::read_to_string(h.ws().join("notes.txt")).unwrap();
    assert_eq!(notes, "goodbye from bash\n");

    run.assert_gapless_from(1);
    let finished = run.finished();
    assert_eq!(finished.status, TurnStatus::Completed);
    assert_eq!(
        finished.result.as_deref(),
        Some("All done: notes.txt now says goodbye.")
    );
    assert_eq!(finished.num_model_calls, 3);

    // The important events in order (deltas and usage interleave).
    let milestones: Vec<&str> = run
        .types()
        .into_iter()
        .filter(|t| !matches!(*t, "message.delta" | "usage" | "tool.output"))
        .collect();
    assert_eq!(
        milestones,
        [
            "turn.started",
            "message.completed",
            "tool.started",
            // Before the turn's first change to the workspace.
            "checkpoint.created",
            "tool.finished",
            "message.completed",
            "tool.started",
            "tool.finished",
            "message.completed",
            "turn.finished"
        ]
    );
    let tools: Vec<(String, bool)> = run
        .events
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolStarted { name, .. } => Some((name.clone(), false)),
            Event::ToolFinished { is_error, .. } => Some((String::new(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(tools[0].0, "Bash");
    assert_eq!(tools[2].0, "Edit");
    assert!(tools.iter().all(|(_, is_error)| !is_error), "{tools:?}");
    assert!(
        run.events.iter().any(|e| matches!(&e.event,
            Event::ToolOutput { text, .. } if text.contains("hello from bash"))),
        "Bash output is streamed as tool.output"
    );
    assert!(run.types().contains(&"message.delta"), "text is streamed");

    // Three model calls; the last one carries both tool results back.
    let requests = h.model_requests();
    assert_eq!(requests.len(), 3);
    let last = requests[2].body.to_string();
    assert!(last.contains("hello from bash"), "{last}");
    assert!(last.contains("make notes"));

    // What was streamed is what was stored.
    let store = h.store().await;
    let stored = store
        .events_after(&run.session_id(), 0, 10_000)
        .await
        .unwrap();
    assert_eq!(stored, run.events);
}

#[tokio::test]
async fn multi_step_turn_over_anthropic_wire() {
    multi_step_turn(Wire::Anthropic).await;
}

#[tokio::test]
async fn multi_step_turn_over_openai_wire() {
    multi_step_turn(Wire::OpenAi).await;
}

async fn resume_across_processes(wire: Wire) {
    let h = Harness::new(
        wire,
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
    let first = h.run("remember the keyword from the shell", &[]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let id = first.session_id();
    let last_seq = first.events.last().unwrap().seq;

    let second = h.run("what was the keyword?", &["--resume", &id]).await;
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(second.session_id(), id);
    second.assert_gapless_from(last_seq + 1);
    assert_eq!(
        second.finished().result.as_deref(),
        Some("It was PINEAPPLE-42.")
    );

    // The resumed process sent the whole earlier conversation, tools included.
    let requests = h.model_requests();
    let body = requests.last().unwrap().body.to_string();
    for needle in [
        "remember the keyword from the shell",
        "echo PINEAPPLE-42",
        "The keyword is PINEAPPLE-42.",
        "what was the keyword?",
    ] {
        assert!(
            body.contains(needle),
            "resumed request lacks {needle:?}: {body}"
        );
    }
    let tool_result_marker = match wire {
        Wire::Anthropic => "\"tool_result\"",
        Wire::OpenAi => "\"tool_call_id\"",
    };
    assert!(body.contains(tool_result_marker), "{body}");
}

#[tokio::test]
async fn resume_across_processes_anthropic() {
    resume_across_processes(Wire::Anthropic).await;
}

#[tokio::test]
async fn resume_across_processes_openai() {
    resume_across_processes(Wire::OpenAi).await;
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_retried() {
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [
            {"fault": {"kind": "http", "status": 429, "retry_after_s": 1}},
            {"content": [{"type": "text", "text": "made it"}]}
        ]}),
    )
    .await;
    let run = h.run("hi", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.finished().result.as_deref(), Some("made it"));
    assert_eq!(h.model_requests().len(), 2);
}

#[tokio::test]
async fn cut_stream_fails_the_turn_and_the_session_resumes() {
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [
            {"fault": {"kind": "cut_stream", "after_chunks": 4},
             "content": [{"type": "text", "text": "this reply will be cut somewhere in the middle of it"}]},
            {"content": [{"type": "text", "text": "second try works"}]}
        ]}),
    )
    .await;
    let run = h.run("hi", &[]).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    let finished = run.finished();
    assert_eq!(finished.status, TurnStatus::Failed);
    let error = finished.error.as_ref().unwrap();
    assert_eq!(error.code, "model_stream_broken");
    assert!(run.types().contains(&"error"));

    let store = h.store().await;
    let stored = store
        .events_after(&run.session_id(), 0, 1000)
        .await
        .unwrap();
    assert!(
        stored
            .iter()
            .any(|e| matches!(&e.event, Event::TurnFinished(f) if f.status == TurnStatus::Failed))
    );

    let again = h.run("try again", &["--resume", &run.session_id()]).await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.finished().result.as_deref(), Some("second try works"));
}

#[tokio::test]
async fn server_errors_after_retries_fail_the_turn() {
    let h = Harness::new(
        Wire::OpenAi,
        json!({"replies": [
            {"repeat": true, "fault": {"kind": "http", "status": 500, "message": "boom"}}
        ]}),
    )
    .await
    .with_config(
        "[models.default]\nprovider = \"openai\"\nbase_url = \"{URL}/v1\"\nmax_retries = 2\n",
    );
    let run = h.run("hi", &[]).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    let finished = run.finished();
    assert_eq!(finished.status, TurnStatus::Failed);
    assert_eq!(finished.error.as_ref().unwrap().code, "model_server_error");
    assert_eq!(h.model_requests().len(), 3, "one try and two retries");
}

#[tokio::test]
async fn invalid_tool_json_is_a_tool_error_for_the_model() {
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [
            {"content": [{"type": "raw_tool_use", "name": "Write", "raw_input": "{\"file_path\": \"x.txt\", \"content\": "}]},
            {"when": {"last_tool_result_contains": "not valid JSON"},
             "content": [{"type": "text", "text": "sorry, my input was broken"}]}
        ]}),
    )
    .await;
    let run = h.run("write x", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.finished().result.as_deref(),
        Some("sorry, my input was broken")
    );
    assert!(!h.ws().join("x.txt").exists());
    assert!(
        run.events
            .iter()
            .any(|e| matches!(&e.event, Event::ToolFinished { is_error: true, .. }))
    );
}

#[tokio::test]
async fn paths_outside_the_workspace_are_refused_end_to_end() {
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [
            {"content": [
                {"type": "tool_use", "name": "Read", "input": {"file_path": "/etc/passwd"}},
                {"type": "tool_use", "name": "Write", "input": {"file_path": "../escaped.txt", "content": "x"}}
            ]},
            {"content": [{"type": "text", "text": "ok"}]}
        ]}),
    )
    .await;
    let run = h.run("escape", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let errors: Vec<&str> = run
        .events
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolFinished {
                is_error: true,
                output,
                ..
            } => Some(output.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors.iter().all(|e| e.contains("outside the workspace")),
        "{errors:?}"
    );
    assert!(
        !errors.iter().any(|e| e.contains("root:")),
        "no file content leaked"
    );
    assert!(!h.ws().parent().unwrap().join("escaped.txt").exists());
}

#[tokio::test]
async fn max_turns_ends_the_turn_with_its_own_exit_code() {
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [
            {"repeat": true, "content": [{"type": "tool_use", "name": "LS", "input": {"path": "."}}]}
        ]}),
    )
    .await;
    let run = h.run("loop forever", &["--max-turns", "2"]).await;
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_eq!(run.finished().status, TurnStatus::MaxTurns);
    assert_eq!(h.model_requests().len(), 2);
}

#[tokio::test]
async fn turn_timeout_kills_the_tool_and_exits_with_its_code() {
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [
            {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "sleep 60"}}]}
        ]}),
    )
    .await
    .with_config("[profiles.default]\nturn_timeout_s = 1\n");
    let started = std::time::Instant::now();
    let run = h.run("sleep", &[]).await;
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert_eq!(run.finished().status, TurnStatus::Timeout);
    assert!(started.elapsed().as_secs() < 30, "the sleep was killed");
}

#[tokio::test]
async fn ctrl_c_interrupts_the_turn_and_exits_130() {
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [
            {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "echo started; sleep 60"}}]},
            {"content": [{"type": "text", "text": "resumed fine"}]}
        ]}),
    )
    .await;
    let mut cmd = h.run_command("wait");
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id() as i32;
    let output = tokio::task::spawn_blocking(move || {
        use std::io::{BufRead, BufReader};
        let mut child = child;
        let stdout = child.stdout.take().unwrap();
        let mut lines = Vec::new();
        let mut sent = false;
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if !sent && line.contains("\"tool.output\"") {
                let _ = std::process::Command::new("kill")
                    .args(["-INT", &pid.to_string()])
                    .status();
                sent = true;
            }
            lines.push(line);
        }
        let status = child.wait().unwrap();
        (status, lines)
    })
    .await
    .unwrap();
    let (status, lines) = output;
    assert_eq!(status.code(), Some(130));
    let finished = lines
        .iter()
        .rev()
        .find(|l| l.contains("\"turn.finished\""))
        .unwrap();
    assert!(finished.contains("\"interrupted\""), "{finished}");

    // The session continues: the unanswered tool call is answered for the model.
    let id: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    let run = h
        .run("go on", &["--resume", id["session_id"].as_str().unwrap()])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.finished().result.as_deref(), Some("resumed fine"));
}

#[tokio::test]
async fn json_output_is_one_object_with_the_outcome() {
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [{"content": [{"type": "text", "text": "forty-two"}],
                            "usage": {"input_tokens": 1000, "output_tokens": 100}}]}),
    )
    .await;
    let mut cmd = h.command(&[
        "run",
        "--output-format",
        "json",
        "--model",
        "anthropic:claude-sonnet-4-5",
        "q",
    ]);
    // The model server runs on this test's runtime: don't block it.
    let output = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(value["status"], "completed");
    assert_eq!(value["result"], "forty-two");
    assert_eq!(value["num_model_calls"], 1);
    assert_eq!(value["usage"]["input_tokens"], 1000);
    assert!(
        value["cost_usd"].as_f64().unwrap() > 0.0,
        "priced from the table"
    );
    assert!(value["session_id"].is_string() && value["turn_id"].is_string());
}

fn touch_script() -> serde_json::Value {
    json!({"replies": [
        {"when": {"last_user_contains": "touch"}, "content": [
            {"type": "tool_use", "name": "Bash", "input": {"command": "touch made-by-bash"}}
        ]},
        {"content": [{"type": "text", "text": "ok"}]}
    ]})
}

#[tokio::test]
async fn without_a_terminal_calls_that_need_asking_are_denied() {
    let h = Harness::new(Wire::Anthropic, touch_script()).await;
    let run = h.run_as_is("touch it", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!h.ws().join("made-by-bash").exists());
    assert!(run.events.iter().any(|e| matches!(&e.event,
        Event::PermissionResolved { decision, by, .. } if decision == "deny" && by == "no_terminal")));

    let allowed = Harness::new(Wire::Anthropic, touch_script()).await;
    let run = allowed
        .run_as_is("touch it", &["--allow", "Bash(touch *)"])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        allowed.ws().join("made-by-bash").exists(),
        "--allow lets it run unasked"
    );
    assert!(!run.types().contains(&"permission.requested"));
}

#[tokio::test]
async fn the_terminal_asks_and_the_answer_decides() {
    for (answer, expect_file) in [("y", true), ("n", false)] {
        let h = Harness::new(Wire::Anthropic, touch_script()).await;
        let agentd = env!("CARGO_BIN_EXE_agentd");
        // `script` gives agentd a pseudo-terminal, as a person at a shell would.
        let mut cmd = std::process::Command::new("script");
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .env("HOME", h.data_dir.path())
            .env("AGENTD_DATA_DIR", h.data_dir.path())
            .env("ANTHROPIC_API_KEY", "test")
            .env("ANTHROPIC_BASE_URL", h.server.url())
            .current_dir(h.ws())
            .args([
                "-qec",
                &format!("{agentd} run --output-format stream-json 'touch it'"),
                "/dev/null",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        // Answer once the prompt shows, as a person would: agentd drops lines
        // typed before it asks.
        let text = tokio::task::spawn_blocking(move || {
            use std::io::{Read, Write};
            let mut stdin = child.stdin.take().unwrap();
            let mut stdout = child.stdout.take().unwrap();
            let mut seen = Vec::new();
            let mut buffer = [0u8; 4096];
            let mut answered = false;
            loop {
                let read = stdout.read(&mut buffer).unwrap();
                if read == 0 {
                    break;
                }
                seen.extend_from_slice(&buffer[..read]);
                if !answered && String::from_utf8_lossy(&seen).contains("allow? [y]es") {
                    stdin.write_all(format!("{answer}\n").as_bytes()).unwrap();
                    answered = true;
                }
            }
            drop(stdin);
            child.wait().unwrap();
            String::from_utf8_lossy(&seen).into_owned()
        })
        .await
        .unwrap();
        assert!(text.contains("allow? [y]es"), "prompted: {text}");
        assert_eq!(h.ws().join("made-by-bash").exists(), expect_file, "{text}");
        let decision = if expect_file { "\"allow\"" } else { "\"deny\"" };
        assert!(
            text.lines().any(|l| l.contains("permission.resolved")
                && l.contains(decision)
                && l.contains("\"user\"")),
            "{text}"
        );
    }
}

#[tokio::test]
async fn the_servers_api_key_never_reaches_a_command() {
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [
            {"when": {"last_user_contains": "env"}, "content": [
                {"type": "tool_use", "name": "Bash", "input": {"command": "env; cat /proc/1/environ"}}
            ]},
            {"content": [{"type": "text", "text": "ok"}]}
        ]}),
    )
    .await;
    let run = h.run("show env", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let output = first_tool_output(&run);
    assert!(output.contains("PATH="), "env ran: {output}");
    assert!(!output.contains("test-key"), "{output}");
    assert!(!output.contains("ANTHROPIC"), "{output}");
}

/// Sandboxed commands start through `agentd __sandbox-enter`, not a fork of
/// the server: the limits and the per-command cgroup must still bind them,
/// and a descriptor the server inherited must not reach them.
#[tokio::test]
async fn a_command_runs_inside_its_limits_and_gets_no_inherited_descriptor() {
    let probe = "ulimit -t; ulimit -n; ulimit -c; ulimit -Hn; ulimit -u; \
                 ls /proc/self/fd | tr '\\n' ' '";
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [
            {"when": {"last_user_contains": "probe"}, "content": [
                {"type": "tool_use", "name": "Bash", "input": {"command": probe}}
            ]},
            {"content": [{"type": "text", "text": "ok"}]}
        ]}),
    )
    .await;
    // The server starts with descriptor 9 open and inheritable.
    let agentd = h.command(&[
        "run",
        "--output-format",
        "stream-json",
        "--permission-mode",
        "bypass",
        "probe",
    ]);
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c")
        .arg("exec 9</dev/null; exec \"$0\" \"$@\"")
        .arg(agentd.get_program())
        .args(agentd.get_args())
        .env_clear()
        .envs(agentd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .current_dir(h.ws())
        .stdin(std::process::Stdio::null());
    let output = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let run = run_harness::Run::from_output(output);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let output = first_tool_output(&run);
    let lines: Vec<&str> = output.lines().collect();
    // The default limits: 300 s of CPU, 1024 files (soft = hard), no core
    // dumps, 512 processes. Run as root, the command is the agent's uid, whose
    // process limit is its cgroup's `pids.max` (RLIMIT_NPROC would count all
    // of that user's sessions together).
    assert_eq!(lines[..4], ["300", "1024", "0", "1024"], "{output}");
    let fds: Vec<&str> = lines[5].split_whitespace().collect();
    assert!(!fds.contains(&"9"), "inherited descriptor leaked: {output}");
    // (Its cgroup, joined before the switch to that uid, is behind the
    // sandbox's cgroup namespace: the sandbox tests check `pids.max`.)
    if !rustix::process::geteuid().is_root() {
        assert_eq!(lines[4], "512", "{output}");
    }
}

/// What the run's first finished tool call printed.
fn first_tool_output(run: &run_harness::Run) -> String {
    run.events
        .iter()
        .find_map(|e| match &e.event {
            Event::ToolFinished { output, .. } => Some(output.clone()),
            _ => None,
        })
        .expect("no tool.finished")
}

/// A one-shot run starts its sandbox while its first model call runs, so the
/// first `Bash` finds it set up: the command runs in the serving sandbox
/// (PID 1 is agentd's server) rather than one bubblewrap started for it.
#[tokio::test]
async fn a_runs_first_command_uses_the_sandbox_started_beside_its_first_model_call() {
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [
            {"content": [{"type": "tool_use", "name": "Bash",
                "input": {"command": "tr '\\0' ' ' < /proc/1/cmdline"}}]},
            {"content": [{"type": "text", "text": "done"}]}
        ]}),
    )
    .await;
    let run = h.run("what is pid 1", &[]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let output = run
        .events
        .iter()
        .find_map(|e| match &e.event {
            Event::ToolFinished { output, .. } => Some(output.clone()),
            _ => None,
        })
        .expect("the command ran");
    assert!(
        output.contains("__sandbox-serve"),
        "the first command started its own sandbox: {output}"
    );
}
