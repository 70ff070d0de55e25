//! `agentd acp` driven by the real ACP client (`@agentclientprotocol/sdk`,
//! installed into `.tools/` by scripts/install-deps.sh): initialize, a new
//! session on the editor's directory, a prompt that edits a file and runs
//! Bash (each allowed once by the editor), one whose write the editor
//! rejects, one cancelled mid-command, the `plan` mode set (a write tried
//! under it is refused) and another model chosen (the next model request
//! names it), and the session loaded again by a second connection (issue
//! 27).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::run_harness::{Harness, Wire, request_text};

/// A second model to switch to (the first is the environment's default).
const MODELS: &str = "[models.haiku]\nprovider = \"anthropic\"\nmodel = \"claude-haiku-4-5\"\nbase_url = \"{URL}\"\n";

/// The SDK's entry point; a missing SDK fails the test (never skips it).
fn sdk_entry() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let entry = repo.join(".tools/node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js");
    assert!(
        entry.is_file(),
        "the ACP SDK is not installed at {}: run scripts/install-deps.sh",
        entry.display()
    );
    entry
}

fn script(ws: &Path) -> Value {
    let hello = ws.join("hello.txt").display().to_string();
    let secret = ws.join("secret.txt").display().to_string();
    let plan = ws.join("plan.txt").display().to_string();
    json!({"replies": [
        {"when": {"last_tool_name": "Edit"}, "content": [
            {"type": "tool_use", "name": "Bash", "input": {
                "command": "cat hello.txt && echo RAN-BASH"}}]},
        {"when": {"last_tool_result_contains": "RAN-BASH"}, "content": [
            {"type": "text", "text": "Edited and ran."}]},
        {"when": {"last_tool_name": "Write"}, "repeat": true, "content": [
            {"type": "text", "text": "Not written."}]},
        {"when": {"last_user_contains": "edit and run"}, "content": [
            {"type": "thinking", "thinking": "Change the greeting first."},
            {"type": "text", "text": "Editing."},
            {"type": "tool_use", "name": "Edit", "input": {
                "file_path": hello, "old_string": "hello", "new_string": "goodbye"}}]},
        {"when": {"last_user_contains": "write the secret"}, "content": [
            {"type": "tool_use", "name": "Write", "input": {
                "file_path": secret, "content": "s3cret\n"}}]},
        {"when": {"last_user_contains": "sleep now"}, "content": [
            {"type": "tool_use", "name": "Bash", "input": {"command": "sleep 30"}}]},
        {"when": {"last_user_contains": "plan the note"}, "content": [
            {"type": "tool_use", "name": "Write", "input": {
                "file_path": plan, "content": "planned\n"}}]},
        {"when": {"last_user_contains": "which model"}, "content": [
            {"type": "text", "text": "Switched."}]},
        {"when": {"last_tool_name": "AskUserQuestion"}, "content": [
            {"type": "text", "text": "Noted the colour."}]},
        {"when": {"last_user_contains": "ask me"}, "content": [
            {"type": "tool_use", "name": "AskUserQuestion", "input": {"questions": [{
                "question": "Which colour?", "header": "Colour", "multiSelect": false,
                "options": [{"label": "Blue", "description": "calm"},
                            {"label": "Red", "description": "bold"}]}]}}]}
    ]})
}

/// `node driver.mjs` with the harness's clean environment (agentd, started
/// by the client, inherits it); the lines it printed.
async fn drive(h: &Harness, answers: &str) -> Vec<Value> {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/acp/driver.mjs");
    let mut node = h.program(Path::new("node"));
    node.arg(driver)
        .env("ACP_SDK", sdk_entry())
        .env("AGENTD", env!("CARGO_BIN_EXE_agentd"))
        .env("ANSWERS", answers)
        .env("MODEL", "haiku")
        .env("CWD", h.ws());
    let output = tokio::task::spawn_blocking(move || node.output())
        .await
        .unwrap()
        .expect("node (on PATH) runs the ACP driver");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the ACP driver failed ({}): {stderr}\nstdout: {stdout}",
        output.status
    );
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

fn of<'a>(lines: &'a [Value], kind: &str, phase: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["kind"] == kind && (phase.is_empty() || l["phase"] == phase))
        .collect()
}

/// The session updates of one phase, by `sessionUpdate` kind.
fn updates<'a>(lines: &'a [Value], phase: &str, kind: &str) -> Vec<&'a Value> {
    of(lines, "update", phase)
        .into_iter()
        .map(|l| &l["update"])
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

#[tokio::test]
async fn an_editor_drives_agentd_over_acp() {
    let workspace = tempfile::tempdir().unwrap();
    let mut h = Harness::new(Wire::Anthropic, script(workspace.path()))
        .await
        .with_config(MODELS);
    h.workspace = workspace;
    std::fs::write(h.ws().join("hello.txt"), "hello world\n").unwrap();

    let lines = drive(&h, "allow_once,allow_once,reject_once,allow_once,answer_1").await;
    let all = serde_json::to_string_pretty(&lines).unwrap();

    // initialize: loadSession, images and embedded context, no sign-in.
    let init = &of(&lines, "initialize", "")[0]["result"];
    assert_eq!(init["agentCapabilities"]["loadSession"], true, "{init}");
    let prompts = &init["agentCapabilities"]["promptCapabilities"];
    assert_eq!(prompts["image"], true, "{init}");
    assert_eq!(prompts["embeddedContext"], true, "{init}");
    assert_eq!(init["authMethods"], json!([]), "{init}");
    let created = &of(&lines, "new", "")[0]["result"];
    let session_id = created["sessionId"].as_str().unwrap().to_string();
    // The default profile's mode and the stricter ones; the models.
    assert_eq!(created["modes"]["currentModeId"], "default", "{created}");
    let mode_ids: Vec<&Value> = created["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["id"])
        .collect();
    assert_eq!(mode_ids, ["default", "dontAsk", "plan"], "{created}");
    let model = &created["configOptions"][0];
    assert_eq!(model["category"], "model", "{model}");
    assert!(model.to_string().contains("\"haiku\""), "{model}");
    assert_ne!(model["currentValue"], "haiku", "{model}");

    // The edit prompt: thought, text, the Edit call (kind, location, diff)
    // and the Bash call, each asked and allowed once; the file changed.
    let thoughts = updates(&lines, "edit", "agent_thought_chunk");
    assert_eq!(
        thoughts[0]["content"]["text"], "Change the greeting first.",
        "{all}"
    );
    let text: String = updates(&lines, "edit", "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "Editing.Edited and ran.", "{all}");
    let calls = updates(&lines, "edit", "tool_call");
    assert_eq!(calls.len(), 2, "{all}");
    let (edit, bash) = (calls[0], calls[1]);
    assert_eq!(edit["kind"], "edit", "{edit}");
    let hello = h.ws().join("hello.txt").display().to_string();
    assert_eq!(edit["locations"][0]["path"], hello.as_str(), "{edit}");
    assert_eq!(
        edit["content"][0],
        json!({"type": "diff", "path": hello, "oldText": "hello", "newText": "goodbye"}),
        "{edit}"
    );
    assert_eq!(bash["kind"], "execute", "{bash}");
    let asked = of(&lines, "permission", "edit");
    assert_eq!(asked.len(), 2, "{all}");
    assert_eq!(
        asked[0]["request"]["toolCall"]["toolCallId"],
        edit["toolCallId"]
    );
    let kinds: Vec<&Value> = asked[0]["request"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| &o["kind"])
        .collect();
    assert_eq!(kinds, ["allow_once", "allow_always", "reject_once"]);
    let finished = updates(&lines, "edit", "tool_call_update");
    let bash_done = finished
        .iter()
        .find(|u| u["toolCallId"] == bash["toolCallId"] && u["status"] == "completed")
        .unwrap_or_else(|| panic!("no completed Bash: {all}"));
    assert!(
        bash_done.to_string().contains("goodbye world"),
        "{bash_done}"
    );
    assert_eq!(
        of(&lines, "stop", "edit")[0]["result"]["stopReason"],
        "end_turn"
    );
    assert_eq!(
        std::fs::read_to_string(h.ws().join("hello.txt")).unwrap(),
        "goodbye world\n"
    );

    // The rejected write: asked, refused, not written, the call failed.
    let asked = of(&lines, "permission", "reject");
    assert_eq!(asked.len(), 1, "{all}");
    assert_eq!(asked[0]["request"]["toolCall"]["kind"], "edit");
    assert!(!h.ws().join("secret.txt").exists());
    assert_eq!(
        of(&lines, "stop", "reject")[0]["result"]["stopReason"],
        "end_turn"
    );

    // The cancelled command: the turn ends `cancelled`, long before 30 s.
    assert_eq!(
        of(&lines, "stop", "cancel")[0]["result"]["stopReason"],
        "cancelled",
        "{all}"
    );
    let stored = h.store().await;
    let session = agentd_store::SessionStore::get_session(&stored, &session_id)
        .await
        .unwrap()
        .expect("the session is in agentd's store");
    assert_eq!(session.turns, 6);

    plan_and_model_phases(&h, &lines, &all);

    // The question was asked with its own options; the chosen one reached
    // the model as the answer.
    let asked = of(&lines, "permission", "question");
    assert_eq!(asked.len(), 1, "{all}");
    let options = asked[0]["request"]["options"].to_string();
    assert!(
        options.contains("Blue") && options.contains("Red"),
        "{options}"
    );
    assert_eq!(asked[0]["request"]["toolCall"]["title"], "Which colour?");
    let request = h.model_requests().last().unwrap().body.clone();
    let last = request["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let answer = last["content"][0]["content"].to_string();
    assert!(
        answer.contains("Red") && !answer.contains("Blue"),
        "{answer}"
    );
    assert_eq!(
        of(&lines, "stop", "question")[0]["result"]["stopReason"],
        "end_turn"
    );

    // Loading it again replays the history: the prompts and the calls.
    let replayed: Vec<&Value> = of(&lines, "update", "load")
        .into_iter()
        .map(|l| &l["update"])
        .collect();
    let user: Vec<&str> = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(
        user,
        [
            "edit and run",
            "write the secret",
            "sleep now",
            "plan the note",
            "which model",
            "ask me"
        ],
        "{all}"
    );
    let replayed_edit = replayed
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == edit["toolCallId"])
        .unwrap_or_else(|| panic!("the Edit call is not replayed: {all}"));
    assert_eq!(replayed_edit["content"], edit["content"]);
    // A new process starts from the profile's mode; the model is stored.
    let loaded = &of(&lines, "loaded", "")[0]["result"];
    assert_eq!(loaded["modes"]["currentModeId"], "default", "{loaded}");
    assert_eq!(loaded["configOptions"][0]["currentValue"], "haiku");
    for exit in of(&lines, "exit", "") {
        assert_eq!(exit["code"], 0, "{all}");
    }
}

/// `plan` (read only): a looser mode refused, the mode announced, the write
/// neither offered nor done, nothing asked. Then the chosen model names the
/// next model request.
fn plan_and_model_phases(h: &Harness, lines: &[Value], all: &str) {
    let looser = of(lines, "looser", "plan")[0]["error"].to_string();
    assert!(looser.contains("looser"), "{looser}");
    let announced = updates(lines, "plan", "current_mode_update");
    assert_eq!(announced[0]["currentModeId"], "plan", "{all}");
    assert!(of(lines, "permission", "plan").is_empty(), "{all}");
    assert!(!h.ws().join("plan.txt").exists(), "written under plan");
    assert_eq!(
        of(lines, "stop", "plan")[0]["result"]["stopReason"],
        "end_turn"
    );
    let requests = h.model_requests();
    let planned = requests
        .iter()
        .find(|r| request_text(r).contains("plan the note"))
        .expect("the plan prompt reached the model");
    let tools = planned.body["tools"].to_string();
    assert!(
        !tools.contains("\"Write\""),
        "Write offered under plan: {tools}"
    );
    assert!(tools.contains("\"Read\""), "{tools}");

    let chosen = &of(lines, "set_model", "model")[0]["result"];
    assert_eq!(
        chosen["configOptions"][0]["currentValue"], "haiku",
        "{chosen}"
    );
    let last = requests.last().unwrap();
    assert!(request_text(last).contains("which model"));
    assert_eq!(last.body["model"], "claude-haiku-4-5");
    assert_ne!(planned.body["model"], "claude-haiku-4-5");
}
