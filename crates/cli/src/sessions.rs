//! `agentd sessions ls|show|export|import|rm|checkpoints|rewind|fork`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use agentd_protocol::{ContentBlock, Role};
use agentd_server::config::Config;
use agentd_server::paths::Connections;
use agentd_server::session::history::Rewind;
use agentd_store::SessionExport;
use serde_json::json;

use crate::run::LOCAL_USER;
use crate::{SessionsCommand, exit, history};

pub async fn run(command: SessionsCommand, config: Config, data_dir: PathBuf) -> u8 {
    let service = match crate::service::open(config, data_dir, Connections::One).await {
        Ok(service) => service,
        Err(err) => return exit::report(exit::USAGE, err),
    };
    let store = service.registry().runtime().store.clone();
    let outcome = match command {
        SessionsCommand::Ls { limit, json } => ls(store.as_ref(), limit, json).await,
        SessionsCommand::Show { id, json } => show(store.as_ref(), &id, json).await,
        SessionsCommand::Export { id } => export(store.as_ref(), &id).await,
        SessionsCommand::Import { file } => import(store.as_ref(), &file).await,
        SessionsCommand::Rm { id } => history::rm(&service, &id).await.or_else(history::refused),
        SessionsCommand::Checkpoints { id } => history::checkpoints(&service, &id)
            .await
            .or_else(history::refused),
        SessionsCommand::Rewind {
            id,
            checkpoint_id,
            files_only,
            history_only,
        } => {
            let rewind = Rewind {
                checkpoint_id,
                files: !history_only,
                history: !files_only,
            };
            history::rewind(&service, &id, rewind)
                .await
                .or_else(history::refused)
        }
        SessionsCommand::Fork { id, at } => history::fork(&service, &id, at.as_deref())
            .await
            .or_else(history::refused),
    };
    exit::or_failed(outcome)
}

async fn ls(
    store: &dyn agentd_store::Store,
    limit: u32,
    as_json: bool,
) -> Result<u8, agentd_store::StoreError> {
    let sessions = store.list_sessions(LOCAL_USER, None, limit).await?;
    if as_json {
        exit::print_json(&sessions);
        return Ok(exit::OK);
    }
    if sessions.is_empty() {
        eprintln!("no sessions yet; start one with `agentd run \"…\"`");
        return Ok(exit::OK);
    }
    println!(
        "{:<36}  {:<8}  {:>5}  {:>9}  {:<20}  TITLE",
        "ID", "STATUS", "TURNS", "COST", "UPDATED"
    );
    for s in sessions {
        println!(
            "{:<36}  {:<8}  {:>5}  {:>9}  {:<20}  {}",
            s.id,
            s.status.as_str(),
            s.turns,
            format!("${:.4}", s.cost_usd),
            s.updated_at.format("%Y-%m-%d %H:%M:%S"),
            s.title.as_deref().unwrap_or("")
        );
    }
    Ok(exit::OK)
}

async fn export(store: &dyn agentd_store::Store, id: &str) -> Result<u8, agentd_store::StoreError> {
    let Some(export) = store.export_session(id).await? else {
        eprintln!("agentd: no session with id {id}");
        return Ok(exit::USAGE);
    };
    // Host paths mean nothing certain in another store or on another host,
    // and the importer's grants are not the exporter's: they stay behind.
    if store.session_mounts(id).await?.is_some() {
        eprintln!(
            "agentd: the session's host mounts are not exported; an imported session has none \
             (create a session with the mounts it needs instead)"
        );
    }
    let text = serde_json::to_string(&export)
        .map_err(|e| agentd_store::StoreError::Database(format!("encoding the export: {e}")))?;
    let mut out = std::io::stdout().lock();
    if let Err(err) = writeln!(out, "{text}").and_then(|()| out.flush()) {
        eprintln!("agentd: writing the export: {err}");
        return Ok(exit::FAILED);
    }
    Ok(exit::OK)
}

async fn import(
    store: &dyn agentd_store::Store,
    file: &Path,
) -> Result<u8, agentd_store::StoreError> {
    let text = if file == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map(|_| text)
    } else {
        std::fs::read_to_string(file)
    };
    let text = match text {
        Ok(text) => text,
        Err(err) => {
            eprintln!("agentd: reading {}: {err}", file.display());
            return Ok(exit::USAGE);
        }
    };
    let export: SessionExport = match serde_json::from_str(&text) {
        Ok(export) => export,
        Err(err) => {
            eprintln!(
                "agentd: {} is not an `agentd sessions export`: {err}",
                file.display()
            );
            return Ok(exit::USAGE);
        }
    };
    if export.format != SessionExport::FORMAT {
        eprintln!(
            "agentd: export format {} is not supported (this version reads {})",
            export.format,
            SessionExport::FORMAT
        );
        return Ok(exit::USAGE);
    }
    // The server's rule for tags: the tag filter relies on it.
    if let Some(err) = export
        .session
        .tags
        .iter()
        .find_map(|tag| agentd_store::check_tag(tag).err())
    {
        eprintln!("agentd: {} is not importable: {err}", file.display());
        return Ok(exit::USAGE);
    }
    store.import_session(&export).await?;
    println!("{}", export.session.id);
    Ok(exit::OK)
}

async fn show(
    store: &dyn agentd_store::Store,
    id: &str,
    as_json: bool,
) -> Result<u8, agentd_store::StoreError> {
    let Some(session) = store
        .get_session(id)
        .await?
        .filter(|s| s.owner == LOCAL_USER)
    else {
        eprintln!("agentd: no session with id {id}");
        return Ok(exit::USAGE);
    };
    let messages = store.messages(id).await?;
    if as_json {
        exit::print_json(&json!({"session": session, "messages": messages}));
        return Ok(exit::OK);
    }
    println!("session   {}", session.id);
    println!("title     {}", session.title.as_deref().unwrap_or(""));
    println!("status    {}", session.status.as_str());
    println!("model     {}", session.model);
    println!("workspace {}", session.workspace);
    println!(
        "totals    {} turns, {} input + {} output tokens, ${:.4}",
        session.turns, session.usage.input_tokens, session.usage.output_tokens, session.cost_usd
    );
    for stored in messages {
        let who = match stored.message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        for block in &stored.message.content {
            let line = match block {
                ContentBlock::Text { text } => text.clone(),
                ContentBlock::Thinking { thinking, .. } => format!("(thinking) {thinking}"),
                ContentBlock::ToolUse { name, input, .. } => format!("→ {name} {input}"),
                ContentBlock::ToolResult {
                    content, is_error, ..
                } => {
                    let mark = if *is_error { "✗" } else { "←" };
                    format!("{mark} {}", crate::output::first_line(content, 100))
                }
                ContentBlock::Image { .. } => "(image)".to_string(),
                ContentBlock::Document { title, .. } => {
                    format!("(document {})", title.as_deref().unwrap_or(""))
                }
            };
            println!("[{who}] {line}");
        }
    }
    Ok(exit::OK)
}
