//! What every turn does around its engine's work, whichever engine runs it:
//! `turn.started`, the user's message recorded, the engine's body, then the
//! turn's `error` (if any) and exactly one `turn.finished`, recorded with
//! everything before it.

use agentd_protocol::{
    AgentStatus, ErrorCode, ErrorInfo, Event, Message, TurnFinished, TurnStatus, Usage,
};
use async_trait::async_trait;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::sink::{SinkError, TurnSink};
use crate::turn::TurnInput;

/// How the body of a turn ended: everything `turn.finished` reports but
/// its id and duration.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub status: TurnStatus,
    pub error: Option<ErrorInfo>,
    /// The last assistant text.
    pub result: Option<String>,
    pub agent_status: Option<AgentStatus>,
    pub usage: Usage,
    pub cost_usd: f64,
    pub model_calls: u32,
}

impl TurnOutcome {
    /// Ended with `status`, having spent nothing.
    pub fn ended(status: TurnStatus) -> Self {
        Self {
            status,
            error: None,
            result: None,
            agent_status: None,
            usage: Usage::default(),
            cost_usd: 0.0,
            model_calls: 0,
        }
    }

    /// Failed with this error, having spent nothing.
    pub fn failed(code: impl Into<ErrorCode>, message: String, retryable: bool) -> Self {
        Self {
            error: Some(ErrorInfo {
                code: code.into(),
                message,
                retryable,
            }),
            ..Self::ended(TurnStatus::Failed)
        }
    }

    /// The sink could not record the turn's progress.
    pub fn store_failed(err: SinkError) -> Self {
        Self::failed(ErrorCode::StoreError, err.to_string(), true)
    }

    fn finished(&self, turn_id: &str, started: Instant) -> TurnFinished {
        TurnFinished {
            agent_status: self.agent_status,
            turn_id: turn_id.to_string(),
            status: self.status,
            result: self.result.clone(),
            usage: self.usage,
            cost_usd: self.cost_usd,
            num_model_calls: self.model_calls,
            duration_ms: started.elapsed().as_millis() as u64,
            error: self.error.clone(),
        }
    }
}

/// What an engine's body gets of its turn.
pub struct TurnBody<'a> {
    pub turn_id: String,
    /// The session's transcript before this turn.
    pub history: Vec<Message>,
    /// The user's message as the transcript recorded it; `None` when the
    /// engine records none (a compaction).
    pub message: Option<Message>,
    pub sink: &'a dyn TurnSink,
    pub cancel: CancellationToken,
    /// When the turn started: its time limit counts from here.
    pub started: Instant,
}

/// One way of running a turn's work: the native loop, the `claude` CLI, a
/// compaction. [`run_framed`] runs it inside the frame every turn shares.
#[async_trait]
pub trait TurnEngine: Send + Sync {
    /// The user's message as the transcript records it (`None`: not
    /// recorded), or how the turn ends before it is. Runs after
    /// `turn.started`.
    async fn accept(&self, message: Message) -> Result<Option<Message>, TurnOutcome> {
        Ok(Some(message))
    }

    /// The turn's work, after `turn.started` and the user's message are
    /// recorded; the frame records how it ended.
    async fn run(&self, body: TurnBody<'_>) -> TurnOutcome;
}

/// Run one turn of `engine`: `turn.started` with `input.message`, the
/// message recorded, the engine's body, then the turn's `error` and exactly
/// one `turn.finished`, which is also returned.
pub async fn run_framed(
    engine: &dyn TurnEngine,
    input: TurnInput,
    sink: &dyn TurnSink,
    cancel: CancellationToken,
) -> TurnFinished {
    let started = Instant::now();
    let turn_id = input.turn_id;
    let outcome = match open(engine, &turn_id, input.message, sink).await {
        Ok(message) => {
            let body = TurnBody {
                turn_id: turn_id.clone(),
                history: input.history,
                message,
                sink,
                cancel,
                started,
            };
            engine.run(body).await
        }
        Err(outcome) => outcome,
    };
    finish(sink, &turn_id, outcome, started).await
}

/// `turn.started` and the user's message as the engine accepts it.
async fn open(
    engine: &dyn TurnEngine,
    turn_id: &str,
    message: Message,
    sink: &dyn TurnSink,
) -> Result<Option<Message>, TurnOutcome> {
    sink.emit(Event::TurnStarted {
        turn_id: turn_id.to_string(),
        message: message.clone(),
    })
    .await
    .map_err(TurnOutcome::store_failed)?;
    let accepted = engine.accept(message).await?;
    if let Some(message) = &accepted {
        sink.append_message(turn_id, message)
            .await
            .map_err(TurnOutcome::store_failed)?;
    }
    Ok(accepted)
}

/// The turn's `error` and `turn.finished`, recorded. A sink may refuse a
/// `turn.finished` that is not `failed` (a message of the turn was lost):
/// the turn is then reported failed, keeping what it spent.
async fn finish(
    sink: &dyn TurnSink,
    turn_id: &str,
    outcome: TurnOutcome,
    started: Instant,
) -> TurnFinished {
    let mut finished = outcome.finished(turn_id, started);
    let mut recorded = record_finished(sink, &finished).await;
    if let Err(err) = &recorded
        && finished.status != TurnStatus::Failed
    {
        let failed = TurnOutcome::store_failed(err.clone());
        finished = TurnOutcome {
            status: failed.status,
            error: failed.error,
            ..outcome
        }
        .finished(turn_id, started);
        recorded = record_finished(sink, &finished).await;
    }
    if let Err(err) = recorded {
        tracing::error!(%err, turn_id = %finished.turn_id, "could not record turn.finished");
    }
    finished
}

/// The turn's `error` (if any) and `turn.finished`, recorded.
async fn record_finished(sink: &dyn TurnSink, finished: &TurnFinished) -> Result<(), SinkError> {
    if let Some(error) = &finished.error
        && let Err(err) = sink.emit(Event::Error(error.clone())).await
    {
        tracing::error!(%err, "could not record the turn's error event");
    }
    sink.finish_turn(finished).await
}
