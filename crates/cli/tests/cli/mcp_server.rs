//! agentd as an MCP server, driven by the rmcp client: `agentd mcp` on
//! stdio (this machine's store, and bridged to a server with `--server`)
//! and `/mcp` on `agentd serve` with a token. The scripted model writes a
//! file with the Write tool; the results name it, the resources read it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, NumberOrString, ProgressNotificationParam, ProgressToken,
    ReadResourceRequestParams, RequestMetaObject, ResourceContents,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::serve_harness::{Harness, WAIT};

const OPEN: &str = "[profiles.default]\nmode = \"bypass\"\n";
const WITH_TOKENS: &str = "[server]\nauth = \"token\"\n[profiles.default]\nmode = \"accept_edits\"\n\
     [profiles.yolo]\nmode = \"bypass\"\n";

fn script() -> Value {
    let text = |t: &str| json!({"type": "text", "text": t});
    json!({"replies": [
        {"repeat": true, "when": {"last_user_contains": "note"}, "content": [
            text("Writing the note."),
            {"type": "tool_use", "id": "toolu_write_note", "name": "Write",
             "input": {"file_path": "notes.txt", "content": "written through MCP\n"}}]},
        {"repeat": true, "when": {"last_tool_name": "Write"},
         "content": [text("The note is written.")]},
        {"repeat": true, "content": [text("ok")]}
    ]})
}

/// An MCP client that keeps the progress messages it is sent.
#[derive(Clone, Default)]
struct Client {
    progress: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let message = params.message.unwrap_or_default();
        self.progress.lock().unwrap().push(message);
    }
}

type Connected = RunningService<RoleClient, Client>;

/// Call `tool` with a progress token; its structured result.
async fn call(client: &Connected, tool: &'static str, args: Value) -> Value {
    let mut params =
        CallToolRequestParams::new(tool).with_arguments(args.as_object().unwrap().clone());
    let token = ProgressToken(NumberOrString::String(format!("{tool}-progress").into()));
    params.meta = Some(RequestMetaObject::with_progress_token(token));
    let result = tokio::time::timeout(WAIT, client.call_tool(params))
        .await
        .expect("the tool call took too long")
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{tool}: {result:?}");
    result.structured_content.expect("a structured result")
}

async fn read(client: &Connected, uri: String) -> String {
    let read = client
        .read_resource(ReadResourceRequestParams::new(uri.clone()))
        .await
        .unwrap_or_else(|err| panic!("{uri}: {err}"));
    match &read.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("{uri}: {other:?}"),
    }
}

/// A turn's result as a user reads it: done, its answer, the file it wrote.
fn assert_wrote_the_note(result: &Value) {
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["text"], "The note is written.", "{result}");
    assert_eq!(result["changed_files"], json!(["notes.txt"]), "{result}");
    assert!(result["usage"]["output_tokens"].is_u64(), "{result}");
    assert!(result["cost_usd"].is_number(), "{result}");
}

/// Everything a client does on one connection: tools listed, a session
/// made and messaged, its transcript and file read, a one-call run.
async fn exercise(client: &Connected, progress: &Arc<Mutex<Vec<String>>>) {
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "answer_approval",
            "cancel",
            "create_session",
            "get_session",
            "list_sessions",
            "run",
            "send_message"
        ]
    );
    let templates = client.list_all_resource_templates().await.unwrap();
    let templates: Vec<_> = templates.iter().map(|t| t.uri_template.clone()).collect();
    assert!(templates.contains(&"agentd://sessions/{id}/files/{path}".to_string()));

    let session = call(client, "create_session", json!({"title": "via MCP"})).await;
    let id = session["id"].as_str().unwrap().to_string();
    let result = call(
        client,
        "send_message",
        json!({"session_id": id, "text": "write the note"}),
    )
    .await;
    assert_wrote_the_note(&result);
    let seen = progress.lock().unwrap().clone();
    assert!(seen.iter().any(|m| m == "tool: Write"), "{seen:?}");
    assert!(
        seen.iter().any(|m| m.contains("Writing the note")),
        "{seen:?}"
    );

    let transcript = read(client, format!("agentd://sessions/{id}/transcript")).await;
    let transcript: Value = serde_json::from_str(&transcript).unwrap();
    let roles: Vec<_> = transcript
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message"]["role"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert!(transcript.to_string().contains("toolu_write_note"));
    let file = read(client, format!("agentd://sessions/{id}/files/notes.txt")).await;
    assert_eq!(file, "written through MCP\n");
    // Outside the workspace: refused by the files API's own checks.
    let outside = client
        .read_resource(ReadResourceRequestParams::new(format!(
            "agentd://sessions/{id}/files/..%2F..%2Fagentd.toml"
        )))
        .await;
    assert!(outside.is_err(), "{outside:?}");

    let shown = call(client, "get_session", json!({"session_id": id})).await;
    assert_eq!(shown["status"], "idle");
    assert_eq!(shown["title"], "via MCP");
    assert_eq!(shown["transcript"][3]["text"], "The note is written.");

    let ran = call(client, "run", json!({"prompt": "another note please"})).await;
    assert_wrote_the_note(&ran);
    assert_ne!(ran["session_id"], id.as_str());
    let listed = call(client, "list_sessions", json!({})).await;
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 2, "{listed}");
}

/// `agentd ARGS` on stdio, as an MCP client starts it.
async fn stdio_client(h: &Harness, args: &[&str], env: &[(&str, &str)]) -> (Connected, Client) {
    let mut command = h.command(args);
    command.stdin(Stdio::piped()).stdout(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().unwrap();
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    // The child lives as long as the test's connection.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    let handler = Client::default();
    let client = handler.clone().serve((stdout, stdin)).await.unwrap();
    (client, handler)
}

#[tokio::test]
async fn agentd_mcp_on_stdio_runs_sessions_of_the_local_store() {
    let h = Harness::new(script(), OPEN).await;
    let (client, handler) = stdio_client(&h, &["mcp"], &[]).await;
    exercise(&client, &handler.progress).await;
    client.cancel().await.unwrap();
    // The sessions are the store's, as `agentd sessions ls` shows.
    let (code, stdout, stderr) = h.cli(&["sessions", "ls"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("via MCP"), "{stdout}");
}

#[tokio::test]
async fn serve_mcp_over_http_needs_a_token() {
    let h = Harness::new(script(), WITH_TOKENS).await;
    let token = h.token("alice").await;
    let server = h.start().await;
    let url = format!("{}/mcp", server.url);
    // rmcp's HTTP client uses rustls without a built-in provider.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"}}});
    for auth in [
        None,
        Some("Bearer agentd_0000000000000000000000000000000000000000000000000000000000000000"),
    ] {
        let mut request = h
            .client
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{auth:?}");
    }

    let config = StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header(&token);
    let handler = Client::default();
    let client = handler
        .clone()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap();
    exercise(&client, &handler.progress).await;

    // The caller's grants hold: a bypass profile is admin-only.
    let mut params = CallToolRequestParams::new("create_session")
        .with_arguments(json!({"profile": "yolo"}).as_object().unwrap().clone());
    params.meta = None;
    let refused = client.call_tool(params).await.unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert!(
        format!("{:?}", refused.content).contains("may not use the profile"),
        "{refused:?}"
    );
    client.cancel().await.unwrap();

    // Another user sees none of alice's sessions.
    let bob = h.token("bob").await;
    let config = StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header(&bob);
    let client = Client::default()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap();
    let listed = call(&client, "list_sessions", json!({})).await;
    assert_eq!(listed["sessions"], json!([]), "{listed}");
    client.cancel().await.unwrap();

    // `agentd mcp --server` is the same server's tools on stdio.
    let (client, handler) = stdio_client(
        &h,
        &["mcp", "--server", &server.url],
        &[("AGENTD_TOKEN", &token)],
    )
    .await;
    let ran = call(&client, "run", json!({"prompt": "a third note"})).await;
    assert_wrote_the_note(&ran);
    assert!(!handler.progress.lock().unwrap().is_empty());
    let listed = call(&client, "list_sessions", json!({})).await;
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 3, "{listed}");
    client.cancel().await.unwrap();
}
