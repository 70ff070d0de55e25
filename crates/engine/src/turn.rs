//! The turn state machine: model → tools → model … → `turn.finished`.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd_model::{ModelClient, ModelError, ModelEvent, ModelRequest, ModelResponse, ToolSpec};
use agentd_protocol::{
    ContentBlock, DeltaKind, ErrorInfo, Event, Message, Role, TurnFinished, TurnStatus, Usage,
};
use agentd_tools::{ToolContext, ToolRegistry};
use futures::StreamExt;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use crate::agent_tools::{AgentTool, AgentToolSet, SubagentDef, Subagents};
use crate::approval::{Answer, Approver, Decision, FixedApprover};
use crate::coalesce::Coalescer;
use crate::history;
use crate::hooks::{HookContext, Hooks};
use crate::permissions::PermissionPolicy;
use crate::sink::{SinkError, TurnSink};

/// Limits that end a turn early, each with its own status.
#[derive(Debug, Clone)]
pub struct TurnLimits {
    /// Model calls per turn.
    pub max_turns: u32,
    /// Wall-clock time for the whole turn.
    pub turn_timeout: Duration,
    /// Spend per turn, in USD.
    pub max_budget_usd: Option<f64>,
    /// `max_tokens` of each model call.
    pub max_output_tokens: u32,
}

impl Default for TurnLimits {
    fn default() -> Self {
        Self {
            max_turns: 100,
            turn_timeout: Duration::from_secs(1800),
            max_budget_usd: None,
            max_output_tokens: 8192,
        }
    }
}

#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The provider's model name, sent in requests and used for pricing.
    pub model_name: String,
    pub system_prompt: String,
    pub limits: TurnLimits,
}

/// One agent: a model, its tools, where they run, and who may allow them.
pub struct Agent {
    model: Arc<dyn ModelClient>,
    tools: ToolRegistry,
    /// The template each tool call's context is cloned from.
    tool_context: ToolContext,
    config: AgentConfig,
    /// `None`: every call is allowed (hooks may still block). Shared with
    /// subagents, so "allow for this session" holds for them too.
    permissions: Option<Arc<Mutex<PermissionPolicy>>>,
    hooks: Option<(Hooks, HookContext)>,
    approver: Arc<dyn Approver>,
    agent_tools: AgentToolSet,
    subagents: Option<Arc<Subagents>>,
    /// 0 for the session's agent, 1 for its subagents, …
    depth: u32,
}

/// What a turn starts from.
#[derive(Debug, Clone)]
pub struct TurnInput {
    pub turn_id: String,
    /// The session's transcript before this turn.
    pub history: Vec<Message>,
    /// The user's new message.
    pub message: Message,
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

    fn failed(code: &str, message: String, retryable: bool) -> Self {
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
    pub fn new(
        model: Arc<dyn ModelClient>,
        tools: ToolRegistry,
        tool_context: ToolContext,
        config: AgentConfig,
    ) -> Self {
        Self {
            model,
            tools,
            tool_context,
            config,
            permissions: None,
            hooks: None,
            approver: Arc::new(FixedApprover(Answer::new(Decision::Deny, "no_approver"))),
            agent_tools: AgentToolSet::default(),
            subagents: None,
            depth: 0,
        }
    }

    /// Which of `TodoWrite`, `AskUserQuestion` and `Task` to offer (all by
    /// default; `Task` only with [`Agent::with_subagents`]).
    pub fn with_agent_tools(mut self, tools: AgentToolSet) -> Self {
        self.agent_tools = tools;
        self
    }

    /// Lets the agent start these subagents through `Task`.
    pub fn with_subagents(mut self, subagents: Subagents) -> Self {
        self.subagents = Some(Arc::new(subagents));
        self
    }

    pub(crate) fn subagents(&self) -> Option<&Subagents> {
        self.subagents.as_deref()
    }

    pub(crate) fn depth(&self) -> u32 {
        self.depth
    }

    /// The engine tool `name` names, when this agent offers it.
    pub(crate) fn agent_tool(&self, name: &str) -> Option<AgentTool> {
        let tool = AgentTool::from_name(name)?;
        let offered = self.agent_tools.contains(tool)
            && (tool != AgentTool::Task
                || self.subagents().is_some_and(|s| self.depth < s.max_depth));
        offered.then_some(tool)
    }

    /// Every tool name this agent offers, for error messages.
    pub(crate) fn tool_names(&self) -> Vec<String> {
        self.tool_specs()
            .into_iter()
            .map(|spec| spec.name)
            .collect()
    }

    /// Whether a tool with this name exists for this agent.
    pub(crate) fn has_tool(&self, name: &str) -> bool {
        self.tools.get(name).is_some() || self.agent_tool(name).is_some()
    }

    /// Engine tools never change the workspace themselves (a subagent's
    /// own calls are gated one by one), so they count as read-only: no
    /// approval in `default` mode, and parallel `Task` calls run together.
    pub(crate) fn is_read_only(&self, name: &str) -> bool {
        self.agent_tool(name).is_some() || self.tools.get(name).is_some_and(|t| t.is_read_only())
    }

    /// The agent a `Task` call runs: `def`'s prompt, tools and model, and
    /// this agent's workspace, sandbox, rules, hooks and approver.
    pub(crate) fn subagent(&self, def: &SubagentDef) -> Agent {
        let named = |name: &str| {
            def.tools
                .as_ref()
                .is_some_and(|t| t.iter().any(|n| n == name))
        };
        let (tools, agent_tools) = match &def.tools {
            Some(names) => (
                self.tools.only(names),
                AgentToolSet {
                    todo_write: named("TodoWrite"),
                    ask_user_question: named("AskUserQuestion"),
                    task: named("Task"),
                },
            ),
            None => (
                self.tools.clone(),
                AgentToolSet {
                    ask_user_question: false,
                    ..self.agent_tools
                },
            ),
        };
        let (model, model_name) = match &def.model {
            Some(m) => (m.client.clone(), m.model_name.clone()),
            None => (self.model.clone(), self.config.model_name.clone()),
        };
        Agent {
            model,
            tools,
            tool_context: self.tool_context.clone(),
            config: AgentConfig {
                model_name,
                system_prompt: def.prompt.clone(),
                limits: self.config.limits.clone(),
            },
            permissions: self.permissions.clone(),
            hooks: self.hooks.clone(),
            approver: self.approver.clone(),
            agent_tools,
            subagents: self.subagents.clone(),
            depth: self.depth + 1,
        }
    }

    /// Check every call against `policy`; calls it says to ask about go to `approver`.
    pub fn with_permissions(
        mut self,
        policy: PermissionPolicy,
        approver: Arc<dyn Approver>,
    ) -> Self {
        self.permissions = Some(Arc::new(Mutex::new(policy)));
        self.approver = approver;
        self
    }

    pub fn with_hooks(mut self, hooks: Hooks, context: HookContext) -> Self {
        if !hooks.is_empty() {
            self.hooks = Some((hooks, context));
        }
        self
    }

    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    pub(crate) fn permissions(&self) -> Option<&Mutex<PermissionPolicy>> {
        self.permissions.as_deref()
    }

    pub(crate) fn hooks(&self) -> Option<(&Hooks, &HookContext)> {
        self.hooks.as_ref().map(|(hooks, context)| (hooks, context))
    }

    pub(crate) fn approver(&self) -> &dyn Approver {
        self.approver.as_ref()
    }

    /// Run one turn to its end. Cancelling `cancel` interrupts it: the model
    /// stream stops and running tools are killed. Always emits exactly one
    /// `turn.finished`, which is also returned.
    pub async fn run_turn(
        &self,
        input: TurnInput,
        sink: &dyn TurnSink,
        cancel: CancellationToken,
    ) -> TurnFinished {
        let started = Instant::now();
        let cancel = cancel.child_token();
        let shared = Arc::new(TurnShared::default());
        let timer = tokio::spawn({
            let (cancel, shared) = (cancel.clone(), shared.clone());
            let timeout = self.config.limits.turn_timeout;
            async move {
                tokio::time::sleep(timeout).await;
                shared.timed_out.store(true, Ordering::SeqCst);
                cancel.cancel();
            }
        });
        let history = history::normalize(&input.history);
        let mut run = TurnRun::new(self, sink, input.turn_id, history, cancel, shared);
        let exit = match run.drive(input.message).await {
            Ok(exit) | Err(exit) => exit,
        };
        timer.abort();
        let finished = TurnFinished {
            turn_id: run.turn_id.clone(),
            status: exit.status,
            result: run.result.take(),
            usage: run.usage,
            cost_usd: run.cost_usd,
            num_model_calls: run.model_calls,
            duration_ms: started.elapsed().as_millis() as u64,
            error: exit.error,
        };
        if let Some(error) = &finished.error
            && let Err(err) = sink.emit(Event::Error(error.clone())).await
        {
            tracing::error!(%err, "could not record the turn's error event");
        }
        let recorded = match sink.emit(Event::TurnFinished(finished.clone())).await {
            Ok(()) => sink.flush().await,
            Err(err) => Err(err),
        };
        if let Err(err) = recorded {
            tracing::error!(%err, turn_id = %finished.turn_id, "could not record turn.finished");
        }
        finished
    }

    fn tool_specs(&self) -> Vec<ToolSpec> {
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
        plain.chain(own).collect()
    }
}

/// What the runs of one turn (the agent's and its subagents') share.
#[derive(Default)]
pub(crate) struct TurnShared {
    timed_out: AtomicBool,
    subagents_started: AtomicU32,
    /// Usage and cost of finished subagent runs, not yet added to a parent's.
    subagent_spend: Mutex<(Usage, f64)>,
}

impl TurnShared {
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
        }
    }

    /// `Ok` and `Err` both carry how the turn ended; `Err` lets `?` end it early.
    async fn drive(&mut self, user_message: Message) -> Result<Exit, Exit> {
        self.sink
            .emit(Event::TurnStarted {
                turn_id: self.turn_id.clone(),
                message: user_message.clone(),
            })
            .await?;
        let mut user_message = user_message;
        if let Some((hooks, context)) = self.agent.hooks() {
            let feedback = hooks
                .user_prompt_submit(context, &user_message.text())
                .await;
            if feedback.block {
                return Err(Exit::failed(
                    "prompt_blocked",
                    format!(
                        "A UserPromptSubmit hook blocked this message: {}",
                        feedback.reason.as_deref().unwrap_or("no reason given")
                    ),
                    false,
                ));
            }
            for context in feedback.additional_context {
                user_message
                    .content
                    .push(ContentBlock::Text { text: context });
            }
        }
        self.run_loop(user_message).await
    }

    /// Model → tools → model … from `user_message` until the model stops
    /// calling tools or a limit ends the run. Subagents run only this part.
    pub(crate) async fn run_loop(&mut self, user_message: Message) -> Result<Exit, Exit> {
        self.record(user_message).await?;
        let limits = &self.agent.config.limits;
        let mut stop_hook_continued = false;
        loop {
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
            if let Some(budget) = limits.max_budget_usd
                && self.cost_usd >= budget
            {
                return Ok(Exit {
                    status: TurnStatus::BudgetExceeded,
                    error: Some(ErrorInfo {
                        code: "budget_exceeded".into(),
                        message: format!(
                            "The turn spent ${:.4}, reaching its budget of ${budget:.4}.",
                            self.cost_usd
                        ),
                        retryable: false,
                    }),
                });
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
            let results = self.run_tools(calls).await?;
            let (usage, cost) = self.shared.take_subagent_spend();
            self.usage.add(&usage);
            self.cost_usd += cost;
            self.record(Message {
                role: Role::User,
                content: results,
            })
            .await?;
            if self.cancel.is_cancelled() {
                return Err(self.cancelled());
            }
        }
    }

    pub(crate) async fn record(&mut self, message: Message) -> Result<(), SinkError> {
        self.sink.append_message(&self.turn_id, &message).await?;
        history::push_merged(Arc::make_mut(&mut self.messages), message);
        Ok(())
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
        let outcome = loop {
            let deadline = coalescer.deadline();
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break Err(self.cancelled()),
                _ = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    self.emit_deltas(coalescer.take()).await?;
                }
                item = stream.next() => match item {
                    Some(Ok(ModelEvent::TextDelta { index, text })) => {
                        self.emit_deltas(coalescer.push((index, DeltaKind::Text), &text)).await?;
                    }
                    Some(Ok(ModelEvent::ThinkingDelta { index, text })) => {
                        self.emit_deltas(coalescer.push((index, DeltaKind::Thinking), &text)).await?;
                    }
                    Some(Ok(ModelEvent::Completed(response))) => break Ok(response),
                    Some(Err(err)) => break Err(model_exit(err)),
                    None => break Err(model_exit(ModelError::Stream(
                        "the stream ended before the message was complete".into(),
                    ))),
                },
            }
        };
        self.emit_deltas(coalescer.take()).await?;
        let response = outcome?;
        self.model_calls += 1;
        self.account(&response.usage).await?;
        Ok(response)
    }

    async fn emit_deltas(
        &self,
        due: impl IntoIterator<Item = ((u32, DeltaKind), String)>,
    ) -> Result<(), SinkError> {
        for ((index, kind), text) in due {
            self.sink
                .emit(Event::MessageDelta {
                    parent_call_id: None,
                    turn_id: self.turn_id.clone(),
                    index,
                    kind,
                    text,
                })
                .await?;
        }
        Ok(())
    }

    async fn account(&mut self, usage: &Usage) -> Result<(), SinkError> {
        let cost = agentd_model::price::cost_usd(&self.agent.config.model_name, usage);
        self.usage.add(usage);
        self.cost_usd += cost;
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

fn model_exit(err: ModelError) -> Exit {
    if matches!(err, ModelError::Cancelled) {
        return Exit::with(TurnStatus::Interrupted);
    }
    Exit::failed(err.code(), err.to_string(), err.is_retryable())
}
