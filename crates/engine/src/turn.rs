//! The turn state machine: model → tools → model … → `turn.finished`.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use agentd_model::{ModelError, ModelEvent, ModelRequest, ModelResponse, ToolSpec};
use agentd_protocol::{
    ContentBlock, DeltaKind, ErrorInfo, Event, Message, Role, TurnFinished, TurnStatus, Usage,
};
use agentd_tools::{ToolContext, ToolRegistry};
use async_trait::async_trait;
use futures::StreamExt;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::coalesce::Coalescer;
use crate::frame::{TurnBody, TurnEngine, TurnOutcome, run_framed};
use crate::guardrails::{self, CallStreak};
use crate::history;
use crate::live_budget::{LiveStream, TurnStreamBudget};
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
                    "prompt_blocked",
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

    pub(crate) fn failed(code: &str, message: String, retryable: bool) -> Self {
        Self {
            status: TurnStatus::Failed,
            error: Some(ErrorInfo {
                code: code.into(),
                message,
                retryable,
            }),
        }
    }
}

impl From<SinkError> for Exit {
    fn from(err: SinkError) -> Self {
        Exit::failed("store_error", err.to_string(), true)
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
        let mut run = TurnRun::new(self, body.sink, body.turn_id, history, cancel, shared);
        let outcome = match body.message {
            _ if compact_only => run.compact_turn().await,
            Some(message) => {
                run.push(message);
                run.run_loop().await
            }
            None => run.run_loop().await,
        };
        let exit = match outcome {
            Ok(exit) | Err(exit) => exit,
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

    /// The tools this agent offers, built on first use: every model call
    /// sends them unchanged.
    pub(crate) fn tool_specs(&self) -> Arc<Vec<ToolSpec>> {
        self.offered().specs.clone()
    }

    pub(crate) fn offered(&self) -> &OfferedTools {
        self.offered.get_or_init(|| {
            let plain = self.tools.iter().map(|tool| ToolSpec {
                name: tool.name().to_string(),
                description: tool.description().to_string(),
                input_schema: tool.input_schema(),
            });
            let own = self
                .agent_tools
                .iter()
                .filter(|tool| self.agent_tool(tool.name()).is_some())
                .map(|tool| tool.spec(self.subagents()));
            let specs: Vec<ToolSpec> = plain.chain(own).collect();
            let chars = specs
                .iter()
                .map(|t| t.name.len() + t.description.len() + json_len(&t.input_schema))
                .sum();
            OfferedTools {
                specs: Arc::new(specs),
                chars,
            }
        })
    }
}

/// An agent's tool specs, and their size for the context estimate.
#[derive(Debug)]
pub(crate) struct OfferedTools {
    pub(crate) specs: Arc<Vec<ToolSpec>>,
    pub(crate) chars: usize,
}

/// The length of `value` as compact JSON, without building the text.
pub(crate) fn json_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// What the runs of one turn (the agent's and its subagents') share.
#[derive(Default)]
pub(crate) struct TurnShared {
    timed_out: AtomicBool,
    subagents_started: AtomicU32,
    /// Usage and cost of finished subagent runs, not yet added to a parent's.
    subagent_spend: Mutex<(Usage, f64)>,
    /// Everything the turn has spent so far, subagents included, live.
    spent_usd: Mutex<f64>,
    /// Set once the turn's checkpoint was taken (or tried).
    pub(crate) checkpoint: tokio::sync::OnceCell<()>,
    /// Live output the turn has streamed, against `max_turn_stream_bytes`.
    pub(crate) streamed: TurnStreamBudget,
}

impl TurnShared {
    pub(crate) fn spent_usd(&self) -> f64 {
        self.spent_usd
            .lock()
            .map(|spent| *spent)
            .unwrap_or_default()
    }

    fn add_spent(&self, cost_usd: f64) {
        if let Ok(mut spent) = self.spent_usd.lock() {
            *spent += cost_usd;
        }
    }

    /// Counts one more subagent; `false` when `max` were already started.
    pub(crate) fn claim_subagent(&self, max: u32) -> bool {
        self.subagents_started
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
    }

    pub(crate) fn add_subagent_spend(&self, usage: &Usage, cost_usd: f64) {
        if let Ok(mut spend) = self.subagent_spend.lock() {
            spend.0.add(usage);
            spend.1 += cost_usd;
        }
    }

    fn take_subagent_spend(&self) -> (Usage, f64) {
        self.subagent_spend
            .lock()
            .map(|mut spend| std::mem::take(&mut *spend))
            .unwrap_or_default()
    }
}

/// The state of one running turn.
pub(crate) struct TurnRun<'a> {
    pub agent: &'a Agent,
    pub sink: &'a dyn TurnSink,
    pub turn_id: String,
    /// The transcript as the model sees it (repaired once at the start, then
    /// extended), shared with each request instead of copied into it.
    pub messages: Arc<Vec<Message>>,
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
        cancel: CancellationToken,
        shared: Arc<TurnShared>,
    ) -> Self {
        Self {
            agent,
            sink,
            turn_id,
            messages: Arc::new(history),
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
        self.result = Some(
            match self
                .compact(agentd_protocol::CompactionTrigger::Manual)
                .await?
            {
                Some(done) => format!(
                    "Compacted the conversation from about {} to {} tokens.",
                    done.tokens_before, done.tokens_after
                ),
                None => "There was nothing to compact.".to_string(),
            },
        );
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
                return Ok(Exit {
                    status: TurnStatus::MaxTurns,
                    error: Some(ErrorInfo {
                        code: "max_turns".into(),
                        message: format!(
                            "The turn stopped after {} model calls (max_turns).",
                            limits.max_turns
                        ),
                        retryable: false,
                    }),
                });
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
            let calls: Vec<ContentBlock> = assistant
                .content
                .into_iter()
                .filter(|b| matches!(b, ContentBlock::ToolUse { .. }))
                .collect();
            if calls.is_empty() {
                // A Stop hook may send the agent back to work, once per turn.
                if let Some((hooks, context)) = self.agent.hooks()
                    && !stop_hook_continued
                    && self.agent.depth() == 0
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
            let signatures: Vec<(String, serde_json::Value)> = calls
                .iter()
                .filter_map(|call| match call {
                    ContentBlock::ToolUse { name, input, .. } => {
                        Some((name.clone(), input.clone()))
                    }
                    _ => None,
                })
                .collect();
            let results = self.run_tools(calls).await?;
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

    /// Extends the model's context with a message recorded elsewhere.
    pub(crate) fn push(&mut self, message: Message) {
        history::push_merged(Arc::make_mut(&mut self.messages), message);
    }

    /// How the turn ends when its token was cancelled: by the timer or by the user.
    pub(crate) fn cancelled(&self) -> Exit {
        if self.shared.timed_out.load(Ordering::SeqCst) {
            let limit = self.agent.config.limits.turn_timeout.as_secs();
            Exit {
                status: TurnStatus::Timeout,
                error: Some(ErrorInfo {
                    code: "timeout".into(),
                    message: format!("The turn ran longer than its limit of {limit} s."),
                    retryable: false,
                }),
            }
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
                    Some(Ok(ModelEvent::TextDelta { index, text })) => {
                        if !live.stopped() {
                            self.emit_deltas(&mut live, coalescer.push((index, DeltaKind::Text), &text)).await?;
                        }
                    }
                    Some(Ok(ModelEvent::ThinkingDelta { index, text })) => {
                        if !live.stopped() {
                            self.emit_deltas(&mut live, coalescer.push((index, DeltaKind::Thinking), &text)).await?;
                        }
                    }
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
                self.emit_truncated(None, notice).await?;
            }
        }
        Ok(())
    }

    /// The one `output.truncated` of a stream that reached a limit.
    pub(crate) async fn emit_truncated(
        &self,
        call_id: Option<&str>,
        (limit, limit_bytes): (agentd_protocol::OutputLimit, u64),
    ) -> Result<(), SinkError> {
        self.sink
            .emit(Event::OutputTruncated {
                turn_id: self.turn_id.clone(),
                call_id: call_id.map(str::to_string),
                limit,
                limit_bytes,
                parent_call_id: None,
            })
            .await
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

    pub(crate) fn tools(&self) -> &ToolRegistry {
        &self.agent.tools
    }

    pub(crate) fn tool_context(&self) -> &ToolContext {
        &self.agent.tool_context
    }
}

pub(crate) fn model_exit(err: ModelError) -> Exit {
    if matches!(err, ModelError::Cancelled) {
        return Exit::with(TurnStatus::Interrupted);
    }
    Exit::failed(err.code(), err.to_string(), err.is_retryable())
}
