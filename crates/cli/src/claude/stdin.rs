//! stdin of `agentd claude --input-format stream-json`: user messages
//! become turns, in order; the client's answers complete agentd's requests;
//! the client's own requests are answered at once, while a turn runs
//! (`interrupt` stops it).

use std::sync::Arc;

use agentd_policy::permissions::PermissionMode;
use agentd_server::registry::TurnKind;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

use super::control::Control;
use super::{Shared, client_parts};
use crate::stream_input::user_message;

/// A turn to run (with the count of idle interrupts when it came: one
/// that came after it, before the turn started, stops it), or why the
/// input cannot be used.
pub type NextTurn = Result<(TurnKind, u64), String>;

/// Reads stdin until it ends (then every request still open fails) or a
/// line cannot be used (reported as the next turn's error).
pub async fn read(control: Arc<Control>, live: Shared, turns: mpsc::UnboundedSender<NextTurn>) {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut number = 0usize;
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(err) => {
                let _ = turns.send(Err(format!("cannot read stdin: {err}")));
                break;
            }
        };
        number += 1;
        if line.trim().is_empty() {
            continue;
        }
        if let Err(message) = take_line(&line, &control, &live, &turns) {
            let _ = turns.send(Err(format!("stdin line {number}: {message}")));
            break;
        }
    }
    control.close();
}

fn take_line(
    line: &str,
    control: &Arc<Control>,
    live: &Shared,
    turns: &mpsc::UnboundedSender<NextTurn>,
) -> Result<(), String> {
    let value: Value =
        serde_json::from_str(line).map_err(|err| format!("not a JSON object ({err})"))?;
    match value.get("type").and_then(Value::as_str) {
        Some("user") => {
            let kind = user_message(line)?;
            let epoch = live.lock().map_or(0, |live| live.idle_interrupts);
            let _ = turns.send(Ok((kind, epoch)));
        }
        Some("control_response") => control.answered(&value),
        Some("control_request") => {
            let request = value.get("request").unwrap_or(&Value::Null);
            match value.get("request_id").and_then(Value::as_str) {
                Some(request_id) => {
                    let outcome = client_request(request, control, live);
                    control.reply(request_id, outcome);
                }
                // Nobody to answer; the session goes on.
                None => eprintln!("agentd: a control_request without a request_id was ignored"),
            }
        }
        // Nothing to cancel: agentd's answers to the client are immediate.
        Some("control_cancel_request") | Some("keep_alive") => {}
        Some(other) => {
            return Err(format!(
                "type {other:?} is not supported (user, control_request, control_response)"
            ));
        }
        None => return Err("no \"type\"".into()),
    }
    Ok(())
}

/// Answers a request of the client's.
fn client_request(request: &Value, control: &Arc<Control>, live: &Shared) -> Result<Value, String> {
    let subtype = request.get("subtype").and_then(Value::as_str).unwrap_or("");
    let mut live = live
        .lock()
        .map_err(|_| "agentd's state is unusable".to_string())?;
    match subtype {
        "initialize" => {
            let hooks = request.get("hooks").unwrap_or(&Value::Null);
            let (hooks, unsupported) = client_parts::hooks_from_initialize(hooks, control)?;
            if !unsupported.is_empty() {
                eprintln!(
                    "agentd: hooks for {} are not run: agentd has no such events",
                    unsupported.join(", ")
                );
            }
            live.hooks = hooks;
            if let Some(prompt) = joined(request.get("systemPrompt")) {
                live.system_prompt = Some(prompt).filter(|p| !p.trim().is_empty());
            }
            if let Some(append) = joined(request.get("appendSystemPrompt")) {
                live.append_system_prompt = Some(append).filter(|p| !p.trim().is_empty());
            }
            if let Some(names) = request.get("sdkMcpServers").and_then(Value::as_array) {
                let names = names.iter().filter_map(Value::as_str).map(str::to_owned);
                live.sdk_servers = names.collect();
            }
            if let Some(agents) = request.get("agents").filter(|agents| !agents.is_null()) {
                live.agents = client_parts::agents(agents)?;
            }
            Ok(json!({
                "commands": [],
                "agents": [],
                "output_style": "default",
                "available_output_styles": ["default"],
                "models": [],
                "account": {},
                "pid": std::process::id(),
                "hooks_applied": true,
            }))
        }
        "interrupt" => {
            match &live.current {
                Some(turn) => turn.cancel(),
                // Between a message and its turn: that turn is stopped.
                None => live.idle_interrupts += 1,
            }
            Ok(json!({}))
        }
        "set_permission_mode" => {
            let mode = request.get("mode").and_then(Value::as_str).unwrap_or("");
            let mode = PermissionMode::parse(mode)
                .ok_or_else(|| format!("unknown permission mode {mode:?}"))?;
            // For the calls still to come in a running turn, and the turns after.
            live.policy.set_mode(mode);
            live.mode = Some(mode);
            Ok(json!({}))
        }
        "set_model" => {
            live.model = request
                .get("model")
                .and_then(Value::as_str)
                .filter(|model| !model.is_empty() && *model != "default")
                .map(str::to_owned);
            Ok(json!({}))
        }
        other => Err(format!(
            "agentd does not support the control request {other:?}"
        )),
    }
}

/// A prompt given as a string or a list of strings.
fn joined(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n\n"),
        ),
        _ => None,
    }
}
