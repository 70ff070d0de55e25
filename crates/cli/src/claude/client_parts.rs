//! What the client brings besides messages: hooks registered at
//! `initialize` (its callbacks, asked with `hook_callback`), and MCP servers
//! from `--mcp-config` (its in-process `sdk` servers, asked with
//! `mcp_message`; stdio servers run in the sandbox; HTTP servers).

use std::collections::BTreeMap;
use std::sync::Arc;

use agentd_policy::hooks::{HookCallback, HookConfig, HookEvent};
use agentd_server::project::ProjectAgent;
use agentd_tools::mcp::{McpChannel, McpServerConfig, McpTransport};
use futures::FutureExt as _;
use serde_json::{Value, json};

use super::control::Control;

/// The hooks of an `initialize` request's `hooks` object:
/// `{"PreToolUse": [{"matcher": "Bash", "hookCallbackIds": ["hook_0"],
/// "timeout": 30}], …}`. Events agentd never fires are returned by name, to
/// be reported.
pub fn hooks_from_initialize(
    hooks: &Value,
    control: &Arc<Control>,
) -> Result<(Vec<HookConfig>, Vec<String>), String> {
    let mut configs = Vec::new();
    let mut unsupported = Vec::new();
    let Some(events) = hooks.as_object() else {
        return Ok((configs, unsupported));
    };
    for (name, matchers) in events {
        let Some(event) = hook_event(name) else {
            unsupported.push(name.clone());
            continue;
        };
        for matcher in matchers.as_array().into_iter().flatten() {
            let ids = matcher.get("hookCallbackIds").and_then(Value::as_array);
            for id in ids.into_iter().flatten().filter_map(Value::as_str) {
                configs.push(HookConfig {
                    event,
                    matcher: matcher
                        .get("matcher")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    command: format!("client callback {id}"),
                    // As a project's hooks: 1 s to 10 minutes, so an
                    // interrupt is never held up for longer.
                    timeout_s: matcher
                        .get("timeout")
                        .and_then(Value::as_u64)
                        .unwrap_or(agentd_policy::hooks::DEFAULT_TIMEOUT_S)
                        .clamp(1, 600),
                    sandboxed: false,
                    callback: Some(hook_callback(control.clone(), id.to_string())),
                });
            }
        }
    }
    // Checked now, so a bad matcher is the initialize's error, not a turn's.
    agentd_policy::hooks::Hooks::new(configs.clone()).map_err(|err| err.to_string())?;
    Ok((configs, unsupported))
}

fn hook_event(name: &str) -> Option<HookEvent> {
    serde_json::from_value(Value::String(name.to_string())).ok()
}

fn hook_callback(control: Arc<Control>, callback_id: String) -> HookCallback {
    HookCallback::new(move |input: Value| {
        let (control, callback_id) = (control.clone(), callback_id.clone());
        async move {
            let tool_use_id = input.get("tool_use_id").cloned().unwrap_or(Value::Null);
            let request = json!({
                "subtype": "hook_callback",
                "callback_id": callback_id,
                "input": input,
                "tool_use_id": tool_use_id,
            });
            control.request(request).await
        }
        .boxed()
    })
}

/// Subagent types of an `initialize` request's `agents`: `{NAME:
/// {description, prompt, tools?, model?}}`, as `.claude/agents/` files
/// define them.
pub fn agents(agents: &Value) -> Result<Vec<ProjectAgent>, String> {
    let entries = agents
        .as_object()
        .ok_or("\"agents\" must be an object of NAME: {description, prompt}")?;
    let mut defined = Vec::new();
    for (name, agent) in entries {
        let mut keys = agent
            .as_object()
            .into_iter()
            .flat_map(|object| object.keys());
        let known =
            |key: &&String| matches!(key.as_str(), "description" | "prompt" | "tools" | "model");
        if let Some(key) = keys.find(|key| !known(key)) {
            return Err(format!(
                "agent {name:?}: {key:?} is not supported by agentd (description, prompt, \
                 tools and model are)"
            ));
        }
        let text = |key: &str| agent.get(key).and_then(Value::as_str).map(str::to_owned);
        let (Some(description), Some(prompt)) = (text("description"), text("prompt")) else {
            return Err(format!(
                "agent {name:?} needs a \"description\" and a \"prompt\""
            ));
        };
        let tools = agent.get("tools").and_then(Value::as_array).map(|tools| {
            let names = tools.iter().filter_map(Value::as_str).map(str::to_owned);
            names.collect()
        });
        defined.push(ProjectAgent {
            name: name.clone(),
            description,
            prompt,
            tools,
            model: text("model"),
        });
    }
    Ok(defined)
}

/// A flag's JSON, given inline or as the path of a file holding it (as
/// the CLI takes `--mcp-config` and `--settings`).
pub fn json_or_file(flag: &str, value: &str) -> Result<Value, String> {
    let text = if value.trim_start().starts_with('{') {
        value.to_string()
    } else {
        std::fs::read_to_string(value).map_err(|err| format!("{flag} {value}: {err}"))?
    };
    serde_json::from_str(&text).map_err(|err| format!("{flag}: not JSON: {err}"))
}

/// The servers of the `--mcp-config` values (JSON, or a file holding it).
pub fn mcp_servers(
    values: &[String],
    control: &Arc<Control>,
) -> Result<Vec<McpServerConfig>, String> {
    let mut servers = Vec::new();
    for value in values {
        let parsed = json_or_file("--mcp-config", value)?;
        let Some(entries) = parsed.get("mcpServers").and_then(Value::as_object) else {
            return Err("--mcp-config: expected {\"mcpServers\": {NAME: {…}}}".into());
        };
        for (name, entry) in entries {
            if servers
                .iter()
                .any(|server: &McpServerConfig| server.name == *name)
            {
                return Err(format!("--mcp-config server {name:?}: given twice"));
            }
            let transport = check_server_name(name)
                .and_then(|()| mcp_transport(name, entry, control))
                .map_err(|err| format!("--mcp-config server {name:?}: {err}"))?;
            servers.push(McpServerConfig::new(name.clone(), transport));
        }
    }
    Ok(servers)
}

/// A server name that makes tool names rules can tell apart: letters,
/// digits, `-` and single `_` (a `__` would let `mcp__a__b`'s tools pass
/// for server `a`'s).
pub fn check_server_name(name: &str) -> Result<(), String> {
    let plain = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if name.is_empty() || name.len() > 64 || !plain || name.contains("__") {
        return Err("use letters, digits, `-` and single `_` in a server's name".into());
    }
    Ok(())
}

fn mcp_transport(
    name: &str,
    entry: &Value,
    control: &Arc<Control>,
) -> Result<McpTransport, String> {
    let kind = entry.get("type").and_then(Value::as_str);
    let strings = |key: &str| -> BTreeMap<String, String> {
        let object = entry.get(key).and_then(Value::as_object);
        let pairs = object.into_iter().flatten();
        pairs
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect()
    };
    match kind {
        Some("sdk") => Ok(McpTransport::Channel(sdk_channel(
            control.clone(),
            name.to_string(),
        ))),
        Some("stdio") | None if entry.get("command").is_some() => {
            let command = entry["command"]
                .as_str()
                .ok_or("\"command\" must be a string")?;
            let args = entry.get("args").and_then(Value::as_array);
            let args = args.into_iter().flatten().filter_map(Value::as_str);
            Ok(McpTransport::Stdio {
                command: command.to_string(),
                args: args.map(str::to_owned).collect(),
                env: strings("env"),
                read_only_paths: Vec::new(),
                network: false,
            })
        }
        Some("http") => {
            let url = entry
                .get("url")
                .and_then(Value::as_str)
                .ok_or("an http server needs a \"url\"")?;
            Ok(McpTransport::Http {
                url: url.to_string(),
                headers: strings("headers"),
            })
        }
        Some(other) => Err(format!(
            "type {other:?} is not supported (use sdk, stdio or http)"
        )),
        None => Err("needs a \"type\" (sdk, stdio or http) or a \"command\"".into()),
    }
}

/// The client's in-process server `name` (named at `initialize`).
pub fn sdk_server(control: &Arc<Control>, name: &str) -> McpServerConfig {
    let channel = sdk_channel(control.clone(), name.to_string());
    McpServerConfig::new(name, McpTransport::Channel(channel))
}

/// The client's in-process server `name`, one `mcp_message` per JSON-RPC
/// message.
fn sdk_channel(control: Arc<Control>, name: String) -> McpChannel {
    McpChannel::new(move |message: Value| {
        let (control, name) = (control.clone(), name.clone());
        async move {
            let is_notification = message.get("id").is_none();
            let request = json!({
                "subtype": "mcp_message",
                "server_name": name,
                "message": message,
            });
            if is_notification {
                control.notify(request);
                return Ok(json!({}));
            }
            let response = control.request(request).await?;
            response
                .get("mcp_response")
                .cloned()
                .ok_or_else(|| "the client's answer had no mcp_response".to_string())
        }
        .boxed()
    })
}
