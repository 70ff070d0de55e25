//! The turn state machine: model → tools → model … → `turn.finished`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agentd_model::{ModelError, ModelEvent, ModelRequest, ModelResponse, WireCache};
use agentd_protocol::{
    CompactionTrigger, ContentBlock, DeltaKind, ErrorCode, ErrorInfo, Event, Message, Role,
    TurnFinished, TurnStatus, Usage,
};
use async_trait::async_trait;
use futures::StreamExt;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::coalesce::Coalescer;
use crate::context::{TurnContext, TurnShared, truncated};
use crate::frame::{TurnBody, TurnEngine, TurnOutcome, run_framed};
use crate::guardrails::{self, CallStreak};
use crate::history;
use crate::live_budget::LiveStream;
use crate::sink::{SinkError, TurnSink};

/// What a turn starts from.
#[derive(Debug, Clone)]
pub struct TurnInput {
    pub turn_id: String,
    /// The session's transcript before this turn.
    pub history: Vec<Message>,
    /// The user's new message.
    pub message: Message,
}

#[async_trait]
impl TurnEngine for Agent {
    /// `UserPromptSubmit` hooks may refuse the message or add to it.
    async fn accept(&self, message: Message) -> Result<Option<Message>, TurnOutcome> {
        let mut message = message;
        if let Some((hooks, context)) = self.hooks() {
            let feedback = hooks.user_prompt_submit(context, &message.text()).await;
            if feedback.block {
                return Err(TurnOutcome::failed(
                    ErrorCode::PromptBlocked,
                    format!(
                        "A UserPromptSubmit hook blocked this message: {}",
                        feedback.reason.as_deref().unwrap_or("no reason given")
                    ),
                    false,
                ));
            }
            for context in feedback.additional_context {
                message.content.push(ContentBlock::Text { text: context });
            }
        }
        Ok(Some(message))
    }

    async fn run(&self, body: TurnBody<'_>) -> TurnOutcome {
        self.run_body(body, false).await
    }
}

/// A turn of `agent` that only compacts its context; the message that asked
/// for it is not recorded.
struct Compaction<'a>(&'a Agent);

#[async_trait]
impl TurnEngine for Compaction<'_> {
    async fn accept(&self, _message: Message) -> Result<Option<Message>, TurnOutcome> {
        Ok(None)
    }

    async fn run(&self, body: TurnBody<'_>) -> TurnOutcome {
        self.0.run_body(body, true).await
    }
}

/// Why the loop stopped, before it becomes a `turn.finished`.
pub(crate) struct Exit {
    pub status: TurnStatus,
    pub error: Option<ErrorInfo>,
}

impl Exit {
    fn with(status: TurnStatus) -> Self {
        Self {
            status,
            error: None,
        }
    }

    /// Stopped by a limit with its own status: not worth retrying as is.
    pub(crate) fn stop(status: TurnStatus, code: ErrorCode, message: String) -> Self {
        Self {
            status,
            ..Self::failed(code, message, false)
        }
    }

    pub(crate) fn failed(code: ErrorCode, message: String, retryable: bool) -> Self {
        Self {
            status: TurnStatus::Failed,
            error: Some(ErrorInfo {
                code,
                message,
                retryable,
            }),
        }
    }
}

impl From<SinkError> for Exit {
    fn from(err: SinkError) -> Self {
        Exit::failed(ErrorCode::StoreError, err.to_string(), true)
    }
}

impl Agent {
    /// Run one turn to its end. Cancelling `cancel` interrupts it: the model
    /// stream stops and running tools are killed. Always emits exactly one
    /// `turn.finished`, which is also returned.
    pub async fn run_turn(
        &self,
        input: TurnInput,
        sink: &dyn TurnSink,
        cancel: CancellationToken,
    ) -> TurnFinished {
        run_framed(self, input, sink, cancel).await
    }

    /// A turn that only compacts the context (`/compact`, `POST …/compact`):
    /// `turn.started` with `input.message`, which is not added to the
    /// transcript, a `compaction` event, and `turn.finished`.
    pub async fn run_compaction(
        &self,
        input: TurnInput,
        sink: &dyn TurnSink,
        cancel: CancellationToken,
    ) -> TurnFinished {
        run_framed(&Compaction(self), input, sink, cancel).await
    }

    /// The native loop's body of a turn (or only its compaction), under
    /// the turn's time limit.
    async fn run_body(&self, body: TurnBody<'_>, compact_only: bool) -> TurnOutcome {
        let cancel = body.cancel.child_token();
        let shared = Arc::new(TurnShared::default());
        let timer = tokio::spawn({
            let (cancel, shared) = (cancel.clone(), shared.clone());
            let left = self
                .config
                .limits
                .turn_timeout
                .saturating_sub(body.started.elapsed());
            async move {
                tokio::time::sleep(left).await;
                shared.timed_out.store(true, Ordering::SeqCst);
                cancel.cancel();
            }
        });
        let history = history::normalize(body.history);
        let wire_cache = self.wire_cache.clone().unwrap_or_default();
        let mut run = TurnRun::new(
            self,
            body.sink,
            body.turn_id,
            history,
            wire_cache,
            cancel,
            shared,
        );
        let (Ok(exit) | Err(exit)) = match body.message {
            _ if compact_only => run.compact_turn().await,
            Some(message) => {
                run.push(message);
                run.run_loop().await
            }
            None => run.run_loop().await,
        };
        timer.abort();
        let result = run.result.take();
        TurnOutcome {
            status: exit.status,
            error: exit.error,
            agent_status: result.as_deref().and_then(guardrails::agent_status),
            result,
            usage: run.usage,
            cost_usd: run.cost_usd,
            model_calls: run.model_calls,
        }
    }
}

/// The state of one running turn.
pub(crate) struct TurnRun<'a> {
    pub agent: &'a Agent,
    pub sink: &'a dyn TurnSink,
    pub turn_id: String,
    /// The transcript as the model sees it (repaired once at the start, then
    /// extended), shared with each request instead of copied into it. Only
    /// `push` (append, or merge into the last message) and `replace_messages`
    /// change it, so `wire_cache` serves all but what was added.
    pub messages: Arc<Vec<Message>>,
    /// `messages` as the model's requests serialised them (the turn's own,
    /// or the session's across turns): only what was added, or no longer
    /// equals what was kept, is serialised at each call.
    wire_cache: Arc<WireCache>,
    pub cancel: CancellationToken,
    pub shared: Arc<TurnShared>,
    pub usage: Usage,
    pub cost_usd: f64,
    model_calls: u32,
    /// The last assistant text: the turn's result, or a subagent's report.
    pub result: Option<String>,
    /// A compaction happened since the last model call.
    pub compacted_since_call: bool,
}

impl<'a> TurnRun<'a> {
    pub(crate) fn new(
        agent: &'a Agent,
        sink: &'a dyn TurnSink,
        turn_id: String,
        history: Vec<Message>,
        wire_cache: Arc<WireCache>,
        cancel: CancellationToken,
        shared: Arc<TurnShared>,
    ) -> Self {
        Self {
            agent,
            sink,
            turn_id,
            messages: Arc::new(history),
            wire_cache,
            cancel,
            shared,
            usage: Usage::default(),
            cost_usd: 0.0,
            model_calls: 0,
            result: None,
            compacted_since_call: false,
        }
    }

    async fn compact_turn(&mut self) -> Result<Exit, Exit> {
        self.result = Some(match self.compact(CompactionTrigger::Manual).await? {
            Some(done) => format!(
                "Compacted the conversation from about {} to {} tokens.",
                done.tokens_before, done.tokens_after
            ),
            None => "There was nothing to compact.".to_string(),
        });
        Ok(Exit::with(TurnStatus::Completed))
    }

    /// Model → tools → model … from the last message until the model stops
    /// calling tools or a limit ends the run. Subagents run only this part.
    pub(crate) async fn run_loop(&mut self) -> Result<Exit, Exit> {
        let limits = &self.agent.config.limits;
        let mut stop_hook_continued = false;
        let mut streak = CallStreak::default();
        loop {
            if let Some(exit) = self.over_budget() {
                return Ok(exit);
            }
            if self.model_calls >= limits.max_turns {
                return Ok(Exit::stop(
                    TurnStatus::MaxTurns,
                    ErrorCode::MaxTurns,
                    format!(
                        "The turn stopped after {} model calls (max_turns).",
                        limits.max_turns
                    ),
                ));
            }
            let response = self.call_model().await?;
            let assistant = Message::assistant(response.content);
            self.record(assistant.clone()).await?;
            self.sink
                .emit(Event::MessageCompleted {
                    parent_call_id: None,
                    turn_id: self.turn_id.clone(),
                    message: assistant.clone(),
                })
                .await?;
            let text = assistant.text();
            if !text.is_empty() {
                self.result = Some(text);
            }
            if let Some(exit) = self.over_budget() {
                return Ok(exit);
            }
            let signatures: Vec<(String, serde_json::Value)> = assistant
                .tool_uses()
                .map(|call| (call.name.to_string(), call.input.clone()))
                .collect();
            let calls: Vec<ContentBlock> = assistant
                .content
                .into_iter()
                .filter(|b| matches!(b, ContentBlock::ToolUse { .. }))
                .collect();
            if calls.is_empty() {
                // A Stop hook may send the agent back to work, once per turn.
                if let Some((hooks, context)) = self.agent.hooks()
                    && !stop_hook_continued
                    && self.agent.depth == 0
                {
                    let feedback = hooks
                        .stop(context, self.result.as_deref().unwrap_or(""))
                        .await;
                    if feedback.block {
                        stop_hook_continued = true;
                        let reason = feedback.reason.unwrap_or_else(|| "keep going".into());
                        self.record(Message::user_text(format!("Stop hook: {reason}")))
                            .await?;
                        continue;
                    }
                }
                return Ok(Exit::with(TurnStatus::Completed));
            }
            let results = self.context().run_tools(calls).await?;
            let (usage, cost) = self.shared.take_subagent_spend();
            self.usage.add(&usage);
            self.cost_usd += cost;
            let tripped = streak.observe(
                &signatures,
                &results,
                limits.max_failed_calls,
                limits.max_identical_calls,
            );
            self.record(Message {
                role: Role::User,
                content: results,
            })
            .await?;
            if self.cancel.is_cancelled() {
                return Err(self.cancelled());
            }
            if let Some(exit) = tripped {
                return Ok(exit);
            }
        }
    }

    pub(crate) async fn record(&mut self, message: Message) -> Result<(), SinkError> {
        self.sink.append_message(&self.turn_id, &message).await?;
        self.push(message);
        Ok(())
    }

    /// Rewrites the model's context (a compaction): nothing serialised for
    /// the old one is sent again.
    pub(crate) fn replace_messages(&mut self, messages: Vec<Message>) {
        self.messages = Arc::new(messages);
        self.wire_cache.clear();
    }

    /// Extends the model's context with a message recorded elsewhere.
    pub(crate) fn push(&mut self, message: Message) {
        history::push_merged(Arc::make_mut(&mut self.messages), message);
    }

    /// How the turn ends when its token was cancelled: by the timer or by the user.
    pub(crate) fn cancelled(&self) -> Exit {
        if self.shared.timed_out.load(Ordering::SeqCst) {
            let limit = self.agent.config.limits.turn_timeout.as_secs();
            Exit::stop(
                TurnStatus::Timeout,
                ErrorCode::Timeout,
                format!("The turn ran longer than its limit of {limit} s."),
            )
        } else {
            Exit::with(TurnStatus::Interrupted)
        }
    }

    /// One streamed model call; deltas go out coalesced, usage is accounted.
    async fn call_model(&mut self) -> Result<ModelResponse, Exit> {
        self.maybe_compact().await?;
        self.compacted_since_call = false;
        let config = &self.agent.config;
        let request = ModelRequest {
            model: config.model_name.clone(),
            system: Some(config.system_prompt.clone()),
            messages: self.messages.clone(),
            tools: self.agent.tool_specs(),
            max_tokens: config.limits.max_output_tokens,
            thinking_budget: config.limits.thinking_budget,
            wire_cache: Some(self.wire_cache.clone()),
        };
        let cancel = self.cancel.clone();
        let mut stream = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(self.cancelled()),
            stream = self.agent.model.stream(request) => stream.map_err(model_exit)?,
        };
        let mut coalescer: Coalescer<(u32, DeltaKind)> = Coalescer::new();
        let shared = self.shared.clone();
        let mut live = LiveStream::new(&shared.streamed, config.limits.max_turn_stream_bytes, None);
        // One timer, moved when the deadline moves: a stream is hundreds of
        // deltas, and a timer armed and dropped for each costs.
        let timer = sleep_until(Instant::now());
        tokio::pin!(timer);
        let mut armed = None;
        let outcome = loop {
            let deadline = coalescer.deadline();
            if deadline != armed {
                if let Some(at) = deadline {
                    timer.as_mut().reset(at);
                }
                armed = deadline;
            }
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break Err(self.cancelled()),
                _ = &mut timer, if deadline.is_some() => {
                    self.emit_deltas(&mut live, coalescer.take()).await?;
                }
                item = stream.next() => match item {
                    Some(Ok(ModelEvent::TextDelta { index, text })) if !live.stopped() => {
                        self.emit_deltas(&mut live, coalescer.push((index, DeltaKind::Text), &text)).await?;
                    }
                    Some(Ok(ModelEvent::ThinkingDelta { index, text })) if !live.stopped() => {
                        self.emit_deltas(&mut live, coalescer.push((index, DeltaKind::Thinking), &text)).await?;
                    }
                    Some(Ok(ModelEvent::TextDelta { .. } | ModelEvent::ThinkingDelta { .. })) => {}
                    Some(Ok(ModelEvent::Completed(response))) => break Ok(response),
                    Some(Err(err)) => break Err(model_exit(err)),
                    None => break Err(model_exit(ModelError::Stream(
                        "the stream ended before the message was complete".into(),
                    ))),
                },
            }
        };
        self.emit_deltas(&mut live, coalescer.take()).await?;
        let response = outcome?;
        self.model_calls += 1;
        self.account(&response.usage).await?;
        Ok(response)
    }

    /// Deltas as far as the turn's stream limit allows; past it, the
    /// completed message still carries the whole text.
    async fn emit_deltas(
        &self,
        live: &mut LiveStream<'_>,
        due: impl IntoIterator<Item = ((u32, DeltaKind), String)>,
    ) -> Result<(), SinkError> {
        for ((index, kind), text) in due {
            let admitted = live.admit(&text);
            if !admitted.text.is_empty() {
                self.sink
                    .emit(Event::MessageDelta {
                        parent_call_id: None,
                        turn_id: self.turn_id.clone(),
                        index,
                        kind,
                        text: admitted.text.to_string(),
                    })
                    .await?;
            }
            if let Some(notice) = admitted.notice {
                self.sink
                    .emit(truncated(&self.turn_id, None, notice))
                    .await?;
            }
        }
        Ok(())
    }

    pub(crate) async fn account(&mut self, usage: &Usage) -> Result<(), SinkError> {
        let cost = self.agent.config.cost(usage);
        self.usage.add(usage);
        self.cost_usd += cost;
        self.shared.add_spent(cost);
        self.sink
            .emit(Event::Usage {
                parent_call_id: None,
                usage: *usage,
                cost_usd: cost,
                context_tokens: usage.context_tokens(),
            })
            .await
    }

    /// What the tool calls of this turn need of it.
    pub(crate) fn context(&self) -> TurnContext<'_> {
        TurnContext {
            agent: self.agent,
            sink: self.sink,
            turn_id: &self.turn_id,
            cancel: &self.cancel,
            shared: &self.shared,
        }
    }
}

pub(crate) fn model_exit(err: ModelError) -> Exit {
    if matches!(err, ModelError::Cancelled) {
        return Exit::with(TurnStatus::Interrupted);
    }
    Exit::failed(err.code(), err.to_string(), err.is_retryable())
}
