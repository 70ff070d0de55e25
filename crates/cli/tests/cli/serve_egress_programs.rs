//! The allowlist holds every way out of a session, over the real HTTP API:
//! background commands and stdio MCP servers get the proxy Bash gets,
//! WebFetch is judged by the same list, and `network = true` is still the
//! host's network, with no proxy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use crate::serve_background::{call, start};
use crate::serve_egress::{BODY, http_server, run, toml, tool_output};
use crate::serve_harness::{Harness, Server, SseEvent, WAIT};

/// Every `network.refused` of the session: (call id, host, port).
async fn refusals(server: &Server, session: &str) -> Vec<(String, String, u64)> {
    let events = server.all_events(session).await;
    refused_in(&events)
}

fn refused_in(events: &[SseEvent]) -> Vec<(String, String, u64)> {
    events
        .iter()
        .filter(|e| e.event == "network.refused")
        .map(|e| {
            let text = |key: &str| e.data[key].as_str().unwrap().to_string();
            (
                text("call_id"),
                text("host"),
                e.data["port"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_background_command_gets_the_proxy() {
    let port = http_server(None);
    let network = format!("{{ allow = [\"localhost:{port}\"] }}");
    let h = Harness::new(json!({"replies": []}), &toml(&network)).await;
    let server = h.start().await;
    let session = server.session().await;
    let command = format!(
        "curl -fsS http://localhost:{port}/ && echo ' bg-ok'; \
         curl -fsS http://127.0.0.1:{port}/ || echo bg-refused"
    );
    let id = start(&h, &server, &session, &command).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    // BashOutput returns only what is new since the last call: keep it all.
    let mut output = String::new();
    loop {
        let finished = call(&h, &server, &session, "BashOutput", json!({"bash_id": id})).await;
        output.push_str(finished["output"].as_str().unwrap());
        if output.contains("bg-refused") || tokio::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(output.contains(&format!("{BODY} bg-ok")), "{output}");
    assert!(output.contains("bg-refused"), "{output}");
    let refused = refusals(&server, &session).await;
    assert!(
        refused
            .iter()
            .any(|(_, host, p)| host == "127.0.0.1" && *p == u64::from(port)),
        "{refused:?}"
    );
}

/// A stdio MCP server with one tool, `fetch`, which GETs a URL with
/// Python's urllib (which follows `http_proxy`) and returns the body.
const PROBE: &str = r#"import json, sys, urllib.request
def reply(id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id, "result": result}) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        reply(msg["id"], {"protocolVersion": msg["params"]["protocolVersion"],
                          "capabilities": {"tools": {}},
                          "serverInfo": {"name": "probe", "version": "1"}})
    elif method == "tools/list":
        schema = {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}
        reply(msg["id"], {"tools": [{"name": "fetch", "description": "GET a URL", "inputSchema": schema}]})
    elif method == "tools/call":
        url = msg["params"]["arguments"]["url"]
        try:
            text = urllib.request.urlopen(url, timeout=20).read().decode() + " mcp-ok"
        except Exception as err:
            text = "fetch failed: %s" % err
        reply(msg["id"], {"content": [{"type": "text", "text": text}]})
    else:
        reply(msg["id"], {})
"#;

#[tokio::test]
async fn a_stdio_mcp_server_gets_the_proxy() {
    let port = http_server(None);
    let dir = tempfile::TempDir::new().unwrap();
    let probe = dir.path().join("probe.py");
    std::fs::write(&probe, PROBE).unwrap();
    let fetch = |id: &str, url: String| json!({"type": "tool_use", "id": id, "name": "mcp__probe__fetch", "input": {"url": url}});
    let script = json!({"replies": [
        {"when": {"last_user_contains": "go"}, "content": [
            fetch("mcp_listed", format!("http://localhost:{port}/")),
            fetch("mcp_by_address", format!("http://127.0.0.1:{port}/")),
        ]},
        {"when": {"last_tool_name": "mcp__probe__fetch"}, "content": [{"type": "text", "text": "done"}]}
    ]});
    let config = format!(
        "[server]\nauth = \"none\"\n\
         [profiles.default]\nallow = [\"mcp__probe__*\"]\n\
         network = {{ allow = [\"localhost:{port}\"] }}\n\
         [[mcp_servers]]\nname = \"probe\"\ncommand = \"python3\"\n\
         args = [\"{probe}\"]\nread_only_paths = [\"{dir}\"]\nstartup_timeout_s = 60\n",
        probe = probe.display(),
        dir = dir.path().display()
    );
    let h = Harness::new(script, &config).await;
    let server = h.start().await;
    let session = server.session().await;
    server.message(&session, "go").await;
    server.wait_idle(&session).await;
    let events = server.all_events(&session).await;
    let output = |id: &str| -> String {
        let finished = events
            .iter()
            .find(|e| e.event == "tool.finished" && e.data["call_id"] == id)
            .unwrap_or_else(|| panic!("no result of {id}: {events:?}"));
        finished.data["output"].to_string()
    };
    assert!(
        output("mcp_listed").contains(&format!("{BODY} mcp-ok")),
        "{}",
        output("mcp_listed")
    );
    let refused = output("mcp_by_address");
    assert!(
        refused.contains("fetch failed") && refused.contains("403"),
        "{refused}"
    );
    assert_eq!(
        refused_in(&events),
        [("mcp_by_address".into(), "127.0.0.1".into(), u64::from(port))]
    );
}

#[tokio::test]
async fn web_fetch_is_held_to_the_list_and_its_refusals_are_events() {
    let (port, other) = (http_server(None), http_server(None));
    let fetch = |id: &str, url: String| json!({"type": "tool_use", "id": id, "name": "WebFetch", "input": {"url": url, "prompt": "p"}});
    let script = json!({"replies": [
        {"when": {"last_user_contains": "go"}, "content": [
            fetch("web_listed", format!("http://localhost:{port}/")),
            fetch("web_unlisted", format!("http://localhost:{other}/")),
        ]},
        {"when": {"last_tool_name": "WebFetch"}, "content": [{"type": "text", "text": "done"}]}
    ]});
    let config = format!(
        "[server]\nauth = \"none\"\n\
         [profiles.default]\nallow = [\"WebFetch\"]\n\
         network = {{ allow = [\"localhost:{port}\"] }}\n"
    );
    let h = Harness::new(script, &config).await;
    let server = h.start().await;
    let session = server.session().await;
    server.message(&session, "go").await;
    server.wait_idle(&session).await;
    let events = server.all_events(&session).await;
    let finished = |id: &str| -> Value {
        events
            .iter()
            .find(|e| e.event == "tool.finished" && e.data["call_id"] == id)
            .unwrap_or_else(|| panic!("no result of {id}"))
            .data
            .clone()
    };
    let listed = finished("web_listed");
    assert_eq!(listed["is_error"], false, "{listed}");
    assert!(
        listed["output"].as_str().unwrap().contains(BODY),
        "{listed}"
    );
    let unlisted = finished("web_unlisted");
    assert_eq!(unlisted["is_error"], true, "{unlisted}");
    assert!(
        unlisted["output"]
            .as_str()
            .unwrap()
            .contains("not on the network allowlist")
    );
    assert_eq!(
        refused_in(&events),
        [("web_unlisted".into(), "localhost".into(), u64::from(other))]
    );
}

#[tokio::test]
async fn with_network_true_commands_use_the_hosts_network_without_a_proxy() {
    let port = http_server(None);
    let command = format!(
        "curl -fsS http://127.0.0.1:{port}/ && echo ' direct-ok'; \
         echo \"proxy=[$HTTP_PROXY$http_proxy$HTTPS_PROXY]\"; \
         test -e /run/agentd/egress.sock && echo has-socket || echo no-socket"
    );
    let events = run("true", &command).await;
    let output = tool_output(&events);
    assert!(output.contains(&format!("{BODY} direct-ok")), "{output}");
    assert!(output.contains("proxy=[]"), "{output}");
    assert!(output.contains("no-socket"), "{output}");
    assert!(refused_in(&events).is_empty());
}
