//! The flags of `agentd claude`: those the Agent SDKs pass to the `claude`
//! CLI, with the same names and value forms (`--flag value` and
//! `--flag=value`). A flag agentd does not know is refused by name; one it
//! knows but cannot honour is refused with the reason.

use std::path::PathBuf;

use agentd_policy::permissions::PermissionMode;
use clap::ValueEnum;
use serde_json::Value;

use crate::exit::{Failure, usage};

/// The `claude` CLI version whose stream-json protocol this mode follows
/// (what `-v` and the `system` init message report as Claude Code's).
pub const CLAUDE_PROTOCOL_VERSION: &str = "2.1.197";

#[derive(Debug, clap::Args)]
#[command(disable_version_flag = true)]
pub struct ClaudeArgs {
    /// The prompt (with `-p`); none with `--input-format stream-json`.
    pub prompt: Option<String>,
    /// Print the answer and exit (what this mode always does: it is headless).
    #[arg(short = 'p', long = "print")]
    pub print: bool,
    /// Print the version (of the `claude` protocol followed, and agentd's).
    #[arg(short = 'v', long = "version")]
    pub version: bool,
    #[arg(long, value_enum, default_value_t = ClaudeOutput::Text)]
    pub output_format: ClaudeOutput,
    #[arg(long, value_enum, default_value_t = ClaudeInput::Text)]
    pub input_format: ClaudeInput,
    /// Accepted for compatibility (stream-json output is always complete).
    #[arg(long)]
    pub verbose: bool,
    /// Replaces agentd's system prompt; an empty value (the SDKs' default)
    /// keeps the profile's.
    #[arg(long, value_name = "TEXT")]
    pub system_prompt: Option<String>,
    #[arg(long, value_name = "FILE")]
    pub system_prompt_file: Option<PathBuf>,
    #[arg(long, value_name = "TEXT")]
    pub append_system_prompt: Option<String>,
    /// Allow rules (commas or spaces between rules), added to the profile's.
    #[arg(
        long = "allowedTools",
        visible_alias = "allowed-tools",
        value_name = "RULES"
    )]
    pub allowed_tools: Vec<String>,
    /// Deny rules, added to the profile's.
    #[arg(
        long = "disallowedTools",
        visible_alias = "disallowed-tools",
        value_name = "RULES"
    )]
    pub disallowed_tools: Vec<String>,
    /// Only these built-in tools (comma-separated; `""` for none, `default`
    /// for all).
    #[arg(long, value_name = "TOOLS")]
    pub tools: Option<String>,
    /// default, acceptEdits, plan, bypassPermissions, dontAsk (or agentd's names).
    #[arg(long, value_parser = parse_mode)]
    pub permission_mode: Option<PermissionMode>,
    /// `bypassPermissions`, over any `--permission-mode`, as in Claude Code;
    /// agentd's rules and sandbox still bound what a bypassing turn may do.
    #[arg(long)]
    pub dangerously_skip_permissions: bool,
    /// Accepted: the TypeScript SDK passes it with `bypassPermissions`
    /// (`allowDangerouslySkipPermissions`); agentd's rules and sandbox
    /// still bound what a bypassing turn may do.
    #[arg(long)]
    pub allow_dangerously_skip_permissions: bool,
    /// `stdio`: permission requests go to the client as `can_use_tool`.
    #[arg(long, value_name = "TOOL")]
    pub permission_prompt_tool: Option<String>,
    /// A configured model name, `anthropic:NAME`, `openai:NAME`, or a model
    /// name for the default provider.
    #[arg(long, env = "AGENTD_MODEL")]
    pub model: Option<String>,
    #[arg(long)]
    pub max_turns: Option<u32>,
    #[arg(long)]
    pub max_budget_usd: Option<f64>,
    /// Continue an agentd session (its workspace and history).
    #[arg(short = 'r', long, value_name = "SESSION_ID")]
    pub resume: Option<String>,
    /// Continue this directory's most recent session.
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    pub continue_latest: bool,
    /// With --resume or --continue: go on in a copy (a new session, with a
    /// copy of the workspace), leaving the original as it was.
    #[arg(long)]
    pub fork_session: bool,
    /// MCP servers: JSON (`{"mcpServers": {…}}`) or a file holding it.
    /// Repeatable. `type: "sdk"` servers live in the client and are reached
    /// over the control protocol; stdio servers run in the sandbox.
    #[arg(long, value_name = "JSON_OR_FILE")]
    pub mcp_config: Vec<String>,
    /// Only the --mcp-config servers (agentd's own configured ones are
    /// the profile's either way).
    #[arg(long)]
    pub strict_mcp_config: bool,
    /// Which settings apply: without `project` (or `local`), the
    /// workspace's CLAUDE.md and `.claude/` are not read.
    #[arg(long, value_delimiter = ',', value_name = "SOURCES")]
    pub setting_sources: Option<Vec<String>>,
    /// Settings JSON (or a file): `permissions.allow` / `permissions.deny`
    /// are added to the rules; `sandbox` is agentd's own and ignored.
    #[arg(long, value_name = "JSON_OR_FILE")]
    pub settings: Option<String>,
    /// Stream partial messages as `stream_event` records.
    #[arg(long)]
    pub include_partial_messages: bool,
    /// Accepted: hook runs are not reported as messages.
    #[arg(long)]
    pub include_hook_events: bool,
    /// A further directory the agent may use: only one inside the workspace.
    #[arg(long, value_name = "DIR")]
    pub add_dir: Vec<PathBuf>,
    #[arg(long, value_name = "TOKENS")]
    pub max_thinking_tokens: Option<u32>,
    /// `adaptive` / `enabled` (the model's budget) or `disabled`.
    #[arg(long, value_name = "MODE")]
    pub thinking: Option<String>,
    /// The agentd profile (permissions, sandbox, tools).
    #[arg(long, env = "AGENTD_PROFILE", default_value = "default")]
    pub profile: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClaudeOutput {
    Text,
    Json,
    StreamJson,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClaudeInput {
    Text,
    StreamJson,
}

fn parse_mode(text: &str) -> Result<PermissionMode, String> {
    PermissionMode::parse(text).ok_or_else(|| {
        format!(
            "unknown permission mode {text:?}; use default, acceptEdits, plan, \
             bypassPermissions or dontAsk"
        )
    })
}

impl ClaudeArgs {
    /// The permission mode the flags ask for, if any.
    pub fn mode(&self) -> Option<PermissionMode> {
        crate::flag_mode(self.permission_mode, self.dangerously_skip_permissions)
    }

    /// `--allowedTools`, one rule each.
    pub fn allow_rules(&self) -> Vec<String> {
        let split = self
            .allowed_tools
            .iter()
            .flat_map(|r| crate::run::split_rules(r));
        split.collect()
    }

    /// `--disallowedTools`, one rule each.
    pub fn deny_rules(&self) -> Vec<String> {
        let split = self
            .disallowed_tools
            .iter()
            .flat_map(|r| crate::run::split_rules(r));
        split.collect()
    }

    /// `--tools`: `None` for all built-in tools.
    pub fn builtin_tools(&self) -> Option<Vec<String>> {
        let tools = self.tools.as_deref()?.trim();
        if tools == "default" {
            return None;
        }
        Some(crate::run::split_rules(tools))
    }

    /// The thinking budget the flags ask for; `Some(0)` turns it off.
    pub fn thinking_budget(&self) -> Result<Option<u32>, String> {
        match self.thinking.as_deref() {
            None | Some("adaptive") | Some("enabled") => Ok(self.max_thinking_tokens),
            Some("disabled") => Ok(Some(0)),
            Some(other) => Err(format!(
                "--thinking {other:?}: use adaptive, enabled or disabled"
            )),
        }
    }

    /// Whether the workspace's Claude Code files are read (`--setting-sources`).
    pub fn project_config(&self) -> Option<bool> {
        let sources = self.setting_sources.as_ref()?;
        Some(
            sources
                .iter()
                .any(|source| matches!(source.trim(), "project" | "local")),
        )
    }
}

/// What `-v` prints.
pub fn version_line() -> String {
    format!(
        "{CLAUDE_PROTOCOL_VERSION} (Claude Code compatible; agentd {})",
        env!("CARGO_PKG_VERSION")
    )
}

/// The flags that need checking beyond their syntax, and the settings'
/// rules.
pub fn check_flags(args: &ClaudeArgs) -> Result<Rules, Failure> {
    if args.input_format == ClaudeInput::StreamJson
        && args.output_format != ClaudeOutput::StreamJson
    {
        return Err(usage(
            "--input-format stream-json needs --output-format stream-json",
        ));
    }
    match args.permission_prompt_tool.as_deref() {
        None | Some("stdio") => {}
        Some(other) => {
            return Err(usage(format!(
                "--permission-prompt-tool {other}: only `stdio` (ask the client over the \
                 control protocol) is supported"
            )));
        }
    }
    if args.fork_session && args.resume.is_none() && !args.continue_latest {
        return Err(usage("--fork-session needs --resume or --continue"));
    }
    args.thinking_budget().map_err(usage)?;
    let cwd = std::env::current_dir().map_err(usage)?;
    for dir in &args.add_dir {
        let dir = std::fs::canonicalize(cwd.join(dir))
            .map_err(|err| usage(format!("--add-dir {}: {err}", dir.display())))?;
        if !dir.starts_with(&cwd) {
            return Err(usage(format!(
                "--add-dir {}: the agent works only in its workspace ({}) and the host \
                 directories the operator configured as [[mounts]]",
                dir.display(),
                cwd.display()
            )));
        }
    }
    match &args.settings {
        Some(settings) => settings_rules(settings).map_err(usage),
        None => Ok(Rules::default()),
    }
}

/// Allow and deny rules from `--settings`.
#[derive(Default)]
pub struct Rules {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub ask: Vec<String>,
    /// `permissions.defaultMode`, used when `--permission-mode` is not given.
    pub mode: Option<PermissionMode>,
    /// `sandbox.enabled`: the app counts on commands being sandboxed.
    pub sandbox: bool,
}

fn settings_rules(value: &str) -> Result<Rules, String> {
    let settings = super::client_parts::json_or_file("--settings", value)?;
    let object = settings
        .as_object()
        .ok_or("--settings: expected an object")?;
    let mut rules = Rules::default();
    for (key, value) in object {
        match key.as_str() {
            "$schema" => {}
            // agentd's own sandbox confines every command; an app that asks
            // for one is refused by a profile without it.
            "sandbox" => rules.sandbox = value.get("enabled") == Some(&Value::Bool(true)),
            "permissions" => permissions(value, &mut rules)?,
            other => {
                return Err(format!(
                    "--settings: {other:?} is not supported by agentd (permissions and \
                     sandbox are)"
                ));
            }
        }
    }
    Ok(rules)
}

/// `permissions`: `allow`, `deny` and `ask` rules and a `defaultMode`.
fn permissions(value: &Value, rules: &mut Rules) -> Result<(), String> {
    let object = value
        .as_object()
        .ok_or("--settings: \"permissions\" must be an object")?;
    for (key, value) in object {
        // A rule list that is not one is refused, never read as empty: a
        // deny rule must not be lost.
        let list = || -> Result<Vec<String>, String> {
            let items = value
                .as_array()
                .map(|items| items.iter().map(Value::as_str));
            let rules: Option<Vec<&str>> = items.and_then(|items| items.collect());
            let rules = rules.ok_or_else(|| {
                format!("--settings: permissions.{key} must be an array of rule strings")
            })?;
            Ok(rules.into_iter().map(str::to_owned).collect())
        };
        match key.as_str() {
            "allow" => rules.allow = list()?,
            "deny" => rules.deny = list()?,
            "ask" => rules.ask = list()?,
            "defaultMode" => {
                let mode = value.as_str().unwrap_or_default();
                rules.mode = Some(parse_mode(mode)?);
            }
            other => {
                return Err(format!(
                    "--settings: permissions.{other} is not supported by agentd (allow, deny, \
                     ask and defaultMode are)"
                ));
            }
        }
    }
    Ok(())
}

/// `--system-prompt` or its file; empty (the SDKs' default) keeps the
/// profile's prompt.
pub fn system_prompt(args: &ClaudeArgs) -> Result<Option<String>, Failure> {
    let text = match (&args.system_prompt, &args.system_prompt_file) {
        (Some(_), Some(_)) => {
            return Err(usage(
                "give --system-prompt or --system-prompt-file, not both",
            ));
        }
        (Some(text), None) => text.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .map_err(|err| usage(format!("--system-prompt-file {}: {err}", path.display())))?,
        (None, None) => return Ok(None),
    };
    Ok(Some(text).filter(|text| !text.trim().is_empty()))
}
