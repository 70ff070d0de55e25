//! `agentd.toml`: parsed strictly, so a typo is a startup error that
//! names the file, line and key instead of a silent default.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentd_policy::hooks::{HookConfig, Hooks};
use agentd_policy::permissions::{PermissionMode, PermissionPolicy, RuleError};
use serde::Deserialize;

mod access;
mod agents;
mod commands;
mod identity;
mod mounts;
mod network;
mod sandbox_env;
pub mod server_limits;
mod sign_in;
mod thinking;
mod users;
mod webhooks;
mod workspaces;
pub use access::{AccessConfig, QuotaToml};
pub use agents::{McpServerToml, SkillsToml, SubagentToml};
pub use commands::with_command_marks;
pub use identity::IdentityToml;
pub use mounts::{MountMode, MountSpec, MountsToml};
pub use network::{AllowlistToml, NetworkConfig};
pub use sandbox_env::{EnvValue, MarkedValue, SandboxEnv};
pub use sign_in::{AuthMethods, GroupGrants, JwtAlgorithm, JwtToml, OidcToml};
pub use thinking::Thinking;
pub use users::{DEFAULT_AGENT_UIDS, MIN_AGENT_ID, UserToml};
pub use webhooks::{WebhookEvent, WebhookToml};
pub use workspaces::{ProjectToml, WorkspacesToml};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{0}")]
    Invalid(String),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub database: DatabaseConfig,
    pub models: BTreeMap<String, ModelConfig>,
    pub profiles: BTreeMap<String, ProfileConfig>,
    pub mcp_servers: Vec<McpServerToml>,
    /// `[[commands]]`: operator verbs offered as tools (fixed argv, checked arguments).
    pub commands: Vec<agentd_tools::command::CommandToml>,
    pub subagents: Vec<SubagentToml>,
    pub skills: SkillsToml,
    pub cluster: ClusterConfig,
    /// `[users.NAME]`: per-user settings (the uid their agent works as,
    /// their quotas).
    pub users: BTreeMap<String, UserToml>,
    /// Which profiles and models users may choose; who is an admin.
    pub access: AccessConfig,
    /// Every user's limits (off unless set); `[users.NAME.quotas]` overrides.
    pub quotas: QuotaToml,
    /// Where sessions may open an existing directory; `[users.NAME.workspaces]`
    /// adds roots for that user.
    pub workspaces: WorkspacesToml,
    /// `[[projects]]`: named directories sessions open on.
    pub projects: Vec<ProjectToml>,
    /// `[mounts] allowed`: host roots sessions may ask to mount from.
    pub mounts: MountsToml,
    /// `[[webhooks]]`: signed notifications of sessions' events.
    pub webhooks: Vec<WebhookToml>,
    /// `[identity]`: the tokens agentd signs for tools (`{user_token}`).
    pub identity: IdentityToml,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub bind: Option<String>,
    pub data_dir: Option<PathBuf>,
    /// How `agentd serve` authenticates requests (`AGENTD_AUTH`): one
    /// method or a list of them (tried as header, token, JWT).
    #[serde(default)]
    pub auth: AuthMethods,
    /// `[server.jwt]`: JWT bearer tokens (`auth` includes `"jwt"`).
    pub jwt: Option<JwtToml>,
    /// `[server.oidc]`: the web UI signs in at an OpenID Connect provider.
    pub oidc: Option<OidcToml>,
    /// `auth = "header"`: the header a trusted proxy puts the user name in.
    pub header_name: Option<String>,
    /// `auth = "header"`: the shared secret the proxy sends in
    /// `X-Agentd-Proxy-Secret` (`AGENTD_HEADER_SECRET`).
    pub header_secret: Option<String>,
    /// Sandboxes `agentd serve` keeps started ahead, one per recently used
    /// sandbox policy, so a session's next command skips bubblewrap's set-up
    /// (default 32; 0 turns it off). Each waits at most 30 s.
    pub spare_sandboxes: Option<usize>,
    /// `[FIRST, LAST]`: the uids agentd gives users' agents when it runs as
    /// root (default [`DEFAULT_AGENT_UIDS`]); see [`UserToml`].
    #[serde(default, deserialize_with = "users::uid_range")]
    pub agent_uids: Option<[u32; 2]>,
    /// `auth = "none"`: `Host` names accepted besides loopback addresses and
    /// `localhost` (say, a name in /etc/hosts for this machine). Everything
    /// else is refused, so a page elsewhere cannot rebind a name to us.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// `/healthz` is `degraded` when the data dir has less free space (MiB;
    /// see [`server_limits`] for this and the keys below).
    pub min_free_disk_mb: Option<u64>,
    /// A connection must send a request's whole head within this (seconds).
    pub header_timeout_s: Option<u64>,
    /// An idle keep-alive connection is closed after this (seconds).
    pub keepalive_idle_s: Option<u64>,
    /// Open connections at most; more are closed at once.
    pub max_connections: Option<usize>,
    /// Open event streams per user at most; more answer 429.
    pub max_streams_per_user: Option<usize>,
    /// Requests (event streams) open at once on one HTTP/2 connection.
    pub http2_max_streams: Option<u32>,
    /// SIGTERM ends the process within this (seconds), whatever it waits for.
    pub shutdown_deadline_s: Option<u64>,
    /// The largest file `POST /v1/sessions/{id}/files` takes (MiB; default 20).
    pub max_upload_mb: Option<u64>,
}

/// [`ServerConfig::spare_sandboxes`] when unset.
pub const DEFAULT_SPARE_SANDBOXES: usize = 32;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// `Authorization: Bearer <token>` from `agentd tokens create`.
    #[default]
    Token,
    /// Everyone is the user `local`; refused unless bound to loopback.
    None,
    /// The user from a header set by a trusted proxy, with a shared secret.
    Header,
    /// `Authorization: Bearer <JWT>` signed by `[server.jwt]`'s provider.
    Jwt,
}

impl AuthMode {
    /// As the config spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::Token => "token",
            AuthMode::None => "none",
            AuthMode::Header => "header",
            AuthMode::Jwt => "jwt",
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    pub url: Option<String>,
}

/// `[cluster]`: several `agentd serve` nodes on one PostgreSQL.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// On by default when the database is PostgreSQL; SQLite is one node.
    pub enabled: Option<bool>,
    /// This node's name; default: made once and kept in `<data_dir>/node_id`.
    pub node_id: Option<String>,
    /// A node silent this long is dead: another finishes its turns as
    /// interrupted. Nodes beat every tenth of it, so a pause (GC-like stop,
    /// overloaded host) of half of it is survived with room to spare.
    pub lease_timeout_s: u64,
    /// Turns this node runs at once; more wait in the shared queue.
    pub max_running_turns: usize,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            enabled: None,
            node_id: None,
            lease_timeout_s: 4,
            max_running_turns: 64,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Provider {
    #[default]
    Anthropic,
    Openai,
    /// Replies from a script file, or the built-in offline demo script.
    Scripted,
    /// The real `claude` CLI drives the turn; agentd serves it
    /// its tools over MCP and keeps sessions, events and permissions.
    ClaudeCode,
}

impl Provider {
    /// As the config and `GET /v1/models` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::Openai => "openai",
            Provider::Scripted => "scripted",
            Provider::ClaudeCode => "claude-code",
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub provider: Provider,
    /// The provider's model name. Defaults per provider.
    pub model: Option<String>,
    /// Environment variable holding the API key.
    pub api_key_env: Option<String>,
    pub base_url: Option<String>,
    /// For `scripted`: a JSON script file (the format `agentd-model-server` serves).
    pub script: Option<PathBuf>,
    pub max_output_tokens: Option<u32>,
    /// Retries of a failed request (429, 5xx, 529, connection errors).
    pub max_retries: Option<u32>,
    /// The context window in tokens; from the built-in table when absent
    /// (128 000 for models it does not know).
    pub context_window: Option<u64>,
    /// US dollars per million tokens; the built-in price table when absent.
    pub price: Option<PriceToml>,
    /// For `claude-code`: the `claude` executable (default: `AGENTD_CLAUDE_BIN`,
    /// then `claude` on `PATH`).
    pub command: Option<PathBuf>,
    /// For `claude-code`: a session's warm CLI is stopped after this many
    /// seconds without a turn (default 600); the next message resumes it.
    pub idle_timeout_s: Option<u64>,
    /// Extended thinking for this model's calls (a profile's wins).
    pub thinking: Option<Thinking>,
    /// For `claude-code`: run the CLI against this configured model (any
    /// provider but `claude-code`) through agentd's own loopback
    /// `/v1/messages`, instead of Anthropic's API.
    pub backend: Option<String>,
}

fn check_thinking(at: &str, thinking: Option<Thinking>) -> Result<(), String> {
    thinking
        .map_or(Ok(()), |t| t.check().map(drop))
        .map_err(|err| format!("{at}: {err}"))
}

/// `backend` only on a `claude-code` model, naming a configured model the
/// CLI can be served (not another `claude-code` one: that would loop).
fn check_backend(
    name: &str,
    model: &ModelConfig,
    models: &BTreeMap<String, ModelConfig>,
) -> Result<(), String> {
    let Some(backend) = &model.backend else {
        return Ok(());
    };
    if model.provider != Provider::ClaudeCode {
        return Err(format!(
            "model {name:?}: backend is only for provider = \"claude-code\""
        ));
    }
    match models.get(backend) {
        None => Err(format!(
            "model {name:?}: backend {backend:?} is not a configured model ({})",
            names(models.keys())
        )),
        Some(target) if target.provider == Provider::ClaudeCode => Err(format!(
            "model {name:?}: backend {backend:?} is a claude-code model; name one of another provider"
        )),
        Some(_) => Ok(()),
    }
}

/// `price = { input_per_mtok = 3.0, output_per_mtok = 15.0 }`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceToml {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// Defaults to 10% of input (Anthropic's cache read rate).
    pub cache_read_per_mtok: Option<f64>,
    /// Defaults to 125% of input (Anthropic's 5-minute cache write rate).
    pub cache_write_per_mtok: Option<f64>,
}

impl PriceToml {
    pub fn to_price(self) -> agentd_model::price::Price {
        agentd_model::price::Price {
            input_per_mtok: self.input_per_mtok,
            output_per_mtok: self.output_per_mtok,
            cache_read_per_mtok: self
                .cache_read_per_mtok
                .unwrap_or(self.input_per_mtok * 0.1),
            cache_write_per_mtok: self
                .cache_write_per_mtok
                .unwrap_or(self.input_per_mtok * 1.25),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    #[default]
    On,
    /// Run commands without bubblewrap. Logged loudly on every call.
    Off,
}

/// What happens to a permission request nobody answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoAnswer {
    #[default]
    Deny,
    Allow,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProfileConfig {
    /// `default` (ask before anything that is not read-only), `accept_edits`,
    /// `read_only`, `bypass`, `dont_ask`; Claude Code's spellings too.
    pub mode: PermissionMode,
    /// Permission rules (`Bash(git status)`, `Read(src/**)`, `WebFetch(domain:x)`, …);
    /// deny beats allow beats ask.
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub ask: Vec<String>,
    pub hooks: Vec<HookConfig>,
    /// Applied when a request is not answered within `approval_timeout_s`, or
    /// when nobody can be asked (`agentd run` without a terminal).
    pub on_no_answer: NoAnswer,
    pub approval_timeout_s: u64,
    /// Let sandboxed commands write `.git/hooks` and `.git/config`.
    pub allow_git_config: bool,
    /// The sandbox's network: `true` (the host's), `false` (none) or an
    /// allowlist (`{ allow = [...], allow_localhost = false }`).
    pub network: NetworkConfig,
    pub sandbox: SandboxMode,
    /// Model calls per turn.
    pub max_turns: u32,
    pub turn_timeout_s: u64,
    pub max_budget_usd: Option<f64>,
    /// Spend per session over all its turns, in USD.
    pub max_session_budget_usd: Option<f64>,
    /// Circuit breaker: failing tool calls in a row that end the turn (0: off).
    pub max_failed_calls: u32,
    /// Circuit breaker: the same call this many times in a row ends the turn (0: off).
    pub max_identical_calls: u32,
    /// Checkpoint the workspace before each turn that changes it (see
    /// `POST …/rewind`); off saves the time and the blob storage.
    pub checkpoints: bool,
    /// Compact the context when it passes this share of the model's window.
    pub compact_threshold: f64,
    /// Replaces the built-in system prompt template (placeholders
    /// `{{workspace}}`, `{{tools}}`, `{{sandbox}}`, `{{permissions}}`,
    /// `{{skills}}`, `{{subagents}}`, `{{date}}`).
    pub system_prompt: Option<String>,
    /// Appended to the system prompt (also a template).
    pub append_system_prompt: Option<String>,
    /// Subagents (`Task` calls) a turn may start, nested ones included.
    pub max_subagents: u32,
    /// How deep subagents may nest; 0 turns `Task` off.
    pub max_subagent_depth: u32,
    /// The `[[mcp_servers]]` this profile's sessions get, by name; all when absent.
    pub mcp_servers: Option<Vec<String>>,
    /// The `[[commands]]` this profile's sessions get, by name; all when absent.
    pub commands: Option<Vec<String>>,
    /// Default `Bash` timeout, and the most a call may ask for.
    pub bash_timeout_s: u64,
    pub bash_max_timeout_s: u64,
    /// A background command (`Bash` with `run_in_background`) whose output
    /// nobody has read (`BashOutput`) for this long is killed.
    pub background_idle_timeout_s: u64,
    /// Bytes of live output (`tool.output` events) one tool call may stream
    /// and store; past it one `output.truncated`, and the model still gets
    /// its capped result.
    pub max_tool_output_stream_bytes: u64,
    /// Bytes of live deltas and tool output one turn may stream and store;
    /// past it only final messages, results and `turn.finished` are.
    pub max_turn_stream_bytes: u64,
    /// Variables for every sandboxed command (see [`SandboxEnv`]).
    pub env: BTreeMap<String, EnvValue>,
    /// Variables copied from the server's environment (secret).
    pub env_from_host: Vec<String>,
    /// Bind the server's SSH agent socket into the sandbox.
    pub ssh_agent: Option<bool>,
    /// Host directories in every sandbox of the profile (and for its file tools).
    pub mounts: Vec<MountSpec>,
    /// The only tools the model is offered, when set: names, or `mcp__SERVER`
    /// for all of a server's tools.
    pub tools: Option<Vec<String>>,
    /// Tools the model is never offered (in the same form).
    pub disallowed_tools: Vec<String>,
    /// Extended thinking for this profile's calls, over the model's.
    pub thinking: Option<Thinking>,
    /// Read the workspace's instruction files (`CLAUDE.md`, `AGENTS.md`),
    /// its `.claude/` commands, agents and skills, and the deny and ask
    /// rules of its `.claude/settings.json` (see `crate::project`).
    pub project_config: bool,
    /// Also take what a project could use to act beyond the rules the
    /// operator wrote: its allow rules, hooks (run in the sandbox) and
    /// `.mcp.json` servers. The agent can edit these files itself.
    pub trust_project: bool,
}

impl Default for ProfileConfig {
    fn default() -> Self {
        Self {
            mode: PermissionMode::Default,
            tools: None,
            disallowed_tools: Vec::new(),
            thinking: None,
            project_config: true,
            trust_project: false,
            allow: Vec::new(),
            deny: Vec::new(),
            ask: Vec::new(),
            hooks: Vec::new(),
            on_no_answer: NoAnswer::Deny,
            approval_timeout_s: 300,
            allow_git_config: false,
            network: NetworkConfig::default(),
            sandbox: SandboxMode::On,
            max_turns: 100,
            turn_timeout_s: 1800,
            max_budget_usd: None,
            max_session_budget_usd: None,
            max_failed_calls: 8,
            max_identical_calls: 5,
            compact_threshold: 0.8,
            checkpoints: true,
            system_prompt: None,
            append_system_prompt: None,
            max_subagents: 8,
            max_subagent_depth: 1,
            mcp_servers: None,
            commands: None,
            bash_timeout_s: 120,
            bash_max_timeout_s: 600,
            background_idle_timeout_s: 3600,
            max_tool_output_stream_bytes: agentd_engine::DEFAULT_TOOL_OUTPUT_STREAM_BYTES,
            max_turn_stream_bytes: agentd_engine::DEFAULT_TURN_STREAM_BYTES,
            env: BTreeMap::new(),
            env_from_host: Vec::new(),
            ssh_agent: None,
            mounts: Vec::new(),
        }
    }
}

impl Config {
    /// Parse a config file; errors name the file and, from the TOML parser, the
    /// line, column and key.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text).map_err(|message| ConfigError::Parse {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Parse and check a config: rules and hook matchers must be valid too.
    pub fn parse(text: &str) -> Result<Self, String> {
        let config: Config =
            toml::from_str(text).map_err(|err| err.to_string().trim_end().to_string())?;
        for (name, profile) in &config.profiles {
            profile
                .permission_policy()
                .map_err(|err| format!("profile {name:?}: {err}"))?;
            Hooks::new(profile.hooks.clone()).map_err(|err| format!("profile {name:?}: {err}"))?;
            if !(0.1..=1.0).contains(&profile.compact_threshold) {
                return Err(format!(
                    "profile {name:?}: compact_threshold must be between 0.1 and 1.0"
                ));
            }
            if profile.background_idle_timeout_s == 0 {
                return Err(format!(
                    "profile {name:?}: background_idle_timeout_s must be at least 1"
                ));
            }
            for template in [&profile.system_prompt, &profile.append_system_prompt]
                .into_iter()
                .flatten()
            {
                agents::check_template(&format!("profile {name:?}"), template)?;
            }
            let at = format!("profile {name:?}");
            check_thinking(&at, profile.thinking)?;
            sandbox_env::check(&at, &profile.env, &profile.env_from_host)?;
            profile
                .network
                .check(&at, profile.sandbox == SandboxMode::On)?;
            for server in profile.mcp_servers.iter().flatten() {
                if !config.mcp_servers.iter().any(|s| &s.name == server) {
                    return Err(format!(
                        "profile {name:?}: no [[mcp_servers]] named {server:?}"
                    ));
                }
            }
        }
        for (name, model) in &config.models {
            check_thinking(&format!("model {name:?}"), model.thinking)?;
            check_backend(name, model, &config.models)?;
        }
        agents::check(&config.mcp_servers, &config.subagents, &config.models)?;
        commands::check(&config)?;
        users::check(&config.server, &config.users)?;
        access::check(&config)?;
        sign_in::check(&config)?;
        workspaces::check(&config)?;
        mounts::check(&config)?;
        webhooks::check(&config)?;
        config.identity.check()?;
        // At least 2 s: the fencing margins (stop at 4/5, beats bounded by
        // 1/4) need room; at most an hour: the heartbeat multiplies it.
        if !(2..=3600).contains(&config.cluster.lease_timeout_s) {
            return Err("[cluster] lease_timeout_s must be between 2 and 3600".into());
        }
        if config.cluster.max_running_turns == 0 {
            return Err("[cluster] max_running_turns must be at least 1".into());
        }
        if let Some(id) = &config.cluster.node_id
            && (id.is_empty() || id.len() > 128 || id.chars().any(char::is_whitespace))
        {
            return Err("[cluster] node_id must be 1–128 characters without spaces".into());
        }
        Ok(config)
    }

    /// The profile by name. `default` and the `read_only` preset (the read-only
    /// assistant: Read, Glob, Grep, LS, WebFetch) exist even when the file has none.
    pub fn profile(&self, name: &str) -> Result<ProfileConfig, ConfigError> {
        match self.profiles.get(name) {
            Some(profile) => Ok(profile.clone()),
            None if name == "default" => Ok(ProfileConfig::default()),
            None if name == READ_ONLY_PROFILE => Ok(ProfileConfig {
                mode: PermissionMode::ReadOnly,
                ..ProfileConfig::default()
            }),
            None => Err(ConfigError::Invalid(format!(
                "no profile named {name:?}; configured profiles: {}",
                names(self.profiles.keys())
            ))),
        }
    }
}

/// The name of the built-in read-only assistant profile.
pub const READ_ONLY_PROFILE: &str = "read_only";

impl ProfileConfig {
    /// The profile's mode and rules, parsed.
    pub fn permission_policy(&self) -> Result<PermissionPolicy, RuleError> {
        PermissionPolicy::new(self.mode, &self.allow, &self.deny, &self.ask)
    }
}

pub(crate) fn names<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    let list: Vec<&str> = keys.map(String::as_str).collect();
    if list.is_empty() {
        "(none)".to_string()
    } else {
        list.join(", ")
    }
}

#[cfg(test)]
mod tests;
