//! MCP servers from `agentd.toml` in a real `agentd serve`: the npm
//! `server-everything` started in the session's sandbox on its first turn, its
//! tools offered to the model as `mcp__everything__*`, and a call answered.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use std::path::{Path, PathBuf};

use serde_json::json;
use serve_harness::Harness;

pub(crate) fn tools_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.tools")
        .canonicalize()
        .expect(".tools is missing: run `bash scripts/install-deps.sh`");
    let entry = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.is_file(),
        "{} is missing: run `bash scripts/install-deps.sh`",
        entry.display()
    );
    dir
}

/// The `[[mcp_servers]]` table of the npm `server-everything` as `everything`.
pub(crate) fn everything_server_toml() -> String {
    let tools = tools_dir();
    format!(
        "[[mcp_servers]]\nname = \"everything\"\ncommand = \"node\"\n\
         args = [\"{entry}\"]\nread_only_paths = [\"{tools}\"]\nstartup_timeout_s = 60\n",
        entry = tools
            .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
            .display(),
        tools = tools.display()
    )
}

#[tokio::test]
async fn an_mcp_tool_is_offered_and_called_through_the_api() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "echo"}, "content": [
            {"type": "tool_use", "id": "mcp_call", "name": "mcp__everything__echo",
             "input": {"message": "hello through MCP"}}]},
        {"when": {"last_tool_name": "mcp__everything__echo"}, "content": [
            {"type": "text", "text": "the server echoed"}]}
    ]});
    let toml = format!(
        "[server]\nauth = \"none\"\n[profiles.default]\nallow = [\"mcp__everything__*\"]\n{}",
        everything_server_toml()
    );
    let h = Harness::new(script, &toml).await;
    let server = h.start().await;
    let session = server.session().await;
    server.message(&session, "echo something").await;
    let finished = server.wait_idle(&session).await;
    assert_eq!(finished["status"], "idle");

    let events = server.all_events(&session).await;
    let done = events
        .iter()
        .find(|e| e.event == "tool.finished" && e.data["call_id"] == "mcp_call")
        .unwrap_or_else(|| panic!("{:#?}", events.iter().map(|e| &e.event).collect::<Vec<_>>()));
    assert_eq!(done.data["is_error"], false, "{:?}", done.data);
    assert!(
        done.data["output"]
            .as_str()
            .unwrap()
            .contains("hello through MCP"),
        "{:?}",
        done.data
    );
    assert_eq!(events.last().unwrap().data["status"], "completed");

    // The model saw the server's tools with their schemas.
    let first = &h.model_requests()[0].body;
    let echo = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__everything__echo")
        .unwrap_or_else(|| panic!("{}", first["tools"]));
    assert!(
        echo["input_schema"]["properties"]["message"].is_object(),
        "{echo}"
    );
}
