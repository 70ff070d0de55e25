//! Real MCP servers for the MCP tests: the npm packages that
//! `scripts/install-deps.sh` puts in `.tools/`, and the fixture in
//! `scripts/mcp-fixtures/`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd_sandbox::Policy;
use agentd_tools::{McpServerConfig, McpTools, McpTransport, Tool, ToolContext, ToolResult};
use serde_json::Value;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The entry script of an `@modelcontextprotocol/<package>` in `.tools/`.
pub fn package_entry(package: &str) -> String {
    let entry = repo().join(format!(
        ".tools/node_modules/@modelcontextprotocol/{package}/dist/index.js"
    ));
    assert!(
        entry.is_file(),
        "{} is missing: run `bash scripts/install-deps.sh` to install the MCP test servers",
        entry.display()
    );
    entry.display().to_string()
}

pub fn fixture_script() -> String {
    let script = repo().join("scripts/mcp-fixtures/fixture-server.mjs");
    assert!(script.is_file(), "{} is missing", script.display());
    script.display().to_string()
}

pub fn node(name: &str, args: Vec<String>) -> McpServerConfig {
    McpServerConfig::new(
        name,
        McpTransport::Stdio {
            command: "node".into(),
            args,
            env: BTreeMap::new(),
            read_only_paths: Vec::new(),
            network: false,
        },
    )
}

pub fn everything() -> McpServerConfig {
    node("everything", vec![package_entry("server-everything")])
}

pub fn fixture(name: &str, extra: &[&str]) -> McpServerConfig {
    let mut args = vec![fixture_script()];
    args.extend(extra.iter().map(|arg| arg.to_string()));
    node(name, args)
}

/// A session: its workspace, the policy its servers run under (the server
/// scripts bound read-only), and a tool context.
pub struct Session {
    _root: tempfile::TempDir,
    pub ws: PathBuf,
    pub outside: PathBuf,
    pub policy: Policy,
    pub ctx: ToolContext,
}

impl Session {
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().canonicalize().unwrap().join("ws");
        let outside = root.path().canonicalize().unwrap().join("outside");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let mut policy = Policy::new(&ws);
        policy.read_only_paths = vec![repo().join(".tools"), repo().join("scripts/mcp-fixtures")];
        let ctx = ToolContext::for_workspace(&ws).unwrap();
        Self {
            _root: root,
            ws,
            outside,
            policy,
            ctx,
        }
    }

    /// Files in the workspace whose names start with `prefix`.
    pub fn files(&self, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.ws)
            .unwrap()
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| name.starts_with(prefix))
            .collect();
        names.sort();
        names
    }

    /// Wait until a file starting with `prefix` exists (up to `within`).
    pub async fn wait_for_file(&self, prefix: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if !self.files(prefix).is_empty() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        false
    }
}

pub fn tool<'a>(tools: &'a McpTools, name: &str) -> &'a Arc<dyn Tool> {
    tools
        .tools
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| {
            let names: Vec<&str> = tools.tools.iter().map(|t| t.name()).collect();
            panic!("no tool {name} in {names:?} (errors: {:?})", tools.errors)
        })
}

pub async fn call(tools: &McpTools, name: &str, input: Value, ctx: &ToolContext) -> ToolResult {
    tool(tools, name).call(input, ctx).await
}

pub fn assert_ok(result: &ToolResult) {
    assert!(!result.is_error, "unexpected error: {}", result.content);
}

pub fn assert_error_containing(result: &ToolResult, needles: &[&str]) {
    assert!(
        result.is_error,
        "expected an error, got: {}",
        result.content
    );
    for needle in needles {
        assert!(
            result.content.contains(needle),
            "{needle:?} not in: {}",
            result.content
        );
    }
}

/// server-everything in `streamableHttp` mode, outside the sandbox.
pub struct HttpServer {
    _child: tokio::process::Child,
    pub url: String,
}

pub async fn http_everything() -> HttpServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = tokio::process::Command::new("node")
        .arg(package_entry("server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the HTTP server did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    HttpServer {
        _child: child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}
