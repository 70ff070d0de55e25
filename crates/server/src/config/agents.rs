//! Config of what agents can reach beyond the built-in tools: MCP servers,
//! subagents and skills.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// `[[mcp_servers]]`: a stdio server (`command`, run in the session's
/// sandbox) or a streamable HTTP one (`url`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerToml {
    /// Tools appear as `mcp__<name>__<tool>`.
    pub name: String,
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables for a stdio server, on top of the sandbox's allowlist.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Directories a stdio server's own files live in (outside `/usr`),
    /// visible read-only in its sandbox.
    #[serde(default)]
    pub read_only_paths: Vec<PathBuf>,
    /// Let a stdio server reach the network even when the profile's
    /// commands cannot.
    #[serde(default)]
    pub network: bool,
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The `aud` of the `{user_token}` it gets (default
    /// `agentd-tool:<name>`): a token is good for this server alone.
    pub audience: Option<String>,
    #[serde(default = "default_startup_timeout_s")]
    pub startup_timeout_s: u64,
    #[serde(default = "default_call_timeout_s")]
    pub call_timeout_s: u64,
    /// A session's server process stops after this long without a call.
    #[serde(default = "default_idle_timeout_s")]
    pub idle_timeout_s: u64,
    /// Tools (names as the server knows them, `*` globs) the operator
    /// vouches change nothing: like `Read`, they run unasked in the asking
    /// modes, and `read_only` mode runs them when an allow rule names them.
    #[serde(default)]
    pub read_only_tools: Vec<String>,
    /// Also take the server's own `readOnlyHint` annotations as read-only.
    #[serde(default)]
    pub trust_annotations: bool,
}

fn default_startup_timeout_s() -> u64 {
    30
}
fn default_call_timeout_s() -> u64 {
    120
}
fn default_idle_timeout_s() -> u64 {
    600
}

/// `[[subagents]]`: a kind of subagent the `Task` tool can start.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubagentToml {
    pub name: String,
    /// Tells the main agent when to use it.
    pub description: String,
    /// Its system prompt (a template, like a profile's `system_prompt`).
    pub prompt: String,
    /// Tool names it may use; all of its parent's (but `AskUserQuestion`) when absent.
    pub tools: Option<Vec<String>>,
    /// A `[models.X]` name; its parent's model when absent.
    pub model: Option<String>,
}

/// `[skills]`: folders of `SKILL.md` skills.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillsToml {
    /// Skills for everyone. Default `<data_dir>/skills`.
    pub dir: Option<PathBuf>,
    /// Each user's own skills, overriding global ones of the same name;
    /// `{user}` is replaced by the user name. Default
    /// `<data_dir>/users/{user}/skills`.
    pub user_dir: Option<String>,
}

impl McpServerToml {
    pub(super) fn check(&self) -> Result<(), String> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 32
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !name_ok {
            return Err(format!(
                "mcp server name {:?} must be 1-32 letters, digits, '-' or '_'",
                self.name
            ));
        }
        if let Some(path) = self.read_only_paths.iter().find(|p| !p.is_absolute()) {
            return Err(format!(
                "mcp server {:?}: read_only_paths must be absolute, not {}",
                self.name,
                path.display()
            ));
        }
        agentd_tools::mcp::ReadOnlyTools::new(&self.read_only_tools, self.trust_annotations)
            .map_err(|err| format!("mcp server {:?}: {err}", self.name))?;
        for (what, values) in [("env", &self.env), ("headers", &self.headers)] {
            for (key, value) in values {
                crate::tool_identity::check_template(value)
                    .map_err(|err| format!("mcp server {:?}: {what} {key:?}: {err}", self.name))?;
            }
        }
        let fixed = self.command.iter().chain(&self.args).chain(&self.url);
        if let Some(value) = fixed
            .into_iter()
            .find(|value| crate::tool_identity::names_placeholder(value))
        {
            return Err(format!(
                "mcp server {:?}: {value:?}: {{user}}, {{session}} and {{user_token}} are filled \
                 in `env` and `headers` only, not in `command`, `args` or `url`",
                self.name
            ));
        }
        if let Some(audience) = &self.audience
            && (audience.trim().is_empty() || audience.chars().any(char::is_control))
        {
            return Err(format!(
                "mcp server {:?}: audience must be non-empty text without control characters",
                self.name
            ));
        }
        match (&self.command, &self.url) {
            (Some(_), None) | (None, Some(_)) => Ok(()),
            _ => Err(format!(
                "mcp server {:?} needs exactly one of `command` (stdio) and `url` (streamable HTTP)",
                self.name
            )),
        }
    }

    /// The `aud` of its tokens.
    pub fn audience(&self) -> String {
        self.audience
            .clone()
            .unwrap_or_else(|| crate::tool_identity::mcp_audience(&self.name))
    }

    pub fn to_tools_config(&self) -> agentd_tools::mcp::McpServerConfig {
        use std::time::Duration;
        let transport = match (&self.command, &self.url) {
            (_, Some(url)) => agentd_tools::mcp::McpTransport::Http {
                url: url.clone(),
                headers: self.headers.clone(),
            },
            (command, None) => agentd_tools::mcp::McpTransport::Stdio {
                command: command.clone().unwrap_or_default(),
                args: self.args.clone(),
                env: self.env.clone(),
                read_only_paths: self.read_only_paths.clone(),
                network: self.network,
            },
        };
        agentd_tools::mcp::McpServerConfig {
            name: self.name.clone(),
            transport,
            startup_timeout: Duration::from_secs(self.startup_timeout_s),
            call_timeout: Duration::from_secs(self.call_timeout_s),
            idle_timeout: Duration::from_secs(self.idle_timeout_s),
            egress: None,
            // `check` refused bad patterns; none read-only is the safe side.
            read_only: agentd_tools::mcp::ReadOnlyTools::new(
                &self.read_only_tools,
                self.trust_annotations,
            )
            .unwrap_or_default(),
            secret_env: std::collections::BTreeSet::new(),
        }
    }
}

/// Checks names are unique and references resolve.
pub(super) fn check(
    mcp: &[McpServerToml],
    subagents: &[SubagentToml],
    models: &BTreeMap<String, super::ModelConfig>,
) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for server in mcp {
        server.check()?;
        if !seen.insert(&server.name) {
            return Err(format!("mcp server {:?} is defined twice", server.name));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for sub in subagents {
        check_template(&format!("subagent {:?} prompt", sub.name), &sub.prompt)?;
        if sub.name.trim().is_empty() || sub.description.trim().is_empty() {
            return Err("every [[subagents]] needs a name and a description".into());
        }
        if !seen.insert(&sub.name) {
            return Err(format!("subagent {:?} is defined twice", sub.name));
        }
        if let Some(model) = &sub.model
            && !models.contains_key(model)
        {
            return Err(format!(
                "subagent {:?} uses model {model:?}, which is not under [models]",
                sub.name
            ));
        }
    }
    Ok(())
}

/// Renders `template` against placeholder values, so that an unknown
/// placeholder is a startup error rather than a failed turn.
pub(super) fn check_template(what: &str, template: &str) -> Result<(), String> {
    let context = agentd_engine::prompt::PromptContext::strictest(
        std::path::Path::new("/workspace"),
        &[],
        "2000-01-01",
    );
    agentd_engine::prompt::render(template, &context)
        .map(|_| ())
        .map_err(|err| format!("{what}: {err}"))
}
