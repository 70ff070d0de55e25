//! `agentd`: the command-line entry point. Argument parsing and wiring only; the
//! work happens in the library crates.

mod acp;
mod approve;
mod chat;
mod claude;
mod exit;
mod gc;
mod history;
mod mcp;
mod output;
mod run;
mod serve;
mod service;
mod sessions;
mod stream_input;
mod tokens;
mod users;

use std::path::PathBuf;
use std::process::ExitCode;

use agentd_policy::permissions::PermissionMode;
use agentd_server::config::Config;
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "agentd",
    version,
    about = "A self-hosted server for tool-using LLM agents"
)]
struct Cli {
    /// Where sessions, the database and workspaces live (never inside a workspace).
    #[arg(long, global = true, env = "AGENTD_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Configuration file (agentd.toml).
    #[arg(long, global = true, env = "AGENTD_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one task headlessly in a directory and exit (like `claude -p`).
    Run(Box<RunArgs>),
    /// Talk with an agent in this terminal: locally, or on a server (`--server`).
    Chat(chat::ChatArgs),
    /// Serve an editor (Zed, …) over the Agent Client Protocol on stdio:
    /// locally, or on a server (`--server`).
    Acp(acp::AcpArgs),
    /// Stand in for the `claude` CLI (for the Claude Agent SDKs): its flags
    /// and stream-json protocol, run by agentd. Also what a link named
    /// `claude` or `agentd-claude` to this binary starts.
    Claude(Box<claude::args::ClaudeArgs>),
    /// List, inspect or delete stored sessions.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Serve the HTTP API (sessions, SSE events, workspace files).
    Serve(serve::ServeArgs),
    /// Be an MCP server on stdin/stdout (agentd's sessions as tools): on this
    /// machine's store, or a server's `/mcp` (`--server`).
    Mcp(mcp::McpArgs),
    /// Remove sessions not updated for a while (and workspaces agentd created).
    Gc(gc::GcArgs),
    /// Create, list or revoke API tokens.
    #[command(subcommand)]
    Tokens(tokens::TokensCommand),
    /// Users: roles, grants of profiles and models, usage.
    #[command(subcommand)]
    Users(users::UsersCommand),
    /// Read or export the audit log (who did what).
    Audit(users::AuditArgs),
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The task, as the user's message (none with `--input-format stream-json`).
    prompt: Option<String>,
    /// Print the answer and exit, as `claude -p` does (what `run` always does).
    #[arg(short = 'p', long = "print")]
    print: bool,
    #[command(flatten)]
    session: SessionFlags,
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    output_format: OutputFormat,
    /// `stream-json`: user messages on stdin, one JSON object a line (the
    /// `claude` CLI's shape), each a turn of the same session, until EOF.
    /// Needs `--output-format stream-json`.
    #[arg(long, value_enum, default_value_t = InputFormat::Text)]
    input_format: InputFormat,
    /// Most model calls in this turn.
    #[arg(long)]
    max_turns: Option<u32>,
    /// Most US dollars this turn may spend.
    #[arg(long)]
    max_budget_usd: Option<f64>,
    /// Replace the system prompt (a template: `{{workspace}}`, `{{tools}}`,
    /// `{{sandbox}}`, `{{permissions}}`, `{{skills}}`, `{{subagents}}`, `{{date}}`).
    #[arg(long, value_name = "TEXT")]
    system_prompt: Option<String>,
    /// Add to the end of the system prompt.
    #[arg(long, value_name = "TEXT")]
    append_system_prompt: Option<String>,
    /// Attach an image (PNG, JPEG, GIF or WebP, at most 5 MiB) to the
    /// prompt. Repeatable.
    #[arg(long = "image", value_name = "PATH")]
    images: Vec<PathBuf>,
}

/// Which session, on which model and profile, with which permissions: the
/// flags `agentd run` and `agentd chat` share.
#[derive(Debug, Clone, clap::Args)]
struct SessionFlags {
    /// Continue this directory's most recent session (its workspace and history).
    #[arg(short = 'c', long = "continue", conflicts_with_all = ["resume", "cwd"])]
    continue_latest: bool,
    /// Continue an earlier session (its workspace and history).
    #[arg(long, value_name = "SESSION_ID")]
    resume: Option<String>,
    /// The workspace (default: the current directory).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// A configured model name, `demo`, `anthropic:NAME`, `openai:NAME`, or a model
    /// name for the default provider.
    #[arg(long, env = "AGENTD_MODEL")]
    model: Option<String>,
    #[arg(long, env = "AGENTD_PROFILE", default_value = "default")]
    profile: String,
    /// Permission mode: default (ask before anything that is not
    /// read-only), accept_edits, read_only, bypass, dont_ask (what would ask is
    /// denied); or Claude Code's acceptEdits, plan, bypassPermissions, dontAsk.
    /// Overrides the profile's.
    #[arg(long, value_parser = parse_mode)]
    permission_mode: Option<PermissionMode>,
    /// Claude Code's spelling of `--permission-mode bypass`, and over it.
    #[arg(long)]
    dangerously_skip_permissions: bool,
    /// Allow a tool call pattern without asking, e.g. `Bash(cargo test)` or `Edit`.
    /// Repeatable; added to the profile's allow rules.
    #[arg(long = "allow", value_name = "RULE")]
    allow: Vec<String>,
    /// Allow rules, as Claude Code takes them: repeatable, or several in one
    /// value separated by commas or spaces, e.g. `"Bash(git *) Edit"`.
    #[arg(
        long = "allowedTools",
        visible_alias = "allowed-tools",
        value_name = "RULES"
    )]
    allowed_tools: Vec<String>,
    /// Deny rules added to the profile's, in the same form.
    #[arg(
        long = "disallowedTools",
        visible_alias = "disallowed-tools",
        value_name = "RULES"
    )]
    disallowed_tools: Vec<String>,
}

impl SessionFlags {
    /// The permission mode the flags ask for, if any.
    fn mode(&self) -> Option<PermissionMode> {
        flag_mode(self.permission_mode, self.dangerously_skip_permissions)
    }

    /// `--allow` and `--allowedTools`, one rule each.
    fn allow_rules(&self) -> Vec<String> {
        let split = self.allowed_tools.iter().flat_map(|r| run::split_rules(r));
        self.allow.iter().cloned().chain(split).collect()
    }

    /// `--disallowedTools`, one rule each.
    fn deny_rules(&self) -> Vec<String> {
        let split = self
            .disallowed_tools
            .iter()
            .flat_map(|r| run::split_rules(r));
        split.collect()
    }
}

/// `--permission-mode`, unless `--dangerously-skip-permissions` (Claude
/// Code's bypass, which wins over any mode given beside it).
fn flag_mode(mode: Option<PermissionMode>, skip_permissions: bool) -> Option<PermissionMode> {
    skip_permissions.then_some(PermissionMode::Bypass).or(mode)
}

fn parse_mode(text: &str) -> Result<PermissionMode, String> {
    PermissionMode::parse(text).ok_or_else(|| {
        format!(
            "unknown permission mode {text:?}; use default, accept_edits (acceptEdits), \
             read_only (plan), bypass (bypassPermissions) or dont_ask (dontAsk)"
        )
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OutputFormat {
    /// Assistant text on stdout, tool activity on stderr.
    Text,
    /// One JSON object with the outcome at the end.
    Json,
    /// Every event as a JSON line, as it happens.
    StreamJson,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum InputFormat {
    /// The prompt argument is the one message.
    Text,
    /// One `{"type":"user","message":{…}}` JSON object a line on stdin.
    StreamJson,
}

#[derive(Debug, Subcommand)]
enum SessionsCommand {
    /// List sessions, newest first.
    Ls {
        #[arg(long, default_value_t = 50)]
        limit: u32,
        #[arg(long)]
        json: bool,
    },
    /// Show a session and its transcript.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Print everything of a session (transcript, events, turns, requests,
    /// rules) as JSON, for `agentd sessions import` into any store.
    Export { id: String },
    /// Add a session from `agentd sessions export` output (a file, or `-` for
    /// stdin) to this store, as it was.
    Import { file: PathBuf },
    /// Delete a session: its history, and its workspace when agentd created it
    /// (never the project directory of an `agentd run` session).
    Rm { id: String },
    /// List a session's checkpoints (the workspace before each turn that
    /// changed it), for `rewind`.
    Checkpoints { id: String },
    /// Rewind a session's workspace files and transcript to a checkpoint.
    Rewind {
        id: String,
        checkpoint_id: String,
        /// Restore the files only; keep the transcript.
        #[arg(long, conflicts_with = "history_only")]
        files_only: bool,
        /// Cut the transcript only; leave the files.
        #[arg(long)]
        history_only: bool,
    },
    /// Copy a session into a new one: the transcript up to a message and the
    /// workspace as it was then. Prints the new session's id.
    Fork {
        id: String,
        /// The last message the fork keeps (an id from `sessions show --json`);
        /// the whole transcript when absent.
        #[arg(long, value_name = "MESSAGE_ID")]
        at: Option<String>,
    },
}

fn main() -> ExitCode {
    // A sandboxed command's first step (see `agentd_sandbox::trampoline`):
    // before anything else, so it stays small and single-threaded.
    agentd_sandbox::trampoline::run_if_asked();
    let cli = Cli::parse_from(claude_alias(std::env::args_os().collect()));
    init_tracing();
    // After tracing: it says which executable sandboxes start through (when
    // a command first needs sandboxes; `set_spare_capacity` starts that early).
    agentd_sandbox::trampoline::enable();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("agentd: cannot start the async runtime: {err}");
            return ExitCode::from(exit::FAILED);
        }
    };
    let code = runtime.block_on(dispatch(cli));
    // Don't wait for blocking tasks (e.g. a stdin reader) at exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    ExitCode::from(code)
}

async fn dispatch(cli: Cli) -> u8 {
    let config = match &cli.config {
        Some(path) => match Config::load(path) {
            Ok(config) => config,
            Err(err) => return exit::report(exit::USAGE, err),
        },
        None => Config::default(),
    };
    let env = |key: &str| std::env::var(key).ok();
    let data_dir = agentd_server::paths::data_dir(cli.data_dir.as_deref(), &config, &env);
    match cli.command {
        Command::Run(args) => run::run(*args, config, data_dir).await,
        Command::Chat(args) => chat::run(args, config, data_dir).await,
        Command::Acp(args) => acp::run(args, config, data_dir).await,
        Command::Claude(args) => claude::run(*args, config, data_dir).await,
        Command::Sessions(command) => sessions::run(command, config, data_dir).await,
        Command::Serve(args) => serve::run(args, config, data_dir).await,
        Command::Mcp(args) => mcp::run(args, config, data_dir).await,
        Command::Tokens(command) => tokens::run(command, config, data_dir).await,
        Command::Users(command) => users::run(command, config, data_dir).await,
        Command::Audit(args) => users::audit(args, config, data_dir).await,
        Command::Gc(args) => gc::run(args, config, data_dir).await,
    }
}

/// Started as `claude` or `agentd-claude` (a link to this binary, where
/// an Agent SDK looks for the CLI): the arguments are `agentd claude`'s.
fn claude_alias(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let name = args
        .first()
        .map(std::path::Path::new)
        .and_then(|path| path.file_name())
        .and_then(|name| name.to_str());
    if matches!(name, Some("claude" | "agentd-claude")) {
        args.insert(1, "claude".into());
    }
    args
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AGENTD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
