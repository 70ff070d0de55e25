//! Fidelity with the real Claude Code CLI: `claude -p` against the scripted
//! server must run a tool, send its result back and finish with the scripted text.
//!
//! `make test` installs the CLI into `<workspace>/.tools`; `AGENTD_CLAUDE_BIN`
//! overrides where it is looked up.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use agentd_testkit::{ModelServer, RecordedRequest, Script};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(120);
const FILE_CONTENT: &str = "fidelity-content-42";
const FINAL_TEXT: &str = "FIDELITY-DONE: the file is written and reads fidelity-content-42.";

fn claude_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("AGENTD_CLAUDE_BIN") {
        let bin = PathBuf::from(bin);
        assert!(
            bin.exists(),
            "AGENTD_CLAUDE_BIN={} does not exist; `make test` installs the CLI into .tools",
            bin.display()
        );
        return bin;
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let local = workspace.join(".tools/node_modules/.bin/claude");
    if local.exists() {
        return local;
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("claude"))
            .find(|candidate| candidate.is_file())
    });
    on_path.unwrap_or_else(|| {
        panic!(
            "the `claude` CLI was not found (AGENTD_CLAUDE_BIN, {}, PATH); \
             `make test` installs it with `npm install --prefix .tools @anthropic-ai/claude-code`",
            local.display()
        )
    })
}

fn script(work: &Path) -> Script {
    let file = work.join("fidelity.txt");
    serde_json::from_value(json!({"replies": [
        // A rate limit first: the CLI must understand the error and retry.
        {"when": {"last_user_contains": "FIDELITY-TASK"},
         "fault": {"kind": "http", "status": 429, "retry_after_s": 1}},
        // The task: write a file with the Write tool…
        {"when": {"last_user_contains": "FIDELITY-TASK"},
         "content": [
            {"type": "thinking", "thinking": "The user wants a file written, then shown."},
            {"type": "text", "text": "I'll write the file now."},
            {"type": "tool_use", "name": "Write",
             "input": {"file_path": file, "content": format!("{FILE_CONTENT}\n")}}
         ]},
        // …then read it back with Bash…
        {"when": {"last_tool_name": "Write"},
         "content": [
            {"type": "tool_use", "name": "Bash",
             "input": {"command": "cat fidelity.txt", "description": "Show the file"}}
         ]},
        // …and finish once the result shows the content.
        {"when": {"last_tool_result_contains": FILE_CONTENT},
         "content": [{"type": "text", "text": FINAL_TEXT}]},
        // Side requests the CLI makes on its own (titles, topic checks, …).
        {"repeat": true, "content": [{"type": "text", "text": "{\"isNewTopic\": false, \"title\": \"Fidelity\"}"}]}
    ]}))
    .unwrap()
}

/// A short listing of the requests; the full ones go to a file for debugging.
fn dump(requests: &[RecordedRequest]) -> String {
    let file = std::env::temp_dir().join("agentd-claude-fidelity-requests.json");
    let saved = std::fs::write(&file, serde_json::to_vec_pretty(requests).unwrap()).map_or_else(
        |e| format!("(could not save requests: {e})"),
        |()| format!("(all saved to {})", file.display()),
    );
    let listing = requests
        .iter()
        .map(|r| {
            let body = r.body.to_string();
            let tail: String = body
                .chars()
                .rev()
                .take(1500)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            format!("{} {} …{}", r.method, r.path, tail)
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    format!("{listing}\n{saved}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_cli_runs_a_tool_against_the_scripted_server() {
    let claude = claude_binary();
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let work_path = work.path().canonicalize().unwrap();
    let server = ModelServer::start(script(&work_path)).await.unwrap();

    let started = Instant::now();
    let mut command = tokio::process::Command::new(&claude);
    command
        .args([
            "-p",
            "FIDELITY-TASK: write fidelity.txt, then show it.",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
        ])
        .current_dir(&work_path)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("CLAUDE_CONFIG_DIR", home.path().join(".claude"))
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", "test")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("IS_SANDBOX", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(TIMEOUT, command.output())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "claude did not finish within {TIMEOUT:?}; requests:\n{}",
                dump(&server.requests())
            )
        })
        .unwrap();
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let requests = server.requests();
    let context = format!(
        "exit: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}\nrequests:\n{}",
        output.status,
        dump(&requests)
    );
    eprintln!(
        "claude finished in {elapsed:?} after {} requests",
        requests.len()
    );

    assert!(output.status.success(), "{context}");
    let lines: Vec<Value> = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{context}"))
        })
        .collect();
    let result = lines
        .iter()
        .find(|l| l["type"] == "result")
        .unwrap_or_else(|| panic!("no result line\n{context}"));
    assert_eq!(result["is_error"], false, "{context}");
    assert_eq!(result["result"], FINAL_TEXT, "{context}");

    let tool_calls: Vec<String> = lines
        .iter()
        .filter(|l| l["type"] == "assistant")
        .flat_map(|l| {
            l["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|b| b["type"] == "tool_use")
        .filter_map(|b| b["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(tool_calls, ["Write", "Bash"], "{context}");

    let written = std::fs::read_to_string(work_path.join("fidelity.txt"))
        .unwrap_or_else(|e| panic!("fidelity.txt was not written ({e})\n{context}"));
    assert_eq!(written.trim(), FILE_CONTENT);

    let messages: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| r.path == "/v1/messages")
        .collect();
    // The rate-limited attempt, its retry, and the two calls after tool results.
    assert!(messages.len() >= 4, "{context}");
    let with_result = messages
        .iter()
        .filter(|r| r.body_text().contains("\"tool_result\""))
        .count();
    assert!(
        with_result >= 2,
        "both tool results go back to the model\n{context}"
    );
    assert!(
        messages
            .iter()
            .any(|r| r.body_text().contains(FILE_CONTENT) && r.body["stream"] == true),
        "{context}"
    );
    server.shutdown().await;
}
