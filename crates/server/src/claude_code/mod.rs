//! The `claude-code` engine (DESIGN §10): a turn of a session whose model has
//! `provider = "claude-code"` runs in the real `claude` CLI, one warm process
//! per live session, while agentd keeps the session, the events, the
//! transcript, the tools (served over MCP, see [`mcp`]) and the permissions.

mod mcp;
mod process;
mod transcript;
mod translate;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentd_engine::{Agent, ExternalTurn, TurnSink};
use agentd_protocol::{ErrorInfo, TurnFinished, TurnStatus, Usage};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::models::ClaudeCodeSettings;
use mcp::{Announced, McpEndpoint, TurnScope};
use process::{Launch, Line, MAX_LINE_BYTES, Process};
use translate::{CliResult, Step, TOOL_PREFIX, Translator};

/// How long an interrupted CLI gets to end its turn before it is killed.
const INTERRUPT_GRACE: Duration = Duration::from_secs(5);
/// How long a stopping CLI gets after stdin closes, and after TERM.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// A warm process without a turn for this long is stopped.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// One live session: its CLI (when warm) and its MCP endpoint.
struct Live {
    process: Option<Process>,
    model: String,
    mcp: McpEndpoint,
    announced: Announced,
    config_dir: PathBuf,
    cli_session_id: Option<String>,
    last_used: Instant,
}

/// The warm CLI processes of this server, by agentd session id.
#[derive(Clone, Default)]
pub struct ClaudeCode {
    live: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<Live>>>>>,
    reaper: Arc<std::sync::OnceLock<()>>,
    idle_timeout: Arc<Mutex<Option<Duration>>>,
}

/// What one turn needs from the runtime.
pub(crate) struct TurnRequest<'a> {
    pub session_id: &'a str,
    pub session_turns: u64,
    pub workspace: PathBuf,
    pub data_dir: PathBuf,
    pub store: Arc<dyn agentd_store::Store>,
    pub settings: ClaudeCodeSettings,
    pub agent: Arc<Agent>,
    pub sink: Arc<dyn TurnSink>,
    pub turn_id: String,
    pub text: &'a str,
    pub cancel: CancellationToken,
    pub timeout: Duration,
    pub max_turns: u32,
}

/// How a turn ended, before `turn.finished` is built.
pub(crate) struct Outcome {
    pub status: TurnStatus,
    pub result: Option<String>,
    pub usage: Usage,
    pub cost_usd: f64,
    pub model_calls: u32,
    pub error: Option<ErrorInfo>,
}

impl Outcome {
    pub(crate) fn store_failed(err: agentd_engine::SinkError) -> Self {
        failed("store_error", err.to_string())
    }
}

fn failed(code: &str, message: String) -> Outcome {
    Outcome {
        status: TurnStatus::Failed,
        result: None,
        usage: Usage::default(),
        cost_usd: 0.0,
        model_calls: 0,
        error: Some(ErrorInfo {
            code: code.into(),
            message,
            retryable: true,
        }),
    }
}

impl ClaudeCode {
    /// Stop warm processes idle for longer than `timeout` (default 10 min).
    pub fn set_idle_timeout(&self, timeout: Duration) {
        if let Ok(mut idle) = self.idle_timeout.lock() {
            *idle = Some(timeout);
        }
    }

    /// How many sessions have a warm CLI.
    pub fn live_sessions(&self) -> usize {
        self.live.lock().map(|l| l.len()).unwrap_or(0)
    }

    fn entry(&self, session_id: &str) -> Option<Arc<tokio::sync::Mutex<Live>>> {
        self.live.lock().ok()?.get(session_id).cloned()
    }

    fn start_reaper(&self) {
        let this = self.clone();
        self.reaper.get_or_init(|| {
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    this.reap().await;
                }
            });
        });
    }

    async fn reap(&self) {
        let timeout = self
            .idle_timeout
            .lock()
            .ok()
            .and_then(|t| *t)
            .unwrap_or(DEFAULT_IDLE_TIMEOUT);
        let entries: Vec<(String, Arc<tokio::sync::Mutex<Live>>)> = self
            .live
            .lock()
            .map(|l| l.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        for (id, entry) in entries {
            let Ok(mut live) = entry.try_lock() else {
                continue; // a turn is running
            };
            if live.last_used.elapsed() < timeout {
                continue;
            }
            if let Some(process) = live.process.take() {
                tracing::info!(session = %id, "stopping an idle claude process");
                process.stop(STOP_GRACE).await;
            }
            drop(live);
            if let Ok(mut map) = self.live.lock() {
                map.remove(&id);
            }
        }
    }

    /// Stop one session's CLI (e.g. the session was deleted).
    pub async fn stop_session(&self, session_id: &str) {
        let entry = self.live.lock().ok().and_then(|mut l| l.remove(session_id));
        if let Some(entry) = entry
            && let Some(process) = entry.lock().await.process.take()
        {
            process.stop(STOP_GRACE).await;
        }
    }

    /// Stop every CLI: close stdin, wait, TERM, KILL.
    pub async fn shutdown(&self) {
        let ids: Vec<String> = self
            .live
            .lock()
            .map(|l| l.keys().cloned().collect())
            .unwrap_or_default();
        futures::future::join_all(ids.iter().map(|id| self.stop_session(id))).await;
    }

    /// Run one turn in the session's CLI. Events go to `request.sink`; the
    /// caller emits `turn.started` before and `turn.finished` after.
    pub(crate) async fn run_turn(&self, request: TurnRequest<'_>) -> Outcome {
        self.start_reaper();
        let entry = match self.entry(request.session_id) {
            Some(entry) => entry,
            None => {
                let announced: Announced = Default::default();
                let mcp = match McpEndpoint::start(request.agent.offered_tools(), announced.clone())
                    .await
                {
                    Ok(mcp) => mcp,
                    Err(err) => {
                        return failed(
                            "claude_code_mcp",
                            format!("could not serve agentd's tools to the CLI: {err}"),
                        );
                    }
                };
                let entry = Arc::new(tokio::sync::Mutex::new(Live {
                    process: None,
                    model: request.settings.model.clone(),
                    mcp,
                    announced,
                    config_dir: request
                        .data_dir
                        .join("claude-code")
                        .join(request.session_id)
                        .join(".claude"),
                    cli_session_id: None,
                    last_used: Instant::now(),
                }));
                if let Ok(mut map) = self.live.lock() {
                    map.entry(request.session_id.to_string())
                        .or_insert(entry)
                        .clone()
                } else {
                    entry
                }
            }
        };
        let mut live = entry.lock_owned().await;
        live.last_used = Instant::now();
        live.mcp.set_tools(request.agent.offered_tools());
        live.mcp.set_scope(Some(TurnScope {
            agent: request.agent.clone(),
            sink: request.sink.clone(),
            turn_id: request.turn_id.clone(),
            cancel: request.cancel.clone(),
            external: ExternalTurn::default(),
        }));
        if let Ok(mut announced) = live.announced.lock() {
            announced.clear();
        }
        let outcome = drive(&mut live, &request).await;
        live.mcp.set_scope(None);
        live.last_used = Instant::now();
        // Keep the CLI's transcript in the store after `turn.finished`: the
        // session stays locked until it is saved, so the next turn (and a
        // shutdown) waits for it.
        if let Some(cli_session_id) = live.cli_session_id.clone() {
            let (store, session_id) = (request.store.clone(), request.session_id.to_string());
            let n = request.session_turns + 1;
            tokio::spawn(async move {
                let saved = transcript::save(
                    store.as_ref(),
                    &session_id,
                    n,
                    &live.config_dir,
                    &cli_session_id,
                )
                .await;
                if let Err(err) = saved {
                    tracing::warn!(session = %session_id, %err, "could not keep the CLI transcript");
                }
                drop(live);
            });
        }
        outcome
    }
}

/// Make sure a CLI runs for this session: warm, or fresh and resumed from the
/// transcript kept in the store.
async fn ensure_process(live: &mut Live, request: &TurnRequest<'_>) -> Result<(), String> {
    let warm = match live.process.as_mut() {
        Some(process) => !process.exited() && live.model == request.settings.model,
        None => false,
    };
    if warm {
        return Ok(());
    }
    if let Some(old) = live.process.take() {
        old.stop(STOP_GRACE).await;
    }
    // A fresh config dir each start: what the CLI resumes comes from the store.
    let _ = tokio::fs::remove_dir_all(&live.config_dir).await;
    tokio::fs::create_dir_all(&live.config_dir)
        .await
        .map_err(|e| format!("cannot create {}: {e}", live.config_dir.display()))?;
    let pointer = transcript::latest(
        request.store.as_ref(),
        request.session_id,
        request.session_turns,
    )
    .await
    .map_err(|e| e.to_string())?;
    let resume = match pointer {
        Some(pointer) => {
            transcript::restore(request.store.as_ref(), &pointer, &live.config_dir).await?;
            Some(pointer.cli_session_id)
        }
        None => None,
    };
    let launch = Launch {
        command: request.settings.command.clone(),
        model: request.settings.model.clone(),
        base_url: request.settings.base_url.clone(),
        api_key: request.settings.api_key.clone(),
        workspace: request.workspace.clone(),
        config_dir: live.config_dir.clone(),
        mcp_config: live.mcp.config(),
        resume,
        max_turns: request.max_turns,
    };
    let process = Process::spawn(&launch)
        .map_err(|e| format!("could not start {}: {e}", launch.command.display()))?;
    tracing::info!(session = request.session_id, pid = ?process.pid(), resume = ?launch.resume, "claude process started");
    live.process = Some(process);
    live.model = request.settings.model.clone();
    Ok(())
}

async fn drive(live: &mut Live, request: &TurnRequest<'_>) -> Outcome {
    if let Err(err) = ensure_process(live, request).await {
        return failed("claude_code_start", err);
    }
    let announced = live.announced.clone();
    let Some(process) = live.process.as_mut() else {
        return failed("claude_code_start", "the CLI did not start".into());
    };
    if let Err(err) = process.send_user(request.text).await {
        let tail = process.stderr_tail();
        stop_process(live).await;
        return failed(
            "claude_code_crashed",
            format!("could not write to the CLI: {err}\n{tail}"),
        );
    }
    let mut translator = Translator::new(
        request.turn_id.clone(),
        request.sink.as_ref(),
        &request.agent,
        announced,
    );
    let deadline = tokio::time::Instant::now() + request.timeout;
    let mut stopping: Option<(TurnStatus, tokio::time::Instant)> = None;
    let ended = loop {
        let grace = stopping.map(|(_, at)| at);
        let line = tokio::select! {
            line = process.lines.recv() => line.unwrap_or(Line::Eof),
            _ = request.cancel.cancelled(), if stopping.is_none() => {
                stopping = Some((TurnStatus::Interrupted, tokio::time::Instant::now() + INTERRUPT_GRACE));
                let _ = process.control(json!({"subtype": "interrupt"})).await;
                continue;
            }
            _ = tokio::time::sleep_until(deadline), if stopping.is_none() => {
                request.cancel.cancel();
                stopping = Some((TurnStatus::Timeout, tokio::time::Instant::now() + INTERRUPT_GRACE));
                let _ = process.control(json!({"subtype": "interrupt"})).await;
                continue;
            }
            _ = tokio::time::sleep_until(grace.unwrap_or(deadline)), if grace.is_some() => {
                break Err(("claude_code_interrupt", "the CLI did not stop its turn after an interrupt".to_string(), true));
            }
        };
        let value = match line {
            Line::Json(value) => value,
            Line::NotJson(text) => {
                break Err((
                    "claude_code_protocol",
                    format!("the CLI printed a line that is not JSON: {text}"),
                    true,
                ));
            }
            Line::TooLong(len) => {
                break Err((
                    "claude_code_line_too_long",
                    format!(
                        "the CLI printed a line of {len} bytes, over agentd's limit of {MAX_LINE_BYTES} bytes"
                    ),
                    true,
                ));
            }
            Line::Eof => {
                break Err((
                    "claude_code_crashed",
                    "the CLI exited during the turn".to_string(),
                    true,
                ));
            }
        };
        match translator.line(&value).await {
            Ok(Step::Continue) => {}
            Ok(Step::CanUseTool(id, tool, input)) => {
                // agentd's tools are gated in the MCP handler; nothing else may run.
                let response = if tool.starts_with(TOOL_PREFIX) {
                    json!({"behavior": "allow", "updatedInput": input})
                } else {
                    json!({"behavior": "deny", "message": format!("{tool} is not available under agentd; use agentd's tools")})
                };
                let _ = process
                    .write(&json!({"type": "control_response", "response": {"subtype": "success", "request_id": id, "response": response}}))
                    .await;
            }
            Ok(Step::Finished(result)) => break Ok(result),
            Err(err) => {
                request.cancel.cancel();
                let _ = process.control(json!({"subtype": "interrupt"})).await;
                break Err(("store_error", err.to_string(), false));
            }
        }
    };
    if let Some(cli_session_id) = translator.cli_session_id.clone() {
        live.cli_session_id = Some(cli_session_id);
    }
    let model_calls = translator.model_calls;
    let last_text = translator.last_text.clone();
    match ended {
        Ok(result) => outcome_of(result, stopping.map(|(s, _)| s), last_text, model_calls),
        Err((code, message, _)) if stopping.is_some() && code == "claude_code_interrupt" => {
            stop_process(live).await;
            Outcome {
                status: stopping.map_or(TurnStatus::Interrupted, |(s, _)| s),
                error: Some(ErrorInfo {
                    code: code.into(),
                    message,
                    retryable: true,
                }),
                model_calls,
                ..failed("", String::new())
            }
        }
        Err((code, message, with_tail)) => {
            let tail = live
                .process
                .as_ref()
                .map(Process::stderr_tail)
                .unwrap_or_default();
            stop_process(live).await;
            let message = if with_tail && !tail.trim().is_empty() {
                format!("{message}\nstderr:\n{}", tail.trim_end())
            } else {
                message
            };
            Outcome {
                model_calls,
                ..failed(code, message)
            }
        }
    }
}

async fn stop_process(live: &mut Live) {
    if let Some(process) = live.process.take() {
        process.stop(STOP_GRACE).await;
    }
}

fn outcome_of(
    result: CliResult,
    stopping: Option<TurnStatus>,
    last_text: Option<String>,
    model_calls: u32,
) -> Outcome {
    let status = match (stopping, result.subtype.as_str()) {
        (Some(status), _) => status,
        (None, "success") if !result.is_error => TurnStatus::Completed,
        (None, "error_max_turns") => TurnStatus::MaxTurns,
        (None, "error_max_budget_usd") => TurnStatus::BudgetExceeded,
        _ => TurnStatus::Failed,
    };
    let error = match status {
        TurnStatus::Completed | TurnStatus::Interrupted => None,
        _ => Some(ErrorInfo {
            code: format!("claude_code_{}", result.subtype),
            message: if result.errors.is_empty() {
                result
                    .result
                    .clone()
                    .unwrap_or_else(|| format!("the CLI ended the turn with {}", result.subtype))
            } else {
                result.errors.join("; ")
            },
            retryable: status != TurnStatus::MaxTurns,
        }),
    };
    Outcome {
        status,
        result: result.result.filter(|r| !r.is_empty()).or(last_text),
        usage: result.usage,
        cost_usd: result.cost_usd,
        model_calls,
        error,
    }
}

/// `turn.finished` for an outcome.
pub(crate) fn finished_event(turn_id: &str, outcome: Outcome, started: Instant) -> TurnFinished {
    TurnFinished {
        agent_status: None,
        turn_id: turn_id.to_string(),
        status: outcome.status,
        result: outcome.result,
        usage: outcome.usage,
        cost_usd: outcome.cost_usd,
        num_model_calls: outcome.model_calls,
        duration_ms: started.elapsed().as_millis() as u64,
        error: outcome.error,
    }
}
