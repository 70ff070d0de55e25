//! The TypeScript Agent SDK (`@anthropic-ai/claude-agent-sdk`, installed into
//! `.tools/` by scripts/install-deps.sh) with agentd as its CLI: `query()`
//! with `pathToClaudeCodeExecutable` set to a link named `claude` to the
//! agentd binary does one turn with a tool call (issue 26).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use agentd_store::SessionStore;
use serde_json::{Value, json};

use crate::run_harness::{Harness, Wire};

/// The SDK's entry point; a missing SDK fails the test (never skips it).
fn sdk_entry() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let entry = repo.join(".tools/node_modules/@anthropic-ai/claude-agent-sdk/sdk.mjs");
    assert!(
        entry.is_file(),
        "the TypeScript Agent SDK is not installed at {}: run scripts/install-deps.sh",
        entry.display()
    );
    entry
}

/// On "write the note": Bash writes a file; then a closing answer.
fn script() -> Value {
    json!({"replies": [
        {"when": {"last_user_contains": "write the note"}, "content": [
            {"type": "text", "text": "Writing it."},
            {"type": "tool_use", "name": "Bash", "input": {
                "command": "printf 'from the ts sdk\\n' > note.txt && echo WROTE-NOTE"}}]},
        {"when": {"last_tool_result_contains": "WROTE-NOTE"}, "content": [
            {"type": "text", "text": "The note is written."}]}
    ]})
}

/// `node ts_query.mjs` in the clean environment the harness gives agentd
/// (the SDK passes it on), with the SDK pointed at `claude`; the SDK
/// messages it printed.
async fn ts_query(h: &Harness, claude: &Path, prompt: &str) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/agent_sdk/ts_query.mjs");
    let mut node = h.program(Path::new("node"));
    node.arg(script)
        .env("AGENT_SDK_TS", sdk_entry())
        .env("AGENTD_CLAUDE", claude)
        .env("PROMPT", prompt)
        .env("CWD", h.ws());
    // Off the runtime's thread: the model server answers on it.
    let output = tokio::task::spawn_blocking(move || node.output())
        .await
        .unwrap()
        .expect("node (on PATH) runs the SDK script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the SDK script failed ({}): {stderr}\nstdout: {stdout}",
        output.status
    );
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

#[tokio::test]
async fn ts_sdk_query_runs_a_turn_with_a_tool_through_agentd() {
    let h = Harness::new(Wire::Anthropic, script()).await;
    // The SDK starts whatever it is given; agentd knows its CLI role by name.
    let bin = tempfile::tempdir().unwrap();
    let claude = bin.path().join("claude");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_agentd"), &claude).unwrap();

    let messages = ts_query(&h, &claude, "write the note").await;
    let kinds: Vec<(&str, &str)> = messages
        .iter()
        .map(|m| {
            let kind = m["type"].as_str().unwrap_or("?");
            (kind, m["subtype"].as_str().unwrap_or(""))
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("system", "init"),
            ("assistant", ""),
            ("user", ""),
            ("assistant", ""),
            ("result", "success")
        ],
        "{messages:#?}"
    );
    let session_id = messages[0]["session_id"].as_str().unwrap().to_string();
    let call = &messages[1]["message"]["content"][1];
    assert_eq!(call["type"], "tool_use", "{call}");
    assert_eq!(call["name"], "Bash", "{call}");
    let result = &messages[2]["message"]["content"][0];
    assert_eq!(result["type"], "tool_result", "{result}");
    assert_eq!(result["tool_use_id"], call["id"], "{result}");
    assert_eq!(result["is_error"], false, "{result}");
    assert!(
        result["content"].to_string().contains("WROTE-NOTE"),
        "{result}"
    );
    let done = &messages[4];
    assert_eq!(done["is_error"], false, "{done}");
    assert_eq!(done["result"], "The note is written.", "{done}");
    assert_eq!(done["session_id"], session_id.as_str(), "{done}");
    assert!(
        messages
            .iter()
            .all(|m| m["session_id"] == session_id.as_str())
    );

    // The tool ran in the SDK's cwd: the harness workspace.
    assert_eq!(
        std::fs::read_to_string(h.ws().join("note.txt")).unwrap(),
        "from the ts sdk\n"
    );

    // The turn is an agentd session in the store, under the same id.
    let stored = h
        .store()
        .await
        .get_session(&session_id)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("session {session_id} is not in the store"));
    assert_eq!(stored.turns, 1);
    assert_eq!(
        Path::new(&stored.workspace).canonicalize().unwrap(),
        h.ws().canonicalize().unwrap()
    );

    // The tool's result reached the model in the turn's second request.
    let requests = h.model_requests();
    assert_eq!(requests.len(), 2, "one call with a tool, one to close");
    let second = requests[1].body.to_string();
    assert!(second.contains("tool_result"), "{second}");
    assert!(second.contains("WROTE-NOTE"), "{second}");
}
