//! Running turns of stored sessions: the glue between the engine and the store,
//! shared by `agentd run` and `agentd serve`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentd_protocol::{
    Decision, ErrorCode, Event, EventEnvelope, Message, PendingKind, Resolver, TurnFinished,
    TurnStatus,
};
use agentd_sandbox::Sandbox;
use agentd_store::{
    Fence, NewSession, SessionRecord, SessionStatus, SessionUpdate, Store, StoreError, TurnStart,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use agentd_policy::permissions::{PermissionMode, PermissionPolicy};

use crate::approvals::{AnswerSource, Approvals};
use crate::claude_code::ClaudeCode;
use crate::config::{Config, ConfigError};
use crate::coordination::{Alone, Coordination};
use crate::engines::TurnRequest;
use crate::mcp_pools::McpPools;
use crate::models::EnvLookup;
use crate::registry::TurnKind;
use crate::sink::StoreSink;
use crate::threads::Threads;
use crate::transcripts::Transcripts;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("workspace {path}: {message}")]
    Workspace { path: PathBuf, message: String },
    #[error("session {0} not found")]
    SessionNotFound(String),
}

/// Per-turn overrides of the session's profile and model.
#[derive(Clone, Default)]
pub struct TurnOptions {
    /// Overrides the profile's permission mode for this turn.
    pub permission_mode: Option<PermissionMode>,
    /// Allow rules added to the profile's for this turn.
    pub allow: Vec<String>,
    /// Deny rules added to the profile's for this turn.
    pub deny: Vec<String>,
    /// Ask rules added to the profile's for this turn.
    pub ask: Vec<String>,
    /// Someone to ask about tool calls besides the API (e.g. the terminal).
    pub answers: Option<Arc<dyn AnswerSource>>,
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    pub max_budget_usd: Option<f64>,
    /// Replaces the profile's system prompt template.
    pub system_prompt: Option<String>,
    /// Appended to the system prompt, after the profile's own addition.
    pub append_system_prompt: Option<String>,
    pub client_request_id: Option<String>,
    /// The turn's id, when the caller has already handed it out (the server's
    /// `202 {turn_id}`); a fresh UUID v7 otherwise.
    pub turn_id: Option<String>,
    /// Overrides the profile's and the model's thinking budget for this turn.
    pub thinking_budget: Option<u32>,
    /// The client's own hooks (an Agent SDK app's callbacks), run after the
    /// profile's and the project's.
    pub hooks: Vec<agentd_policy::hooks::HookConfig>,
    /// The client's own MCP servers (`--mcp-config`); their tools are
    /// offered unless another tool has the name.
    pub mcp: Option<agentd_tools::McpPool>,
    /// Only these built-in tools are offered (`--tools`); `None`: all.
    pub builtin_tools: Option<Vec<String>>,
    /// `Some(false)`: the workspace's Claude Code files (CLAUDE.md,
    /// `.claude/`) are not read this turn, whatever the profile says.
    pub project_config: Option<bool>,
    /// Where the turn puts its permission policy, so a client can change
    /// the mode while it runs.
    pub policy_slot: Option<PolicySlot>,
    /// Subagent types the client defines (an Agent SDK app's `agents`),
    /// offered after the operator's and the project's.
    pub agents: Vec<crate::project::ProjectAgent>,
    /// Start a sandbox for the turn's first `Bash` while its first model
    /// call runs (`Sandbox::prestart`): for a process of one session
    /// (`agentd run`, `agentd claude`), where spares are on for it alone. A
    /// server's sessions get theirs after each command.
    pub prestart_sandbox: bool,
}

impl TurnOptions {
    /// Whether the turn's tool list (`--tools`) leaves the built-in `name` in.
    pub fn offers_builtin(&self, name: &str) -> bool {
        self.builtin_tools
            .as_ref()
            .is_none_or(|only| only.iter().any(|tool| tool == name))
    }
}

/// The running turn's permission policy, for a client that changes the
/// mode during the turn (an Agent SDK app's `set_permission_mode`). A mode
/// set while the turn is still being prepared applies once its policy is in.
#[derive(Clone, Default)]
pub struct PolicySlot(Arc<std::sync::Mutex<SlotState>>);

#[derive(Default)]
struct SlotState {
    policy: Option<Arc<std::sync::Mutex<PermissionPolicy>>>,
    requested: Option<PermissionMode>,
}

impl PolicySlot {
    pub(crate) fn fill(&self, policy: Option<Arc<std::sync::Mutex<PermissionPolicy>>>) {
        if let Ok(mut slot) = self.0.lock() {
            if let (Some(policy), Some(mode)) = (&policy, slot.requested)
                && let Ok(mut policy) = policy.lock()
            {
                policy.set_mode(mode);
            }
            slot.policy = policy;
        }
    }

    /// Empties the slot (the turn ended; the next one starts from its
    /// options).
    pub fn clear(&self) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = SlotState::default();
        }
    }

    /// Sets the running turn's mode, now or as soon as its policy is in.
    pub fn set_mode(&self, mode: PermissionMode) {
        let Ok(mut slot) = self.0.lock() else {
            return;
        };
        slot.requested = Some(mode);
        if let Some(policy) = &slot.policy
            && let Ok(mut policy) = policy.lock()
        {
            policy.set_mode(mode);
        }
    }
}

/// What every turn needs: the store, the config and the sandbox.
#[derive(Clone)]
pub struct Runtime {
    pub store: Arc<dyn Store>,
    pub config: Config,
    pub data_dir: PathBuf,
    pub sandbox: Sandbox,
    /// Permission requests waiting in this process.
    pub approvals: Approvals,
    /// The sessions' MCP servers.
    pub mcp: McpPools,
    /// The sessions' egress proxies (network allowlists).
    pub egress: crate::egress::EgressProxies,
    /// Warm `claude` CLI processes of `claude-code` sessions.
    pub claude: ClaudeCode,
    /// The loopback `/v1/messages` of `claude-code` models with a `backend`.
    pub model_gateway: Arc<crate::model_gateway::ModelGateway>,
    /// The sessions' background commands.
    pub background: crate::background::SessionShells,
    /// Who runs the sessions' turns: this process alone, or a cluster.
    pub(crate) coordination: Arc<dyn Coordination>,
    /// Which Tokio runtime runs turns, and which hands their events out.
    pub threads: Threads,
    /// Transcripts of recently active sessions, so a turn reads only what
    /// is new.
    pub transcripts: Arc<Transcripts>,
    /// Whom each owner's agent works as (see [`Runtime::agent_identity`]).
    pub(crate) identities: Arc<crate::identity::AgentIdentities>,
    /// The config's host mounts, resolved once (see `crate::mounts`).
    pub(crate) mounts: Arc<Result<crate::mounts::MountTable, String>>,
    /// The key `{user_token}`s are signed with (see `crate::tool_identity`).
    pub tool_keys: Arc<crate::tool_identity::ToolKeys>,
    /// The `[[webhooks]]` outbox's writing side.
    pub webhooks: crate::webhooks::Webhooks,
}

impl Runtime {
    pub fn new(store: Arc<dyn Store>, config: Config, data_dir: PathBuf) -> Self {
        let mounts = Arc::new(crate::mounts::MountTable::resolve(&config, &data_dir));
        let webhooks = crate::webhooks::Webhooks::new(&config);
        Self {
            store,
            config,
            data_dir,
            sandbox: Sandbox,
            approvals: Approvals::default(),
            mcp: McpPools::default(),
            egress: Default::default(),
            claude: ClaudeCode::default(),
            model_gateway: Arc::default(),
            background: Default::default(),
            coordination: Arc::new(Alone),
            threads: Threads::default(),
            transcripts: Arc::default(),
            identities: Arc::default(),
            mounts,
            tool_keys: Arc::default(),
            webhooks,
        }
    }

    /// Run as a node of `cluster` instead of alone.
    pub fn with_cluster(mut self, cluster: crate::cluster::Cluster) -> Self {
        self.coordination = Arc::new(cluster);
        self
    }

    /// A session on `workspace`, a directory its caller trusts (`agentd
    /// run`'s): in a root server it is handed to the agent's user before each
    /// turn (see [`crate::workspace_open`]).
    pub async fn create_session(
        &self,
        owner: &str,
        workspace: &Path,
        model_spec: &str,
        profile: &str,
    ) -> Result<SessionRecord, RunError> {
        let workspace = check_workspace(workspace, &self.data_dir)?;
        self.config.profile(profile)?;
        Ok(self
            .store
            .create_session(NewSession {
                id: None,
                owner: owner.to_string(),
                title: None,
                workspace: workspace.display().to_string(),
                existing_workspace: false,
                model: model_spec.to_string(),
                profile: profile.to_string(),
            })
            .await?)
    }

    /// Finish turns that were running when a previous process died, as
    /// `interrupted`, so the session can continue. Returns how many there were.
    pub async fn recover(&self, session_id: Option<&str>) -> Result<usize, RunError> {
        let stale = self.store.running_turns().await?;
        let mut count = 0;
        for turn in stale
            .iter()
            .filter(|t| session_id.is_none_or(|id| id == t.session_id))
        {
            let error = agentd_protocol::ErrorInfo {
                code: ErrorCode::ServerRestarted,
                message: "agentd stopped while this turn was running.".into(),
                retryable: true,
            };
            self.finish_lost_turn(&turn.session_id, &turn.id, error, true)
                .await?;
            count += 1;
        }
        Ok(count)
    }

    /// Record a turn whose process is gone as `interrupted`: the requests it
    /// waited on are resolved `by: restart`, its `turn.finished` is appended
    /// (unless `append_finished` is false: it is stored already), the turn and
    /// the session are closed. A turn that never got its row is fine.
    pub async fn finish_lost_turn(
        &self,
        session_id: &str,
        turn_id: &str,
        error: agentd_protocol::ErrorInfo,
        append_finished: bool,
    ) -> Result<(), StoreError> {
        for pending in self.store.open_pending(Some(session_id)).await? {
            if pending.turn_id.as_deref() != Some(turn_id) {
                continue;
            }
            let (by, deny) = (Resolver::Restart, Decision::Deny);
            let (resolution, event) = if pending.kind == PendingKind::Question {
                let resolution = serde_json::json!({"answers": null, "by": by});
                let event = Event::QuestionAnswered {
                    request_id: pending.id.clone(),
                    answers: serde_json::Value::Null,
                    by,
                };
                (resolution, event)
            } else {
                let resolution = serde_json::json!({"decision": deny, "by": by});
                let event = Event::PermissionResolved {
                    request_id: pending.id.clone(),
                    decision: deny,
                    by,
                };
                (resolution, event)
            };
            if self.store.resolve_pending(&pending.id, &resolution).await? {
                self.store.append_event(session_id, &event).await?;
            }
        }
        if append_finished {
            let event = Event::TurnFinished(TurnFinished::never_ran(
                turn_id,
                TurnStatus::Interrupted,
                error,
            ));
            let stored = self.store.append_event(session_id, &event).await?;
            self.webhooks
                .session_event_stored(self.store.as_ref(), turn_id, &stored)
                .await;
        }
        match self
            .store
            .finish_turn(turn_id, TurnStatus::Interrupted)
            .await
        {
            Ok(()) | Err(StoreError::NotFound(_)) => {}
            Err(err) => return Err(err),
        }
        self.store
            .update_session(
                session_id,
                SessionUpdate {
                    status: Some(SessionStatus::Idle),
                    ..SessionUpdate::default()
                },
            )
            .await?;
        Ok(())
    }

    /// Run one turn of `session` to its end. Events go to the store and, as they
    /// are stored, to `observer`. `Ok(None)` when `client_request_id` named a turn
    /// that already exists (nothing was started).
    pub async fn run_turn(
        &self,
        session: &SessionRecord,
        kind: &TurnKind,
        mut options: TurnOptions,
        env: EnvLookup<'_>,
        observer: Option<mpsc::UnboundedSender<EventEnvelope>>,
        cancel: CancellationToken,
    ) -> Result<Option<TurnFinished>, RunError> {
        options.thinking_budget = kind.thinking_budget().or(options.thinking_budget);
        let request = TurnRequest {
            session,
            message: kind.message(),
            options,
            env,
            observer,
            cancel,
        };
        self.run_work(request, kind).await
    }

    /// Where turn `turn_id` of `session` records its events and messages.
    pub(crate) fn sink_for(
        &self,
        session: &SessionRecord,
        turn_id: &str,
        observer: Option<mpsc::UnboundedSender<EventEnvelope>>,
    ) -> StoreSink {
        StoreSink::fenced(
            self.store.clone(),
            session.id.clone(),
            self.fence_for(turn_id),
            observer,
            &self.threads.serving(),
        )
    }

    /// The fence of turn `turn_id`'s appends: in a cluster every turn that
    /// runs here holds a lease of this node, and what it appends must be
    /// refused once the lease is lost (see `cluster::leases`). `None` alone.
    pub(crate) fn fence_for(&self, turn_id: &str) -> Option<Fence> {
        self.coordination.node_id().map(|node_id| Fence {
            node_id: node_id.to_string(),
            turn_id: turn_id.to_string(),
        })
    }

    /// Record the turn's start and mark the session running; its id, or
    /// `None` when its `client_request_id` named a turn that already exists.
    pub(crate) async fn begin_turn(
        &self,
        session: &SessionRecord,
        options: &TurnOptions,
    ) -> Result<Option<String>, StoreError> {
        let turn_id = options
            .turn_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let started = self
            .record_turn_start(&session.id, &turn_id, options.client_request_id.as_deref())
            .await?;
        if let TurnStart::Duplicate(_) = started {
            return Ok(None);
        }
        // `start_turn` marked the session running too.
        Ok(Some(turn_id))
    }

    /// The turn's status, and the session's totals, title and idle status.
    pub(crate) async fn record_finished(
        &self,
        session: &SessionRecord,
        turn_id: &str,
        text: &str,
        finished: &TurnFinished,
    ) -> Result<(), StoreError> {
        let update = SessionUpdate {
            title: session.title.is_none().then(|| title_from(text)),
            status: Some(SessionStatus::Idle),
            add_usage: Some(finished.usage),
            add_cost_usd: Some(finished.cost_usd),
            add_turns: Some(1),
            ..SessionUpdate::default()
        };
        self.record_turn_end(&session.id, turn_id, finished.status, update)
            .await?;
        crate::access::metrics::spent(&session.owner, finished.cost_usd);
        Ok(())
    }

    /// What the model sees of a session: its whole transcript, or after a
    /// compaction, the compacted context and the messages since; the
    /// position of its last message (0 for none); and the wire cache kept
    /// with the transcript, for the turn's requests.
    pub async fn model_context(
        &self,
        session_id: &str,
    ) -> Result<(Vec<Message>, u64, Arc<agentd_model::WireCache>), StoreError> {
        let (read, compaction) = tokio::join!(
            self.transcripts.read(self.store.as_ref(), session_id),
            self.store.latest_compaction(session_id)
        );
        let (messages, wire_cache) = read?;
        let last = messages.last().map_or(0, |stored| stored.position);
        let (mut context, first_kept) = compaction?
            .map(|compaction| (compaction.context, compaction.first_kept_position))
            .unwrap_or_default();
        context.extend(
            messages
                .iter()
                .filter(|stored| stored.position as i64 >= first_kept)
                .map(|stored| stored.message.clone()),
        );
        Ok((context, last, wire_cache))
    }
}

/// Check that `workspace` is a directory that does not contain the data dir
/// (the agent must never be able to read its own database). Returns it
/// canonicalized. Call it before creating anything in the data dir.
pub fn check_workspace(workspace: &Path, data_dir: &Path) -> Result<PathBuf, RunError> {
    let problem = |message: String| RunError::Workspace {
        path: workspace.to_path_buf(),
        message,
    };
    let workspace = workspace
        .canonicalize()
        .map_err(|err| problem(format!("cannot be used: {err}")))?;
    if !workspace.is_dir() {
        return Err(problem("is not a directory".into()));
    }
    if absolute(data_dir).starts_with(&workspace) {
        return Err(problem(format!(
            "contains agentd's data dir {}; the agent could read its own database. \
             Choose another --data-dir (or AGENTD_DATA_DIR) outside the workspace",
            data_dir.display()
        )));
    }
    Ok(workspace)
}

/// `path` made absolute, its existing part with symlinks resolved.
fn absolute(path: &Path) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if !parent.as_os_str().is_empty() => absolute(parent).join(name),
        _ => std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or(path.to_path_buf()),
    }
}

/// A session title from its first message: one line, at most 80 characters.
fn title_from(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut title: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        title.push('…');
    }
    title
}
