//! `agentd run`: one headless turn in a workspace.

use std::io::Read as _;
use std::path::PathBuf;
use std::sync::Arc;

use agentd_protocol::{ContentBlock, MAX_IMAGE_BYTES, sniff_image};
use base64::Engine as _;

use agentd_server::config::Config;
use agentd_server::models::resolve_model;
use agentd_server::paths::prepare_data_dir;
use agentd_server::registry::TurnKind;
use agentd_server::runtime::{TurnOptions, check_workspace};
use agentd_server::session::{SessionError, SessionService};
use agentd_server::workspace_owner::check_may_hand_over;
use agentd_store::SessionRecord;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::RunArgs;
use crate::approve::TerminalAnswers;
use crate::exit::{self, Failure, failed, usage};
use crate::output::Printer;

/// The owner of sessions created from the command line.
pub const LOCAL_USER: &str = "local";

pub async fn run(args: RunArgs, config: Config, data_dir: PathBuf) -> u8 {
    match run_inner(args, config, data_dir).await {
        Ok(code) => code,
        Err(Failure(code, message)) => exit::report(code, message),
    }
}

async fn run_inner(args: RunArgs, config: Config, data_dir: PathBuf) -> Result<u8, Failure> {
    let workspace = match (&args.resume, &args.cwd) {
        (Some(_), _) => None,
        (None, Some(dir)) => Some(dir.clone()),
        (None, None) => Some(std::env::current_dir().map_err(usage)?),
    };
    let workspace = match &workspace {
        Some(workspace) => Some(check_workspace(workspace, &data_dir).map_err(usage)?),
        None => None,
    };
    prepare_data_dir(&data_dir).map_err(usage)?;
    let service = crate::service::open(config, data_dir)
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
    let session = session_for(&args, &service, workspace).await?;

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
    let options = TurnOptions {
        permission_mode: args.permission_mode,
        allow: args
            .allow
            .iter()
            .cloned()
            .chain(
                args.allowed_tools
                    .iter()
                    .flat_map(|rules| split_rules(rules)),
            )
            .collect(),
        deny: args
            .disallowed_tools
            .iter()
            .flat_map(|rules| split_rules(rules))
            .collect(),
        answers: Some(Arc::new(TerminalAnswers {
            on_no_answer: profile.on_no_answer,
        })),
        model: args.model.clone(),
        max_turns: args.max_turns,
        max_budget_usd: args.max_budget_usd,
        system_prompt: args.system_prompt.clone(),
        append_system_prompt: args.append_system_prompt.clone(),
        client_request_id: None,
        turn_id: None,
        thinking_budget: None,
    };
    let kind = prompt(&args)?;
    let outcome = service
        .run_here(&session, &kind, options, Some(sender), cancel)
        .await;
    runtime.mcp.shutdown().await;
    runtime.claude.shutdown().await;
    runtime.background.shutdown().await;
    runtime.egress.shutdown();
    interrupt.abort();
    let printer = printing
        .await
        .map_err(|err| failed(format!("output task failed: {err}")))?;
    let finished = match outcome {
        Ok(Some(finished)) => finished,
        Ok(None) => return Err(failed("the turn was not started")),
        Err(err) => return Err(failed(err)),
    };
    printer.finish(&session.id, &finished);
    Ok(exit::for_status(finished.status))
}

/// The prompt and the `--image` files after it.
fn prompt(args: &RunArgs) -> Result<TurnKind, Failure> {
    if args.images.is_empty() {
        return Ok(TurnKind::from_text(args.prompt.clone()));
    }
    let mut content = vec![ContentBlock::Text {
        text: args.prompt.clone(),
    }];
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
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(usage(format!(
            "--image {shown}: images over {MAX_IMAGE_BYTES} bytes cannot be sent to a model"
        )));
    }
    let media_type = sniff_image(&bytes).ok_or_else(|| {
        usage(format!(
            "--image {shown}: not a PNG, JPEG, GIF or WebP image"
        ))
    })?;
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(ContentBlock::base64_image(media_type, data))
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
fn split_rules(text: &str) -> Vec<String> {
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
    args: &RunArgs,
    service: &SessionService,
    workspace: Option<PathBuf>,
) -> Result<SessionRecord, Failure> {
    let env = |key: &str| std::env::var(key).ok();
    let runtime = service.registry().runtime();
    let resume = match (&args.resume, args.continue_latest) {
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
        None => {
            let workspace = workspace.unwrap_or_default();
            let model =
                resolve_model(&runtime.config, args.model.as_deref(), &env).map_err(usage)?;
            if let Some(notice) = model.notice {
                eprintln!("agentd: {notice}");
            }
            service
                .create_in(LOCAL_USER, &workspace, &model.spec, &args.profile)
                .await
                .map_err(usage)
        }
    }
}
