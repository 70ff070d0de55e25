//! An [`Agent`]: a model, its tools, where they run, who may allow them, and
//! the limits of its turns. [`Agent::run_turn`] is in `turn.rs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd_model::{ModelClient, WireCache};
use agentd_protocol::Resolver;
use agentd_tools::{ToolContext, ToolRegistry};

use crate::agent_tools::{AgentTool, AgentToolSet, SubagentDef, Subagents};
use crate::approval::{Answer, Approver, Decision, FixedApprover};
use agentd_policy::hooks::{HookContext, Hooks};
use agentd_policy::permissions::PermissionPolicy;

/// Limits that end a turn early, each with its own status, and when to
/// compact the context.
#[derive(Debug, Clone)]
pub struct TurnLimits {
    /// Model calls per turn.
    pub max_turns: u32,
    /// Wall-clock time for the whole turn.
    pub turn_timeout: Duration,
    /// Spend per turn (subagents included), in USD.
    pub max_budget_usd: Option<f64>,
    /// Spend per session, in USD; `session_spent_usd` is what earlier turns spent.
    pub max_session_budget_usd: Option<f64>,
    pub session_spent_usd: f64,
    /// What the session's owner may still spend under a quota of theirs.
    pub owner_spend: Option<SpendCap>,
    /// Circuit breaker: this many failing tool calls in a row end the turn (0: off).
    pub max_failed_calls: u32,
    /// Circuit breaker: the same call (tool and input) this many times in a
    /// row ends the turn (0: off).
    pub max_identical_calls: u32,
    /// `max_tokens` of each model call.
    pub max_output_tokens: u32,
    /// Extended thinking's budget per model call (on top of `max_output_tokens`).
    pub thinking_budget: Option<u32>,
    /// The model's context window in tokens; `None`: from the model table
    /// (128 000 for models it does not know).
    pub context_window: Option<u64>,
    /// Compact when the context estimate passes this share of the window.
    pub compact_threshold: f64,
    /// Bytes of live output (`tool.output`) one tool call may stream.
    pub max_tool_output_stream_bytes: u64,
    /// Bytes of live deltas and tool output a whole turn may stream.
    pub max_turn_stream_bytes: u64,
}

/// A spend quota of the session's owner (per day, per month), as the
/// turn starts: the turn ends as `budget_exceeded` when it has spent what
/// is left.
#[derive(Debug, Clone, PartialEq)]
pub struct SpendCap {
    pub remaining_usd: f64,
    /// The quota's name, for the message (`spend_usd_per_day`).
    pub quota: String,
}

impl Default for TurnLimits {
    fn default() -> Self {
        Self {
            max_turns: 100,
            turn_timeout: Duration::from_secs(1800),
            max_budget_usd: None,
            max_session_budget_usd: None,
            session_spent_usd: 0.0,
            owner_spend: None,
            max_failed_calls: 8,
            max_identical_calls: 5,
            max_output_tokens: 8192,
            thinking_budget: None,
            context_window: None,
            compact_threshold: 0.8,
            max_tool_output_stream_bytes: crate::DEFAULT_TOOL_OUTPUT_STREAM_BYTES,
            max_turn_stream_bytes: crate::DEFAULT_TURN_STREAM_BYTES,
        }
    }
}

#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The provider's model name, sent in requests and used for pricing.
    pub model_name: String,
    pub system_prompt: String,
    pub limits: TurnLimits,
    /// `None`: the built-in price table by model name.
    pub price: Option<agentd_model::price::Price>,
}

impl AgentConfig {
    /// What `usage` cost on this agent's model.
    pub fn cost(&self, usage: &agentd_protocol::Usage) -> f64 {
        match &self.price {
            Some(price) => price.cost(usage),
            None => agentd_model::price::cost_usd(&self.model_name, usage),
        }
    }

    /// The context window in tokens.
    pub fn context_window(&self) -> u64 {
        self.limits
            .context_window
            .or_else(|| agentd_model::price::context_window(&self.model_name))
            .unwrap_or(128_000)
    }
}

/// One agent: a model, its tools, where they run, and who may allow them.
pub struct Agent {
    pub(crate) model: Arc<dyn ModelClient>,
    pub(crate) tools: ToolRegistry,
    /// The template each tool call's context is cloned from.
    pub(crate) tool_context: ToolContext,
    pub(crate) config: AgentConfig,
    /// `None`: every call is allowed (hooks may still block). Shared with
    /// subagents, so "allow for this session" holds for them too.
    pub(crate) permissions: Option<Arc<Mutex<PermissionPolicy>>>,
    pub(crate) hooks: Option<(Hooks, HookContext)>,
    pub(crate) approver: Arc<dyn Approver>,
    pub(crate) agent_tools: AgentToolSet,
    pub(crate) subagents: Option<Arc<Subagents>>,
    pub(crate) checkpointer: Option<Arc<dyn crate::sink::Checkpointer>>,
    /// 0 for the session's agent, 1 for its subagents, …
    pub(crate) depth: u32,
    /// Built from the fields above on first use; a `with_…` that changes
    /// what is offered resets it.
    pub(crate) offered: std::sync::OnceLock<crate::offered::OfferedTools>,
    /// The session's transcript as earlier turns' requests serialised it;
    /// `None`: each turn starts with none. Never a subagent's.
    pub(crate) wire_cache: Option<Arc<WireCache>>,
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
            approver: Arc::new(FixedApprover(Answer::new(
                Decision::Deny,
                Resolver::NoApprover,
            ))),
            agent_tools: AgentToolSet::default(),
            subagents: None,
            checkpointer: None,
            depth: 0,
            offered: Default::default(),
            wire_cache: None,
        }
    }

    /// Which of `TodoWrite`, `AskUserQuestion` and `Task` to offer (all by
    /// default; `Task` only with [`Agent::with_subagents`]).
    pub fn with_agent_tools(mut self, tools: AgentToolSet) -> Self {
        self.agent_tools = tools;
        self.offered = Default::default();
        self
    }

    /// Checkpoint the workspace before the first tool of a turn that may
    /// change files (every tool that is not read-only).
    pub fn with_checkpointer(mut self, checkpointer: Arc<dyn crate::sink::Checkpointer>) -> Self {
        self.checkpointer = Some(checkpointer);
        self
    }

    /// Keep what each turn's requests serialise in `cache`, for the next
    /// turn of the same session: only what it added is serialised then.
    pub fn with_wire_cache(mut self, cache: Arc<WireCache>) -> Self {
        self.wire_cache = Some(cache);
        self
    }

    /// Lets the agent start these subagents through `Task`.
    pub fn with_subagents(mut self, subagents: Subagents) -> Self {
        self.subagents = Some(Arc::new(subagents));
        self.offered = Default::default();
        self
    }

    /// The engine tool `name` names, when this agent offers it.
    pub(crate) fn agent_tool(&self, name: &str) -> Option<AgentTool> {
        let tool = AgentTool::from_name(name)?;
        let offered = self.agent_tools.contains(tool)
            && (tool != AgentTool::Task || self.subagents.iter().any(|s| self.depth < s.max_depth));
        offered.then_some(tool)
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
        let (tools, agent_tools) = match &def.tools {
            Some(names) => {
                let named = |name: &str| names.iter().any(|n| n == name);
                let agent_tools = AgentToolSet {
                    todo_write: named("TodoWrite"),
                    ask_user_question: named("AskUserQuestion"),
                    task: named("Task"),
                };
                (self.tools.only(names), agent_tools)
            }
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
                // A subagent on its own model is priced by that model's name.
                price: self.config.price.filter(|_| def.model.is_none()),
                model_name,
                system_prompt: def.prompt.clone(),
                limits: self.config.limits.clone(),
            },
            permissions: self.permissions.clone(),
            hooks: self.hooks.clone(),
            approver: self.approver.clone(),
            agent_tools,
            subagents: self.subagents.clone(),
            checkpointer: self.checkpointer.clone(),
            depth: self.depth + 1,
            offered: Default::default(),
            wire_cache: None,
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

    /// The turn's permission policy, shared with whoever may change its
    /// mode while the turn runs.
    pub fn permission_policy(&self) -> Option<Arc<Mutex<PermissionPolicy>>> {
        self.permissions.clone()
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

    pub(crate) fn hooks(&self) -> Option<(&Hooks, &HookContext)> {
        self.hooks.as_ref().map(|(hooks, context)| (hooks, context))
    }
}
