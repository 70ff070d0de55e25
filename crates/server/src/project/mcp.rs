//! A trusted project's `.mcp.json` servers. Only stdio servers are taken:
//! they run in the session's sandbox like the operator's, with the
//! profile's network and no more. An HTTP server would be reached from the
//! host, on the project's word, so it is skipped.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use agentd_tools::mcp::{McpServerConfig, McpTransport};
use serde::Deserialize;

use super::Project;
use super::files::ProjectFiles;

const MCP_FILE: &str = ".mcp.json";
const MAX_SERVERS: usize = 20;

#[derive(Debug, Deserialize)]
struct McpJson {
    #[serde(default, rename = "mcpServers")]
    servers: BTreeMap<String, ServerJson>,
}

#[derive(Debug, Deserialize)]
struct ServerJson {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    url: Option<String>,
}

pub fn apply(files: &ProjectFiles, project: &mut Project) {
    let Some((parsed, text)) = files.read_json::<McpJson>(MCP_FILE, &mut project.warnings) else {
        return;
    };
    project.mcp_fingerprint = fingerprint(&text);
    for (name, server) in parsed.servers.into_iter().take(MAX_SERVERS) {
        match config_of(&name, server) {
            Ok(config) => project.mcp_servers.push(config),
            Err(reason) => project
                .warnings
                .push(format!("{MCP_FILE}: server {name:?} skipped: {reason}")),
        }
    }
}

fn config_of(name: &str, server: ServerJson) -> Result<McpServerConfig, String> {
    let valid_name = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid_name {
        return Err("use letters, digits, `-` and `_` in its name".into());
    }
    if server.url.is_some() || matches!(server.kind.as_deref(), Some("http" | "sse")) {
        return Err("only stdio servers of a project run (in the sandbox)".into());
    }
    let command = server
        .command
        .filter(|c| !c.trim().is_empty())
        .ok_or("it has no `command`")?;
    Ok(McpServerConfig::new(
        name,
        McpTransport::Stdio {
            command,
            args: server.args,
            env: server.env,
            read_only_paths: Vec::new(),
            network: false,
        },
    ))
}

/// Tells whether the file changed since the servers were started.
fn fingerprint(text: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}
