//! `agentd sessions ls|show`.

use std::path::PathBuf;

use agentd_protocol::{ContentBlock, Role};
use agentd_server::config::Config;
use agentd_server::paths::open_store;
use serde_json::json;

use crate::run::LOCAL_USER;
use crate::{SessionsCommand, exit};

pub async fn run(command: SessionsCommand, config: Config, data_dir: PathBuf) -> u8 {
    let env = |key: &str| std::env::var(key).ok();
    let store = match open_store(&data_dir, &config, &env).await {
        Ok(store) => store,
        Err(err) => {
            eprintln!("agentd: {err}");
            return exit::USAGE;
        }
    };
    let outcome = match command {
        SessionsCommand::Ls { limit, json } => ls(store.as_ref(), limit, json).await,
        SessionsCommand::Show { id, json } => show(store.as_ref(), &id, json).await,
    };
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("agentd: {err}");
            exit::FAILED
        }
    }
}

async fn ls(
    store: &dyn agentd_store::Store,
    limit: u32,
    as_json: bool,
) -> Result<u8, agentd_store::StoreError> {
    let sessions = store.list_sessions(LOCAL_USER, None, limit).await?;
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&sessions).unwrap_or_default()
        );
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
        let value = json!({"session": session, "messages": messages});
        println!(
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        );
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
                    let first: String = content
                        .lines()
                        .next()
                        .unwrap_or("")
                        .chars()
                        .take(100)
                        .collect();
                    format!("{mark} {first}")
                }
                ContentBlock::Image { .. } => "(image)".to_string(),
            };
            println!("[{who}] {line}");
        }
    }
    Ok(exit::OK)
}
