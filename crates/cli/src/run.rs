//! `agentd run`: headless turns in a workspace: the prompt argument's, or
//! one per message of `--input-format stream-json`.

use std::io::Read as _;
use std::path::PathBuf;
use std::sync::Arc;

use agentd_protocol::{ContentBlock, ImageError, MAX_IMAGE_BYTES, image_block};
use agentd_protocol::{ErrorCode, ErrorInfo, Event, EventEnvelope, TurnFinished, TurnStatus};
use agentd_server::config::Config;
use agentd_server::config::NoAnswer;
use agentd_server::models::resolve_model;
use agentd_server::paths::Connections;
use agentd_server::paths::prepare_data_dir;
use agentd_server::registry::TurnKind;
use agentd_server::runtime::{TurnOptions, check_workspace};
use agentd_server::session::{SessionError, SessionService};
use agentd_server::workspace_owner::check_may_hand_over;
use agentd_store::SessionRecord;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::approve::TerminalAnswers;
use crate::exit::{self, Failure, failed, usage};
use crate::output::Printer;
use crate::stream_input::TurnInput;
use crate::{InputFormat, OutputFormat, RunArgs, SessionFlags};

/// The owner of sessions created from the command line.
pub const LOCAL_USER: &str = "local";

/// Spare sandboxes kept by a one-shot run (`[server] spare_sandboxes`
/// overrides).
const RUN_SPARES: usize = 2;

pub async fn run(args: RunArgs, config: Config, data_dir: PathBuf) -> u8 {
    match run_inner(args, config, data_dir).await {
        Ok(code) => code,
        Err(Failure(code, message)) => exit::report(code, message),
    }
}

async fn run_inner(args: RunArgs, config: Config, data_dir: PathBuf) -> Result<u8, Failure> {
    let mut input = turn_input(&args)?;
    // The first message before anything is created: bad or no input leaves
    // no empty session behind.
    let first = input
        .next()
        .await
        .map_err(usage)?
        .ok_or_else(|| usage("stdin held no message (--input-format stream-json)"))?;
    // Spares: the first command's sandbox starts beside the first model
    // call (`TurnOptions::prestart_sandbox`), each next one after the
    // command before.
    agentd_sandbox::set_spare_capacity(config.server.spare_sandboxes.unwrap_or(RUN_SPARES));
    let (service, session) =
        open_local(&args.session, config, data_dir, Connections::OneShot).await?;
    let runtime = service.registry().runtime();

    let cancel = CancellationToken::new();
    let interrupt = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\nagentd: interrupting…");
                cancel.cancel();
            }
        }
    });
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let mut printer = Printer::new(args.output_format);
    let printing = tokio::spawn(async move {
        while let Some(envelope) = receiver.recv().await {
            printer.event(&envelope);
        }
        printer
    });
    let profile = runtime.config.profile(&session.profile).map_err(usage)?;
    let options = turn_options(&args, profile.on_no_answer);
    let turns = Turns {
        service: &service,
        session: &session,
        options,
        events: sender,
        cancel,
    };
    let outcome = turns.run_all(first, &mut input).await;
    drop(turns);
    agentd_sandbox::set_spare_capacity(0);
    shutdown(&service).await;
    interrupt.abort();
    let printer = printing
        .await
        .map_err(|err| failed(format!("output task failed: {err}")))?;
    let finished = outcome?;
    printer.finish(&session.id, &finished);
    Ok(exit::for_status(finished.status))
}

/// The prompt argument (its images read now: a bad one leaves no session
/// behind), or stdin's messages: which flags allow which.
fn turn_input(args: &RunArgs) -> Result<TurnInput, Failure> {
    match (args.input_format, &args.prompt) {
        (InputFormat::Text, Some(text)) => Ok(TurnInput::prompt(prompt(args, text.clone())?)),
        (InputFormat::Text, None) => Err(usage(
            "a prompt is needed (or --input-format stream-json with messages on stdin)",
        )),
        (InputFormat::StreamJson, _) if !args.images.is_empty() => Err(usage(
            "--image is for a prompt argument; with --input-format stream-json send images \
             as base64 image blocks in the stdin messages",
        )),
        (InputFormat::StreamJson, Some(_)) => Err(usage(
            "with --input-format stream-json the messages come on stdin; give no prompt argument",
        )),
        (InputFormat::StreamJson, None) if args.output_format != OutputFormat::StreamJson => Err(
            usage("--input-format stream-json needs --output-format stream-json"),
        ),
        (InputFormat::StreamJson, None) => Ok(TurnInput::stdin()),
    }
}

fn turn_options(args: &RunArgs, on_no_answer: NoAnswer) -> TurnOptions {
    TurnOptions {
        permission_mode: args.session.mode(),
        allow: args.session.allow_rules(),
        deny: args.session.deny_rules(),
        answers: Some(Arc::new(TerminalAnswers::new(
            on_no_answer,
            args.input_format == InputFormat::StreamJson,
        ))),
        model: args.session.model.clone(),
        max_turns: args.max_turns,
        max_budget_usd: args.max_budget_usd,
        system_prompt: args.system_prompt.clone(),
        append_system_prompt: args.append_system_prompt.clone(),
        client_request_id: None,
        turn_id: None,
        thinking_budget: None,
        prestart_sandbox: true,
        ..TurnOptions::default()
    }
}

/// The run's turns, one per message, in one session.
struct Turns<'a> {
    service: &'a SessionService,
    session: &'a SessionRecord,
    options: TurnOptions,
    events: mpsc::UnboundedSender<EventEnvelope>,
    cancel: CancellationToken,
}

impl Turns<'_> {
    /// Runs `first`, then each further message, until the input ends or a
    /// turn does not complete (its outcome is the run's). A message that
    /// cannot be read ends the run as a usage error, after an `error` record.
    async fn run_all(
        &self,
        first: TurnKind,
        input: &mut TurnInput,
    ) -> Result<TurnFinished, Failure> {
        let mut kind = first;
        loop {
            let finished = self.run_one(kind).await?;
            if finished.status != TurnStatus::Completed {
                return Ok(finished);
            }
            let next = tokio::select! {
                next = input.next() => next,
                () = self.cancel.cancelled() => return Ok(TurnFinished {
                    status: TurnStatus::Interrupted,
                    ..finished
                }),
            };
            match next {
                Ok(Some(next)) => kind = next,
                Ok(None) => return Ok(finished),
                Err(message) => {
                    let _ = self.events.send(input_error(&self.session.id, &message));
                    return Err(usage(message));
                }
            }
        }
    }

    async fn run_one(&self, kind: TurnKind) -> Result<TurnFinished, Failure> {
        let outcome = self
            .service
            .run_here(
                self.session,
                &kind,
                self.options.clone(),
                Some(self.events.clone()),
                self.cancel.clone(),
            )
            .await;
        match outcome {
            Ok(Some(finished)) => Ok(finished),
            Ok(None) => Err(failed("the turn was not started")),
            Err(err) => Err(failed(err)),
        }
    }
}

/// The `error` record of an unusable stdin line: not an event of the
/// session (never stored), hence seq 0.
fn input_error(session_id: &str, message: &str) -> EventEnvelope {
    EventEnvelope {
        seq: 0,
        session_id: session_id.to_string(),
        at: chrono::Utc::now(),
        event: Event::Error(ErrorInfo {
            code: ErrorCode::InvalidInput,
            message: message.to_string(),
            retryable: false,
        }),
    }
}

/// The session service on the local store (one connection: `One`, or
/// `OneShot` for a process that ends with its run) and the session `flags`
/// name (or a new one on the workspace), checked as `agentd run` and `agentd
/// chat` need: the workspace may be handed to the agent's uid.
pub async fn open_local(
    flags: &SessionFlags,
    config: Config,
    data_dir: PathBuf,
    connections: Connections,
) -> Result<(SessionService, SessionRecord), Failure> {
    let workspace = match (&flags.resume, &flags.cwd) {
        (Some(_), _) => None,
        (None, Some(dir)) => Some(dir.clone()),
        (None, None) => Some(std::env::current_dir().map_err(usage)?),
    };
    let workspace = match &workspace {
        Some(workspace) => Some(check_workspace(workspace, &data_dir).map_err(usage)?),
        None => None,
    };
    prepare_data_dir(&data_dir).map_err(usage)?;
    // One session in this process: one SQLite connection opens faster
    // than a pool of them.
    let service = crate::service::open(config, data_dir, connections)
        .await
        .map_err(usage)?;
    let runtime = service.registry().runtime();
    // As root, the agent works as the local user's own uid, and the
    // directory is handed to it before the turn: refuse one that must not be.
    if let Some(workspace) = &workspace
        && let Some(identity) = runtime.agent_identity(LOCAL_USER).await.map_err(usage)?
    {
        check_may_hand_over(workspace, &runtime.data_dir, identity).map_err(usage)?;
    }
    let session = session_for(flags, &service, workspace).await?;
    Ok((service, session))
}

/// The local store's service, with no session yet (`agentd acp` makes them
/// as the editor asks).
pub async fn open_service(config: Config, data_dir: PathBuf) -> Result<SessionService, Failure> {
    prepare_data_dir(&data_dir).map_err(usage)?;
    crate::service::open(config, data_dir, Connections::Pooled)
        .await
        .map_err(usage)
}

/// A new local session on `dir`, checked as `agentd run` checks its
/// directory: a real directory outside the data dir that may be handed to
/// the agent's user.
pub async fn create_checked(
    flags: &SessionFlags,
    service: &SessionService,
    dir: &std::path::Path,
) -> Result<SessionRecord, Failure> {
    let runtime = service.registry().runtime();
    let workspace = check_workspace(dir, &runtime.data_dir).map_err(usage)?;
    if let Some(identity) = runtime.agent_identity(LOCAL_USER).await.map_err(usage)? {
        check_may_hand_over(&workspace, &runtime.data_dir, identity).map_err(usage)?;
    }
    create_local(flags, service, &workspace).await
}

/// Stop what turns left running in this process (MCP servers, background
/// commands, the egress proxy).
pub async fn shutdown(service: &SessionService) {
    let runtime = service.registry().runtime();
    runtime.mcp.shutdown().await;
    runtime.claude.shutdown().await;
    runtime.model_gateway.shutdown().await;
    runtime.background.shutdown().await;
    runtime.egress.shutdown();
}

/// A new session of `flags`' model and profile on `workspace`.
pub async fn create_local(
    flags: &SessionFlags,
    service: &SessionService,
    workspace: &std::path::Path,
) -> Result<SessionRecord, Failure> {
    let env = |key: &str| std::env::var(key).ok();
    let runtime = service.registry().runtime();
    let model = resolve_model(&runtime.config, flags.model.as_deref(), &env).map_err(usage)?;
    if let Some(notice) = model.notice {
        eprintln!("agentd: {notice}");
    }
    service
        .create_in(LOCAL_USER, workspace, &model.spec, &flags.profile)
        .await
        .map_err(usage)
}

/// The first message: its text, with `--image` files attached.
fn prompt(args: &RunArgs, text: String) -> Result<TurnKind, Failure> {
    if args.images.is_empty() {
        return Ok(TurnKind::from_text(text));
    }
    let mut content = vec![ContentBlock::Text { text }];
    for path in &args.images {
        content.push(image(path)?);
    }
    Ok(TurnKind::from_blocks(content, None))
}

/// An image file of the user's, as a base64 image block.
fn image(path: &std::path::Path) -> Result<ContentBlock, Failure> {
    let shown = path.display();
    let mut bytes = Vec::new();
    let file = std::fs::File::open(path).map_err(|err| usage(format!("--image {shown}: {err}")))?;
    // One byte past the cap tells a file that is too large, unread.
    std::io::Read::take(file, MAX_IMAGE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| usage(format!("--image {shown}: {err}")))?;
    image_block(&bytes).map_err(|err| match err {
        ImageError::TooLarge { .. } => usage(format!(
            "--image {shown}: images over {MAX_IMAGE_BYTES} bytes cannot be sent to a model"
        )),
        other => usage(format!("--image {shown}: {other}")),
    })
}

/// The id of the most recent session on `workspace` (`--continue`).
async fn latest_in(
    service: &SessionService,
    workspace: Option<&std::path::Path>,
) -> Result<String, Failure> {
    let workspace = workspace.ok_or_else(|| usage("--continue needs a directory"))?;
    let sessions = service.list(LOCAL_USER, None, 200).await.map_err(failed)?;
    sessions
        .into_iter()
        .find(|session| std::path::Path::new(&session.workspace) == workspace)
        .map(|session| session.id)
        .ok_or_else(|| {
            usage(format!(
                "no session to continue in {}; start one without --continue",
                workspace.display()
            ))
        })
}

/// Claude Code's rule lists: rules separated by commas or spaces, except
/// inside a rule's parentheses (`Bash(git log *)`).
pub fn split_rules(text: &str) -> Vec<String> {
    let mut rules = Vec::new();
    let (mut current, mut depth) = (String::new(), 0usize);
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' | ' ' | '\t' if depth == 0 => {
                if !current.is_empty() {
                    rules.push(std::mem::take(&mut current));
                }
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() {
        rules.push(current);
    }
    rules
}

/// The session to run in: the resumed one (its dead turns finished), or a
/// new one on `workspace`.
async fn session_for(
    flags: &SessionFlags,
    service: &SessionService,
    workspace: Option<PathBuf>,
) -> Result<SessionRecord, Failure> {
    let runtime = service.registry().runtime();
    let resume = match (&flags.resume, flags.continue_latest) {
        (Some(id), _) => Some(id.clone()),
        (None, true) => Some(latest_in(service, workspace.as_deref()).await?),
        (None, false) => None,
    };
    match &resume {
        Some(id) => {
            let session = service
                .owned(LOCAL_USER, id)
                .await
                .map_err(|err| match err {
                    SessionError::NotFound => usage(format!("no session with id {id}")),
                    err => failed(err),
                })?;
            runtime.recover(Some(id)).await.map_err(failed)?;
            Ok(session)
        }
        None => create_local(flags, service, &workspace.unwrap_or_default()).await,
    }
}
