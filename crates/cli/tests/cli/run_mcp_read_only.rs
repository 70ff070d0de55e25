//! MCP tools in a `read_only` profile, with the npm `server-everything`
//! started in the real sandbox by `agentd run`: a tool the operator marks
//! read-only (`read_only_tools`, or the server's `readOnlyHint` under
//! `trust_annotations`) and an allow rule names is offered and runs; a
//! mutating one is neither offered nor run. In `default` mode a marked tool
//! runs without asking and the others ask.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_protocol::Event;
use serde_json::json;

use crate::run_harness::{Harness, Run, Wire};
use crate::serve_mcp::everything_server_toml;

/// `[profiles.default]` in `read_only` mode allowing every tool of the
/// `everything` server, plus `marks` in its `[[mcp_servers]]` table.
fn config(marks: &str) -> String {
    format!(
        "[profiles.default]\nmode = \"read_only\"\nallow = [\"mcp__everything__*\"]\n{}{marks}\n",
        everything_server_toml()
    )
}

fn offered_mcp(h: &Harness) -> Vec<String> {
    let requests = h.model_requests();
    let mut names: Vec<String> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .filter(|name| name.starts_with("mcp__"))
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

/// `(is_error, output)` of the call's `tool.finished`.
fn finished(run: &Run, id: &str) -> (bool, String) {
    run.events
        .iter()
        .find_map(|e| match &e.event {
            Event::ToolFinished {
                call_id,
                is_error,
                output,
                ..
            } if call_id == id => Some((*is_error, output.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no tool.finished for {id}: {:?}", run.types()))
}

const ECHO: &str = "mcp__everything__echo";
/// Changes the server's state (`readOnlyHint: false`).
const TOGGLE: &str = "mcp__everything__toggle-simulated-logging";
/// `readOnlyHint: true`, but not named in `read_only_tools`.
const SUM: &str = "mcp__everything__get-sum";

#[tokio::test]
async fn a_read_only_profile_offers_and_runs_only_the_marked_mcp_tools() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "echo"}, "content": [
            {"type": "tool_use", "id": "call_echo", "name": ECHO,
             "input": {"message": "read-only hello"}}]},
        {"when": {"last_tool_name": ECHO}, "content": [
            {"type": "tool_use", "id": "call_toggle", "name": TOGGLE, "input": {}}]},
        {"when": {"last_tool_name": TOGGLE}, "content": [
            {"type": "text", "text": "done"}]}
    ]});
    let h = Harness::new(Wire::Anthropic, script)
        .await
        .with_config(&config("read_only_tools = [\"echo\"]"));
    let run = h.run_as_is("echo something", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);

    let offered = offered_mcp(&h);
    assert_eq!(offered, [ECHO], "only the marked tool is offered");

    let (is_error, output) = finished(&run, "call_echo");
    assert!(!is_error, "{output}");
    assert!(output.contains("Echo: read-only hello"), "{output}");
    let (is_error, output) = finished(&run, "call_toggle");
    assert!(is_error, "the mutating tool ran: {output}");
    assert!(
        output.contains("There is no tool named"),
        "not offered, so not run: {output}"
    );
}

#[tokio::test]
async fn trusted_annotations_mark_the_servers_read_only_tools() {
    let script = json!({"replies": [
        {"repeat": true, "content": [{"type": "text", "text": "ok"}]}
    ]});
    let h = Harness::new(Wire::Anthropic, script)
        .await
        .with_config(&config("trust_annotations = true"));
    let run = h.run_as_is("hi", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let offered = offered_mcp(&h);
    for tool in [ECHO, SUM] {
        assert!(offered.iter().any(|t| t == tool), "{tool}: {offered:?}");
    }
    assert!(!offered.iter().any(|t| t == TOGGLE), "{offered:?}");

    // Without the operator's word, the hints are not trusted: nothing offered.
    let h = Harness::new(
        Wire::Anthropic,
        json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "ok"}]}]}),
    )
    .await
    .with_config(&config(""));
    let run = h.run_as_is("hi", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(offered_mcp(&h).is_empty(), "{:?}", offered_mcp(&h));
}

/// `default` mode with no allow rule: the marked `echo` runs like `Read`,
/// without asking; the unmarked `get-sum` (its own `readOnlyHint` untrusted)
/// asks, and with no terminal to answer `on_no_answer` denies it.
#[tokio::test]
async fn default_mode_runs_a_marked_mcp_tool_without_asking_and_asks_for_the_others() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "echo"}, "content": [
            {"type": "tool_use", "id": "call_echo", "name": ECHO,
             "input": {"message": "default hello"}}]},
        {"when": {"last_tool_name": ECHO}, "content": [
            {"type": "tool_use", "id": "call_sum", "name": SUM,
             "input": {"a": 2, "b": 3}}]},
        {"when": {"last_tool_name": SUM}, "content": [
            {"type": "text", "text": "done"}]}
    ]});
    let config = format!(
        "[profiles.default]\nmode = \"default\"\n{}read_only_tools = [\"echo\"]\n",
        everything_server_toml()
    );
    let h = Harness::new(Wire::Anthropic, script)
        .await
        .with_config(&config);
    let run = h.run_as_is("echo something", &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);

    let asked: Vec<&str> = run
        .events
        .iter()
        .filter_map(|e| match &e.event {
            Event::PermissionRequested { tool, .. } => Some(tool.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(asked, [SUM], "only the unmarked tool asks");

    let (is_error, output) = finished(&run, "call_echo");
    assert!(!is_error, "{output}");
    assert!(output.contains("Echo: default hello"), "{output}");
    let (is_error, output) = finished(&run, "call_sum");
    assert!(
        is_error,
        "the unmarked tool ran without an answer: {output}"
    );
    assert!(output.contains("denied"), "{output}");
}
