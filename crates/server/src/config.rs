//! `agentd.toml` (DESIGN §6): parsed strictly, so a typo is a startup error that
//! names the file, line and key instead of a silent default.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentd_engine::hooks::{HookConfig, Hooks};
use agentd_engine::permissions::{PermissionMode, PermissionPolicy, RuleError};
use serde::Deserialize;

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
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub database: DatabaseConfig,
    #[serde(default)]
    pub models: BTreeMap<String, ModelConfig>,
    #[serde(default)]
    pub profiles: BTreeMap<String, ProfileConfig>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub bind: Option<String>,
    pub data_dir: Option<PathBuf>,
    /// How `agentd serve` authenticates requests (`AGENTD_AUTH`).
    #[serde(default)]
    pub auth: AuthMode,
    /// `auth = "header"`: the header a trusted proxy puts the user name in.
    pub header_name: Option<String>,
    /// `auth = "header"`: the shared secret the proxy sends in
    /// `X-Agentd-Proxy-Secret` (`AGENTD_HEADER_SECRET`).
    pub header_secret: Option<String>,
}

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
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    pub url: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Provider {
    Anthropic,
    Openai,
    /// Replies from a script file, or the built-in offline demo script.
    Scripted,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub provider: Provider,
    /// The provider's model name. Defaults per provider.
    pub model: Option<String>,
    /// Environment variable holding the API key.
    pub api_key_env: Option<String>,
    pub base_url: Option<String>,
    /// For `scripted`: a JSON script file (see `agentd model-server`).
    pub script: Option<PathBuf>,
    pub max_output_tokens: Option<u32>,
    /// Retries of a failed request (429, 5xx, 529, connection errors).
    pub max_retries: Option<u32>,
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
#[serde(deny_unknown_fields)]
pub struct ProfileConfig {
    /// `default` (ask before anything that is not read-only), `accept_edits`,
    /// `read_only`, `bypass`.
    #[serde(default)]
    pub mode: PermissionMode,
    /// Permission rules (`Bash(git status)`, `Read(src/**)`, `WebFetch(domain:x)`, …);
    /// deny beats allow beats ask.
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    #[serde(default)]
    pub ask: Vec<String>,
    #[serde(default)]
    pub hooks: Vec<HookConfig>,
    /// Applied when a request is not answered within `approval_timeout_s`, or
    /// when nobody can be asked (`agentd run` without a terminal).
    #[serde(default)]
    pub on_no_answer: NoAnswer,
    #[serde(default = "default_approval_timeout_s")]
    pub approval_timeout_s: u64,
    /// Let sandboxed commands write `.git/hooks` and `.git/config`.
    #[serde(default)]
    pub allow_git_config: bool,
    /// Let sandboxed commands reach the network.
    #[serde(default)]
    pub network: bool,
    #[serde(default)]
    pub sandbox: SandboxMode,
    /// Model calls per turn.
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    #[serde(default = "default_turn_timeout_s")]
    pub turn_timeout_s: u64,
    pub max_budget_usd: Option<f64>,
    /// Replaces the built-in system prompt.
    pub system_prompt: Option<String>,
    /// Default `Bash` timeout, and the most a call may ask for.
    #[serde(default = "default_bash_timeout_s")]
    pub bash_timeout_s: u64,
    #[serde(default = "default_bash_max_timeout_s")]
    pub bash_max_timeout_s: u64,
}

fn default_approval_timeout_s() -> u64 {
    300
}
fn default_max_turns() -> u32 {
    100
}
fn default_turn_timeout_s() -> u64 {
    1800
}
fn default_bash_timeout_s() -> u64 {
    120
}
fn default_bash_max_timeout_s() -> u64 {
    600
}

impl Default for ProfileConfig {
    fn default() -> Self {
        Self {
            mode: PermissionMode::Default,
            allow: Vec::new(),
            deny: Vec::new(),
            ask: Vec::new(),
            hooks: Vec::new(),
            on_no_answer: NoAnswer::Deny,
            approval_timeout_s: default_approval_timeout_s(),
            allow_git_config: false,
            network: false,
            sandbox: SandboxMode::On,
            max_turns: default_max_turns(),
            turn_timeout_s: default_turn_timeout_s(),
            max_budget_usd: None,
            system_prompt: None,
            bash_timeout_s: default_bash_timeout_s(),
            bash_max_timeout_s: default_bash_max_timeout_s(),
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
mod tests {
    use super::*;

    #[test]
    fn full_example_parses() {
        let config = Config::parse(
            r#"
            [server]
            bind = "127.0.0.1:7878"
            [database]
            url = "sqlite:///tmp/x.db"
            [models.default]
            provider = "anthropic"
            model = "claude-sonnet-4-5"
            api_key_env = "ANTHROPIC_API_KEY"
            [models.local]
            provider = "openai"
            base_url = "http://127.0.0.1:11434/v1"
            [profiles.default]
            network = false
            max_turns = 7
            max_budget_usd = 5.0
            "#,
        )
        .unwrap();
        assert_eq!(config.models["local"].provider, Provider::Openai);
        assert_eq!(config.profile("default").unwrap().max_turns, 7);
        assert_eq!(config.profile("default").unwrap().turn_timeout_s, 1800);
    }

    #[test]
    fn unknown_key_names_line_and_key() {
        let err = Config::parse("[profiles.default]\nmax_turnz = 3\n").unwrap_err();
        assert!(err.contains("max_turnz"), "{err}");
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn wrong_type_and_unknown_provider_are_errors() {
        assert!(Config::parse("[profiles.default]\nmax_turns = \"x\"\n").is_err());
        let err = Config::parse("[models.m]\nprovider = \"nope\"\n").unwrap_err();
        assert!(err.contains("nope"), "{err}");
    }

    #[test]
    fn rules_hooks_and_presets() {
        let config = Config::parse(
            r#"
            [profiles.default]
            mode = "accept_edits"
            allow = ["Bash(git status)", "Read(src/**)"]
            deny = ["Read(.env)"]
            on_no_answer = "allow"
            [[profiles.default.hooks]]
            event = "PreToolUse"
            matcher = "Bash"
            command = "true"
            "#,
        )
        .unwrap();
        let profile = config.profile("default").unwrap();
        assert_eq!(profile.mode, PermissionMode::AcceptEdits);
        assert_eq!(profile.on_no_answer, NoAnswer::Allow);
        assert_eq!(profile.hooks.len(), 1);
        let preset = config.profile(READ_ONLY_PROFILE).unwrap();
        assert_eq!(preset.mode, PermissionMode::ReadOnly);
    }

    #[test]
    fn bad_rules_and_hook_matchers_are_startup_errors() {
        let err = Config::parse("[profiles.p]\nallow = [\"Bash(git status\"]\n").unwrap_err();
        assert!(err.contains("profile \"p\""), "{err}");
        let err = Config::parse(
            "[profiles.p]\n[[profiles.p.hooks]]\nevent = \"PreToolUse\"\nmatcher = \"(\"\ncommand = \"true\"\n",
        )
        .unwrap_err();
        assert!(err.contains("profile \"p\""), "{err}");
        let err = Config::parse("[profiles.p]\nmode = \"yolo\"\n").unwrap_err();
        assert!(err.contains("yolo"), "{err}");
    }

    #[test]
    fn missing_profile_is_a_clear_error() {
        let err = Config::default().profile("strict").unwrap_err().to_string();
        assert!(err.contains("strict"), "{err}");
    }
}
