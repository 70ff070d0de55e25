//! `agentd claude`: agentd standing where the `claude` CLI stands, for the
//! Claude Agent SDKs (and scripts) that start `claude`. It takes the flags
//! they pass, speaks stream-json with the control protocol on stdin and
//! stdout, and runs each message as a turn of an agentd session: agentd's
//! loop, sandbox, rules and store, so `--resume ID` works from any process
//! and `agentd serve` sees the session. Invoked as `claude` or
//! `agentd-claude` (a link to the binary), agentd starts in this mode.

mod answers;
pub mod args;
mod client_parts;
mod control;
mod stdin;
mod wire;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agentd_policy::hooks::HookConfig;
use agentd_policy::permissions::PermissionMode;
use agentd_protocol::{EventEnvelope, TurnFinished, TurnStatus};
use agentd_server::config::{Config, SandboxMode};
use agentd_server::paths::Connections;
use agentd_server::registry::TurnKind;
use agentd_server::runtime::{PolicySlot, TurnOptions};
use agentd_server::session::SessionService;
use agentd_store::SessionRecord;
use agentd_tools::{McpPool, McpServerConfig};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use self::args::{
    CLAUDE_PROTOCOL_VERSION, ClaudeArgs, ClaudeInput, ClaudeOutput, Rules, check_flags,
    system_prompt, version_line,
};
use self::control::{Control, Output};
use self::wire::Wire;
use crate::approve::TerminalAnswers;
use crate::exit::{self, Failure, failed, usage};
use crate::run::{LOCAL_USER, open_local, shutdown};

/// Prestarted sandboxes for the process's one session (its commands need
/// few), unless `[server] spare_sandboxes` says.
const SPARE_SANDBOXES: usize = 2;

/// What the client may change while the process runs (`initialize`,
/// `set_model`, `set_permission_mode`) and the turn an `interrupt` stops.
#[derive(Default)]
struct Live {
    mode: Option<PermissionMode>,
    model: Option<String>,
    hooks: Vec<HookConfig>,
    system_prompt: Option<String>,
    append_system_prompt: Option<String>,
    /// In-process servers the client named at `initialize` (the
    /// TypeScript SDK's way), besides `--mcp-config`'s.
    sdk_servers: Vec<String>,
    /// Subagent types the client defined at `initialize`.
    agents: Vec<agentd_server::project::ProjectAgent>,
    current: Option<CancellationToken>,
    /// Interrupts that came while no turn ran.
    idle_interrupts: u64,
    /// The running turn's permission policy, for `set_permission_mode`.
    policy: PolicySlot,
}

type Shared = Arc<Mutex<Live>>;

pub async fn run(args: ClaudeArgs, config: Config, data_dir: PathBuf) -> u8 {
    if args.version {
        println!("{}", version_line());
        return exit::OK;
    }
    if std::env::var_os(agentd_claude_code::ENGINE_MARK).is_some() {
        return exit::report(
            exit::USAGE,
            "agentd's claude-code engine started agentd itself as `claude` (a link on the \
             PATH?); set the model's `command` to the real claude CLI",
        );
    }
    match run_inner(args, config, data_dir).await {
        Ok(code) => code,
        Err(Failure(code, message)) => exit::report(code, message),
    }
}

async fn run_inner(args: ClaudeArgs, config: Config, data_dir: PathBuf) -> Result<u8, Failure> {
    let settings = check_flags(&args)?;
    let live: Shared = Arc::new(Mutex::new(Live {
        mode: args.mode().or(settings.mode),
        model: args.model.clone(),
        system_prompt: system_prompt(&args)?,
        append_system_prompt: args.append_system_prompt.clone(),
        ..Live::default()
    }));
    let (out, writer) = Output::start();
    let control = Arc::new(Control::new(out.clone()));
    let client_servers = client_parts::mcp_servers(&args.mcp_config, &control).map_err(usage)?;
    let (turns, mut next_turn) = mpsc::unbounded_channel();
    match (&args.prompt, args.input_format) {
        (Some(prompt), ClaudeInput::Text) => {
            let _ = turns.send(Ok((TurnKind::from_text(prompt.clone()), 0)));
            drop(turns);
            // Nothing reads stdin: requests to the client fail at once
            // (a permission is denied, a callback hook denies) instead of
            // waiting for an answer that cannot come.
            control.close();
        }
        (None, ClaudeInput::Text) => {
            return Err(usage(
                "a prompt is needed (or --input-format stream-json with messages on stdin)",
            ));
        }
        (Some(_), ClaudeInput::StreamJson) => {
            return Err(usage(
                "with --input-format stream-json the messages come on stdin; give no prompt",
            ));
        }
        (None, ClaudeInput::StreamJson) => {
            tokio::spawn(stdin::read(control.clone(), live.clone(), turns));
        }
    }
    // The session is opened (or made) for the first message: a client that
    // sends none, or a bad one, leaves nothing behind.
    let first = match next_turn.recv().await {
        Some(Ok(first)) => first,
        nothing_usable => {
            // What was answered (say, `initialize`) is written first.
            control.close();
            drop((out, control));
            let _ = writer.await;
            return match nothing_usable {
                Some(Err(message)) => Err(usage(message)),
                _ => Ok(exit::OK),
            };
        }
    };
    // Each command's sandbox is started before it is needed: each turn's
    // first beside its first model call (`TurnOptions::prestart_sandbox`),
    // as `agentd run` does, and each next one after the command before. An
    // Agent SDK app starts one such process per query, so its first command
    // is the one a cold sandbox start would delay.
    let spares = config.server.spare_sandboxes.unwrap_or(SPARE_SANDBOXES);
    agentd_sandbox::set_spare_capacity(spares);
    let (service, session) = open_session(&args, config, data_dir).await?;
    let process = Process::new(&service, &session, &args, settings, live, control.clone())?;
    let outcome = process.run_all(first, &mut next_turn, client_servers).await;
    control.close();
    agentd_sandbox::set_spare_capacity(0);
    shutdown(&service).await;
    let (last, mut code, wire) = outcome;
    if let Some(finished) = &last {
        match args.output_format {
            ClaudeOutput::Json => out.send(wire.result(finished)),
            ClaudeOutput::Text => println!("{}", text_result(&wire, finished)),
            ClaudeOutput::StreamJson => {}
        }
        if code == exit::OK && finished.status != TurnStatus::Completed {
            code = exit::for_status(finished.status);
        }
    }
    drop((out, control, process));
    let _ = writer.await;
    Ok(code)
}

/// The session to work in: resumed (or forked from), or new on the current
/// directory.
async fn open_session(
    args: &ClaudeArgs,
    config: Config,
    data_dir: PathBuf,
) -> Result<(SessionService, SessionRecord), Failure> {
    let flags = crate::SessionFlags {
        continue_latest: args.continue_latest,
        resume: args.resume.clone(),
        cwd: None,
        model: args.model.clone(),
        profile: args.profile.clone(),
        permission_mode: args.mode(),
        dangerously_skip_permissions: false,
        allow: Vec::new(),
        allowed_tools: Vec::new(),
        disallowed_tools: Vec::new(),
    };
    let (service, session) = open_local(&flags, config, data_dir, Connections::OneShot).await?;
    if !args.fork_session {
        return Ok((service, session));
    }
    let forked = service
        .fork(session, LOCAL_USER, None)
        .await
        .map_err(failed)?;
    Ok((service, forked.session))
}

/// The text `--output-format text` prints.
fn text_result(wire: &Wire, finished: &TurnFinished) -> String {
    let result = wire.result(finished);
    result["result"].as_str().unwrap_or_default().to_string()
}

/// One process's turns.
struct Process<'a> {
    service: &'a SessionService,
    session: &'a SessionRecord,
    args: &'a ClaudeArgs,
    settings: Rules,
    live: Shared,
    control: Arc<Control>,
    on_no_answer: agentd_server::config::NoAnswer,
    /// The profile's permission mode, for the init message.
    default_mode: PermissionMode,
}

impl<'a> Process<'a> {
    fn new(
        service: &'a SessionService,
        session: &'a SessionRecord,
        args: &'a ClaudeArgs,
        settings: Rules,
        live: Shared,
        control: Arc<Control>,
    ) -> Result<Self, Failure> {
        let config = &service.registry().runtime().config;
        let profile = config.profile(&session.profile).map_err(usage)?;
        if settings.sandbox && profile.sandbox == SandboxMode::Off {
            return Err(usage(format!(
                "--settings asks for the sandbox, and profile {:?} runs commands unsandboxed",
                session.profile
            )));
        }
        Ok(Self {
            service,
            session,
            args,
            settings,
            live,
            control,
            on_no_answer: profile.on_no_answer,
            default_mode: profile.mode,
        })
    }

    /// Runs `first` and each further message as it comes, until the input
    /// ends, a line cannot be used or a turn cannot run. Returns the last
    /// turn's end, the exit code so far and the messages' state.
    async fn run_all(
        &self,
        first: (TurnKind, u64),
        next_turn: &mut mpsc::UnboundedReceiver<stdin::NextTurn>,
        client_servers: Vec<McpServerConfig>,
    ) -> (Option<TurnFinished>, u8, Wire) {
        let mut wire = Wire::new(
            self.session.id.clone(),
            self.args
                .model
                .clone()
                .unwrap_or_else(|| self.session.model.clone()),
            self.args.include_partial_messages,
        );
        let mut pool: Option<McpPool> = None;
        let (mut last, mut code) = (None, exit::OK);
        let mut next = Some(Ok(first));
        while let Some(turn) = next.take() {
            let (kind, epoch) = match turn {
                Ok(turn) => turn,
                Err(message) => {
                    eprintln!("agentd: {message}");
                    code = exit::USAGE;
                    break;
                }
            };
            // Made at the first turn: `initialize` may name servers.
            if pool.is_none() {
                match self.mcp_pool(&client_servers) {
                    Ok(made) => pool = made,
                    Err(Failure(failed_code, message)) => {
                        eprintln!("agentd: {message}");
                        code = failed_code;
                        break;
                    }
                }
            }
            match self.turn(kind, epoch, &mut wire, pool.clone()).await {
                Ok(finished) => last = Some(finished),
                Err(Failure(failed_code, message)) => {
                    eprintln!("agentd: {message}");
                    code = failed_code;
                    break;
                }
            }
            next = next_turn.recv().await;
        }
        if let Some(pool) = pool {
            pool.shutdown().await;
        }
        (last, code, wire)
    }

    /// The client's MCP servers, once: `--mcp-config`'s and the in-process
    /// ones named at `initialize`, held to the profile's network allowlist;
    /// none may take the name of a server the operator configured.
    fn mcp_pool(&self, configured: &[McpServerConfig]) -> Result<Option<McpPool>, Failure> {
        let mut servers = configured.to_vec();
        let named = self.live.lock().map(|live| live.sdk_servers.clone());
        for name in named.unwrap_or_default() {
            client_parts::check_server_name(&name)
                .map_err(|err| usage(format!("MCP server {name:?}: {err}")))?;
            if !servers.iter().any(|server| server.name == name) {
                servers.push(client_parts::sdk_server(&self.control, &name));
            }
        }
        let runtime = self.service.registry().runtime();
        let profile = runtime
            .config
            .profile(&self.session.profile)
            .map_err(usage)?;
        let mut held = Vec::with_capacity(servers.len());
        for server in servers {
            if runtime
                .config
                .mcp_servers
                .iter()
                .any(|own| own.name == server.name)
            {
                return Err(usage(format!(
                    "MCP server {:?}: the name is taken by a server agentd is configured with",
                    server.name
                )));
            }
            let name = server.name.clone();
            held.push(match profile.network.allowlist() {
                Some(list) => agentd_server::egress::mcp_within(server, list).ok_or_else(|| {
                    usage(format!(
                        "MCP server {name:?}: its URL is not on the profile's network allowlist"
                    ))
                })?,
                None => server,
            });
        }
        Ok((!held.is_empty()).then(|| McpPool::new(held)))
    }

    /// The turn's options as the flags and the client's requests left
    /// them; `cancel` becomes the turn an interrupt stops (at once, if one
    /// came after its message while no turn ran).
    fn options(&self, cancel: &CancellationToken, epoch: u64, mcp: Option<McpPool>) -> TurnOptions {
        let mut live = self
            .live
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        live.current = Some(cancel.clone());
        if live.idle_interrupts > epoch {
            cancel.cancel();
        }
        let answers: Arc<dyn agentd_server::approvals::AnswerSource> =
            match self.args.permission_prompt_tool.as_deref() {
                Some("stdio") => Arc::new(answers::ClientAnswers {
                    control: self.control.clone(),
                    live: self.live.clone(),
                }),
                _ => Arc::new(TerminalAnswers::new(
                    self.on_no_answer,
                    self.args.input_format == ClaudeInput::StreamJson,
                )),
            };
        let mut allow = self.args.allow_rules();
        allow.extend(self.settings.allow.iter().cloned());
        let mut deny = self.args.deny_rules();
        deny.extend(self.settings.deny.iter().cloned());
        TurnOptions {
            permission_mode: live.mode,
            allow,
            deny,
            ask: self.settings.ask.clone(),
            answers: Some(answers),
            model: live.model.clone(),
            max_turns: self.args.max_turns,
            max_budget_usd: self.args.max_budget_usd,
            system_prompt: live.system_prompt.clone(),
            append_system_prompt: live.append_system_prompt.clone(),
            thinking_budget: self.args.thinking_budget().ok().flatten(),
            hooks: live.hooks.clone(),
            mcp,
            builtin_tools: self.args.builtin_tools(),
            project_config: self.args.project_config(),
            agents: live.agents.clone(),
            policy_slot: Some(live.policy.clone()),
            prestart_sandbox: true,
            ..TurnOptions::default()
        }
    }

    /// Runs one message as a turn, writing its messages as they come.
    async fn turn(
        &self,
        kind: TurnKind,
        epoch: u64,
        wire: &mut Wire,
        mcp: Option<McpPool>,
    ) -> Result<TurnFinished, Failure> {
        let cancel = CancellationToken::new();
        let options = self.options(&cancel, epoch, mcp);
        if let Some(model) = &options.model {
            wire.model = model.clone();
        }
        let stream = self.args.output_format == ClaudeOutput::StreamJson;
        let out = self.control.output();
        if stream {
            out.send(self.init(&options, &wire.model));
        }
        let (events, mut received) = mpsc::unbounded_channel::<EventEnvelope>();
        let run = self
            .service
            .run_here(self.session, &kind, options, Some(events), cancel.clone());
        tokio::pin!(run);
        // A client that went away gets no more work done for it.
        let gone = out.gone();
        let stop_when_gone = async move {
            gone.cancelled().await;
            cancel.cancel();
            std::future::pending::<()>().await;
        };
        tokio::pin!(stop_when_gone);
        let mut emit = |envelope: EventEnvelope| {
            for message in wire.event(&envelope.event) {
                if stream {
                    out.send(message);
                }
            }
        };
        let outcome = loop {
            tokio::select! {
                Some(envelope) = received.recv() => emit(envelope),
                outcome = &mut run => break outcome,
                () = &mut stop_when_gone => {}
            }
        };
        while let Some(envelope) = received.recv().await {
            emit(envelope);
        }
        if let Ok(mut live) = self.live.lock() {
            live.current = None;
            live.policy.clear();
        }
        match outcome {
            Ok(Some(finished)) => Ok(finished),
            Ok(None) => Err(failed("the turn was not started")),
            Err(err) => Err(failed(err)),
        }
    }

    /// The `system` init message that starts each turn's messages.
    fn init(&self, options: &TurnOptions, model: &str) -> Value {
        let mut tools: Vec<String> = agentd_tools::builtin_tools()
            .iter()
            .map(|tool| tool.name().to_string())
            .filter(|name| options.offers_builtin(name))
            .collect();
        tools.extend(["TodoWrite", "AskUserQuestion", "Task"].map(String::from));
        let servers: Vec<Value> = options
            .mcp
            .as_ref()
            .into_iter()
            .flat_map(|pool| pool.configs())
            .map(|server| json!({"name": server.name, "status": "connected"}))
            .collect();
        let mode =
            PermissionMode::claude_name(options.permission_mode.unwrap_or(self.default_mode));
        json!({
            "type": "system",
            "subtype": "init",
            "cwd": self.session.workspace,
            "session_id": self.session.id,
            "tools": tools,
            "mcp_servers": servers,
            "model": model,
            "permissionMode": mode,
            "slash_commands": [],
            "apiKeySource": "none",
            "claude_code_version": CLAUDE_PROTOCOL_VERSION,
            "agentd_version": env!("CARGO_PKG_VERSION"),
            "output_style": "default",
            "agents": [],
            "skills": [],
            "plugins": [],
            "uuid": uuid::Uuid::new_v4().to_string(),
        })
    }
}
