//! The `claude-code` engine: a turn of a session whose model has
//! `provider = "claude-code"` runs in the real `claude` CLI, one warm process
//! per live session, while agentd keeps the session, the events, the
//! transcript, the tools (served over MCP, see [`mcp`]) and the permissions.

mod lifecycle;
mod mcp;
mod meter;
mod process;
mod settings;
mod transcript;
mod translate;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentd_engine::{Agent, ExternalTurn, TurnBody, TurnEngine, TurnOutcome, TurnSink};
use agentd_protocol::{ContentBlock, ErrorCode, ErrorInfo, Message, TurnStatus};
use async_trait::async_trait;
use serde_json::{Value, json};

pub use lifecycle::DEFAULT_IDLE_TIMEOUT;
use lifecycle::{Live, ensure_process, stop_process};
use mcp::TurnScope;
pub use meter::{BackendMeter, Metered};
use process::{Line, MAX_LINE_BYTES};
pub use settings::ClaudeCodeSettings;
use translate::{CliResult, Step, TOOL_PREFIX, Translator};

/// Set in the environment of the `claude` CLI this engine starts: an
/// `agentd claude` started there (a link named `claude` on the PATH)
/// refuses, instead of running agentd inside itself.
pub const ENGINE_MARK: &str = "AGENTD_CLAUDE_CODE_ENGINE";

/// How long an interrupted CLI gets to end its turn before it is killed.
const INTERRUPT_GRACE: Duration = Duration::from_secs(5);

/// The warm CLI processes of this server, by agentd session id (see
/// [`lifecycle`]).
#[derive(Clone)]
pub struct ClaudeCode {
    live: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<Live>>>>>,
    reaper: Arc<std::sync::OnceLock<()>>,
    /// How often the idle reaper looks, in milliseconds.
    reap_tick_ms: Arc<AtomicU64>,
}

impl Default for ClaudeCode {
    fn default() -> Self {
        Self {
            live: Default::default(),
            reaper: Default::default(),
            reap_tick_ms: Arc::new(AtomicU64::new(u64::MAX)),
        }
    }
}

/// A turn of a `claude-code` session, as an engine: its body runs in the
/// session's CLI; [`agentd_engine::run_framed`] frames it like a native turn.
pub struct ClaudeCodeTurn {
    pub claude: ClaudeCode,
    pub session_id: String,
    /// Turns the session had before this one.
    pub session_turns: u64,
    pub workspace: PathBuf,
    pub data_dir: PathBuf,
    pub store: Arc<dyn agentd_store::Store>,
    pub settings: ClaudeCodeSettings,
    /// The session's agent: its tools, rules, hooks and approver serve the
    /// CLI's tool calls.
    pub agent: Arc<Agent>,
    /// The sink the turn is framed with, shared: the CLI's tool calls reach
    /// agentd's MCP handler in another task.
    pub sink: Arc<dyn TurnSink>,
    pub timeout: Duration,
    pub max_turns: u32,
    /// Set with a `backend`: the loopback endpoint's count of the turn's
    /// calls, which the turn records.
    pub meter: Option<Arc<dyn BackendMeter>>,
}

#[async_trait]
impl TurnEngine for ClaudeCodeTurn {
    async fn run(&self, body: TurnBody<'_>) -> TurnOutcome {
        let request = TurnRequest {
            turn: self,
            content: body.message.as_ref().map(cli_content).unwrap_or_default(),
            scope: TurnScope {
                agent: self.agent.clone(),
                sink: self.sink.clone(),
                turn_id: body.turn_id,
                cancel: body.cancel.child_token(),
                external: ExternalTurn::default(),
            },
        };
        let mut outcome = self.claude.run_turn(request).await;
        if let Some(meter) = &self.meter {
            meter.settle().await.apply(&mut outcome);
        }
        outcome
    }
}

/// The user message's `content` as the CLI's stream-json input takes it:
/// its text alone, or its blocks (text, images, documents) in Anthropic's
/// shapes, which the CLI sends on to the model as they are.
fn cli_content(message: &Message) -> Value {
    match message.content.as_slice() {
        [ContentBlock::Text { text }] => Value::String(text.clone()),
        // Plain data: serialising it cannot fail.
        blocks => serde_json::to_value(blocks).unwrap_or_default(),
    }
}

/// What one turn needs: the session's engine, the user's message content,
/// and the turn as its tool calls see it.
pub(crate) struct TurnRequest<'a> {
    turn: &'a ClaudeCodeTurn,
    pub content: Value,
    pub scope: TurnScope,
}

impl std::ops::Deref for TurnRequest<'_> {
    type Target = ClaudeCodeTurn;

    fn deref(&self) -> &ClaudeCodeTurn {
        self.turn
    }
}

fn failed(code: impl Into<ErrorCode>, message: String) -> TurnOutcome {
    TurnOutcome::failed(code, message, true)
}

impl ClaudeCode {
    /// Run one turn in the session's CLI. Events go to `request.sink`; the
    /// frame emits `turn.started` before and `turn.finished` after.
    async fn run_turn(&self, request: TurnRequest<'_>) -> TurnOutcome {
        let mut live = match self.enter(&request).await {
            Ok(live) => live,
            Err(err) => return failed(ErrorCode::ClaudeCodeMcp, err),
        };
        live.last_used = Instant::now();
        live.mcp.set_tools(request.agent.offered_tools());
        live.mcp.set_scope(Some(request.scope.clone()));
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
            // A stopped CLI has written all it will.
            let running = live.process.is_some();
            let marker = live.transcript_marker.take();
            tokio::spawn(async move {
                let saved = transcript::save(
                    store.as_ref(),
                    &session_id,
                    n,
                    &live.config_dir,
                    &cli_session_id,
                    marker.as_deref(),
                    running,
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

async fn drive(live: &mut Live, request: &TurnRequest<'_>) -> TurnOutcome {
    if let Err(err) = ensure_process(live, request).await {
        return failed(ErrorCode::ClaudeCodeStart, err);
    }
    let announced = live.announced.clone();
    let Some(process) = live.process.as_mut() else {
        return failed(ErrorCode::ClaudeCodeStart, "the CLI did not start".into());
    };
    if let Err(err) = process.send_user(&request.content).await {
        let stopped = stop_process(live).await;
        return failed(
            ErrorCode::ClaudeCodeCrashed,
            with_stderr(
                format!("could not write to the CLI: {err}"),
                stopped.as_ref(),
                true,
            ),
        );
    }
    let mut translator = Translator::new(&request.scope, announced);
    let (ended, stopping) = read_turn(process, &mut translator, request).await;
    if let Some(cli_session_id) = translator.cli_session_id.clone() {
        live.cli_session_id = Some(cli_session_id);
    }
    // A turn that ended normally is in the transcript once its last message is.
    live.transcript_marker = match (&ended, stopping) {
        (Ok(_), None) => translator.last_message_id.clone(),
        _ => None,
    };
    let model_calls = translator.model_calls;
    let last_text = translator.last_text.clone();
    match ended {
        // With a backend, what the turn spent is the endpoint's count (see
        // `meter`), applied once the turn is over.
        Ok(result) => outcome_of(result, stopping, last_text, model_calls),
        Err((code, message, _)) if stopping.is_some() && code == ErrorCode::ClaudeCodeInterrupt => {
            stop_process(live).await;
            TurnOutcome {
                status: stopping.unwrap_or(TurnStatus::Interrupted),
                model_calls,
                ..failed(code, message)
            }
        }
        Err((code, message, with_tail)) => {
            // Stopped first: its stderr is then complete.
            let stopped = stop_process(live).await.filter(|_| with_tail);
            let crashed = code == ErrorCode::ClaudeCodeCrashed;
            TurnOutcome {
                model_calls,
                ..failed(code, with_stderr(message, stopped.as_ref(), crashed))
            }
        }
    }
}

/// Why the CLI's turn broke off: the error code, the message, and whether
/// the CLI's stderr belongs in it.
type Broken = (ErrorCode, String, bool);

/// The CLI's lines of one turn, translated, until its result or until it
/// broke off; and the status an interrupt or the time limit gave the turn.
async fn read_turn(
    process: &mut process::Process,
    translator: &mut Translator<'_>,
    request: &TurnRequest<'_>,
) -> (Result<CliResult, Broken>, Option<TurnStatus>) {
    let deadline = tokio::time::Instant::now() + request.timeout;
    let mut stopping: Option<(TurnStatus, tokio::time::Instant)> = None;
    let ended = loop {
        let grace = stopping.map(|(_, at)| at);
        let line = tokio::select! {
            line = process.lines.recv() => line.unwrap_or(Line::Eof),
            _ = request.scope.cancel.cancelled(), if stopping.is_none() => {
                stopping = Some((TurnStatus::Interrupted, tokio::time::Instant::now() + INTERRUPT_GRACE));
                let _ = process.control(json!({"subtype": "interrupt"})).await;
                continue;
            }
            _ = tokio::time::sleep_until(deadline), if stopping.is_none() => {
                request.scope.cancel.cancel();
                stopping = Some((TurnStatus::Timeout, tokio::time::Instant::now() + INTERRUPT_GRACE));
                let _ = process.control(json!({"subtype": "interrupt"})).await;
                continue;
            }
            _ = tokio::time::sleep_until(grace.unwrap_or(deadline)), if grace.is_some() => {
                break Err((ErrorCode::ClaudeCodeInterrupt, "the CLI did not stop its turn after an interrupt".to_string(), true));
            }
        };
        let value = match json_line(line) {
            Ok(value) => value,
            Err(broken) => break Err(broken),
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
                request.scope.cancel.cancel();
                let _ = process.control(json!({"subtype": "interrupt"})).await;
                break Err((ErrorCode::StoreError, err.to_string(), false));
            }
        }
    };
    (ended, stopping.map(|(status, _)| status))
}

/// A line of the CLI as JSON, or why the turn broke off there.
fn json_line(line: Line) -> Result<serde_json::Value, Broken> {
    let (code, message) = match line {
        Line::Json(value) => return Ok(value),
        Line::NotJson(text) => (
            ErrorCode::ClaudeCodeProtocol,
            format!("the CLI printed a line that is not JSON: {text}"),
        ),
        Line::TooLong(len) => (
            ErrorCode::ClaudeCodeLineTooLong,
            format!(
                "the CLI printed a line of {len} bytes, over agentd's limit of {MAX_LINE_BYTES} bytes"
            ),
        ),
        Line::Eof => (
            ErrorCode::ClaudeCodeCrashed,
            "the CLI exited during the turn".to_string(),
        ),
    };
    Err((code, message, true))
}

/// `message` with the tail of the CLI's stderr and, when it ended on its
/// own (`exited`), its exit status.
fn with_stderr(mut message: String, stopped: Option<&process::Stopped>, exited: bool) -> String {
    let Some(stopped) = stopped else {
        return message;
    };
    if let Some(status) = stopped.status.filter(|_| exited) {
        message.push_str(&format!(" ({status})"));
    }
    let tail = stopped.stderr.trim_end();
    if !tail.trim().is_empty() {
        message.push_str("\nstderr:\n");
        message.push_str(tail);
    }
    message
}

fn outcome_of(
    result: CliResult,
    stopping: Option<TurnStatus>,
    last_text: Option<String>,
    model_calls: u32,
) -> TurnOutcome {
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
            code: ErrorCode::ClaudeCodeResult(result.subtype.as_str().into()),
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
    TurnOutcome {
        status,
        agent_status: None,
        result: result.result.filter(|r| !r.is_empty()).or(last_text),
        usage: result.usage,
        cost_usd: result.cost_usd,
        model_calls,
        error,
    }
}
