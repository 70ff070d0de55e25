//! Operator-configured hooks: external commands run at fixed points of
//! the agent loop, speaking Claude Code's hook protocol so existing hook scripts work.
//!
//! Each hook is `bash -c <command>`, started in the session workspace with a minimal
//! clean environment (see `run.rs`), given one JSON object on stdin and
//! answering with an exit code and, optionally, JSON on stdout.
//!
//! # Which hooks run
//!
//! A hook runs for its `event`. For `PreToolUse` and `PostToolUse` its `matcher` is
//! matched against the tool name, for `PreCompact` against the trigger (`manual` or
//! `auto`, as Claude Code does); `UserPromptSubmit` and `Stop` ignore it. A matcher
//! that is absent, empty or `*` matches everything; one made only of letters, digits,
//! `_`, `-`, spaces and `|` is a list of exact names (`Edit|Write`); anything else is a regex
//! that must match the *whole* name (`mcp__.*`, `Notebook.*`).
//!
//! All matching hooks of an event run in parallel; their answers are combined in
//! config order (see [`PreToolUseOutcome`] and [`HookFeedback`]).
//!
//! # Fail closed
//!
//! For `PreToolUse` every way a hook can go wrong — it cannot be started, it times
//! out, it exits non-zero, or it prints something that is not a hook answer — is a
//! denial with a reason that names the hook. It is never an allow. For the other
//! events a broken hook is logged at warn level and contributes nothing.

mod callback;
mod output;
mod run;
mod sandboxed;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

pub use self::callback::HookCallback;
use self::output::{feedback_verdict, pre_tool_verdict};
use self::run::run_hook;

/// The default for [`HookConfig::timeout_s`].
pub const DEFAULT_TIMEOUT_S: u64 = 60;

/// The points of the agent loop where hooks run (Claude Code's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize)]
pub enum HookEvent {
    PreToolUse,
    PostToolUse,
    UserPromptSubmit,
    Stop,
    PreCompact,
}

impl HookEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::Stop => "Stop",
            Self::PreCompact => "PreCompact",
        }
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One configured hook, as written in `agentd.toml`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    pub event: HookEvent,
    /// Tool-name matcher for the tool events (the trigger for `PreCompact`): an exact
    /// name, `A|B` alternatives, or a whole-name regex; `None`, `""` or `"*"` = all.
    #[serde(default)]
    pub matcher: Option<String>,
    /// Run with `bash -c`.
    pub command: String,
    /// Wall-clock limit; the whole process group is killed when it passes.
    #[serde(default = "default_timeout_s")]
    pub timeout_s: u64,
    /// Run inside the session's sandbox (`HookContext::sandbox`), as a
    /// project's own hooks are: never set from the operator's config.
    #[serde(skip)]
    pub sandboxed: bool,
    /// Answered by the client's own code instead of a command (an Agent SDK
    /// app's hook, asked over its control protocol); `command` then only
    /// names it. Never set from config.
    #[serde(skip)]
    pub callback: Option<HookCallback>,
}

fn default_timeout_s() -> u64 {
    DEFAULT_TIMEOUT_S
}

/// A hook configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookConfigError {
    #[error("hook #{index} ({event}): invalid matcher `{matcher}`: {error}")]
    InvalidMatcher {
        index: usize,
        event: HookEvent,
        matcher: String,
        error: String,
    },
    #[error("hook #{index} ({event}): the command is empty")]
    EmptyCommand { index: usize, event: HookEvent },
    #[error("hook #{index} ({event}): timeout_s must be at least 1")]
    ZeroTimeout { index: usize, event: HookEvent },
}

/// What a hook process is told about where it runs.
#[derive(Debug, Clone, Default)]
pub struct HookContext {
    pub session_id: String,
    /// The session workspace: the hook's working directory and `CLAUDE_PROJECT_DIR`.
    pub cwd: PathBuf,
    pub transcript_path: Option<PathBuf>,
    /// Extra environment for hook processes (on top of PATH, HOME and LANG).
    pub env: BTreeMap<String, String>,
    /// The agent's user, whom a root server runs hooks as: a hook works in
    /// the workspace the agent writes, and may even run a script from it.
    pub run_as: Option<agentd_sandbox::confined::FsIdentity>,
    /// (device, inode) `cwd` must be: the directory the turn opened. A hook
    /// finding another one there does not run.
    pub workspace_pin: Option<(u64, u64)>,
    /// The sandbox of the session's commands, where sandboxed hooks run;
    /// without one they fail (closed).
    pub sandbox: Option<agentd_sandbox::Policy>,
}

/// A hook's permission answer for a tool call, ordered by strictness: deny >
/// ask > allow (> no opinion, `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HookDecision {
    Allow,
    Ask,
    Deny,
}

impl HookDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Ask => "ask",
        }
    }
}

/// The combined answer of the `PreToolUse` hooks for one tool call.
///
/// Combination, over the matching hooks in config order: any deny → deny; else any
/// ask → ask; else any allow → allow; else `None` (no opinion). `reason` joins, one
/// per line, the reasons of the hooks that gave the winning decision (a deny always
/// has one). `updated_input` is the one from the *last* hook in config order that
/// gave one — hooks run in parallel on the original input, so updates do not chain —
/// and is dropped when the outcome is a deny; a client callback's counts only
/// when no configured hook gave one. `additional_context` holds every hook's
/// context in config order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PreToolUseOutcome {
    pub decision: Option<HookDecision>,
    pub reason: Option<String>,
    pub updated_input: Option<Value>,
    pub additional_context: Vec<String>,
}

impl PreToolUseOutcome {
    pub fn is_denied(&self) -> bool {
        self.decision == Some(HookDecision::Deny)
    }
}

/// The combined answer of the hooks of a non-permission event.
///
/// `block` is true when any hook blocked (exit code 2, `"decision": "block"` or
/// `"continue": false`); `reason` joins their reasons, one per line. What a block
/// means is up to the caller: `UserPromptSubmit` rejects the prompt, `Stop` keeps the
/// turn going with the reason as feedback, `PostToolUse` hands the reason to the
/// model. `additional_context` holds every hook's context in config order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookFeedback {
    pub block: bool,
    pub reason: Option<String>,
    pub additional_context: Vec<String>,
}

/// Which names a hook applies to.
#[derive(Debug, Clone)]
enum Matcher {
    All,
    Names(Vec<String>),
    Regex(regex::Regex),
}

impl Matcher {
    fn parse(matcher: Option<&str>) -> Result<Self, regex::Error> {
        let matcher = matcher.map(str::trim).unwrap_or("");
        if matcher.is_empty() || matcher == "*" {
            return Ok(Self::All);
        }
        let plain = matcher
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '|' | ' '));
        if plain {
            let names = matcher
                .split('|')
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>();
            return Ok(if names.is_empty() {
                Self::All
            } else {
                Self::Names(names)
            });
        }
        regex::Regex::new(&format!("^(?:{matcher})$")).map(Self::Regex)
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Self::All => true,
            Self::Names(names) => names.iter().any(|candidate| candidate == name),
            Self::Regex(regex) => regex.is_match(name),
        }
    }
}

/// One validated hook.
#[derive(Debug, Clone)]
struct Hook {
    event: HookEvent,
    matcher: Matcher,
    command: String,
    timeout: Duration,
    sandboxed: bool,
    callback: Option<HookCallback>,
}

impl Hook {
    /// How the hook is named in reasons and logs: its event and (shortened) command.
    fn label(&self) -> String {
        const MAX: usize = 80;
        let command = self.command.trim();
        let shown = match command.char_indices().nth(MAX) {
            Some((cut, _)) => format!("{}…", &command[..cut]),
            None => command.to_owned(),
        };
        format!("{} hook `{shown}`", self.event)
    }
}

/// The configured hooks of a server or profile.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    hooks: Vec<Hook>,
}

impl Hooks {
    /// Validate the configuration: matchers must compile, commands must not be
    /// empty, timeouts must be at least one second.
    pub fn new(configs: Vec<HookConfig>) -> Result<Self, HookConfigError> {
        let mut hooks = Vec::with_capacity(configs.len());
        for (index, config) in configs.into_iter().enumerate() {
            let event = config.event;
            let matcher = Matcher::parse(config.matcher.as_deref()).map_err(|err| {
                HookConfigError::InvalidMatcher {
                    index,
                    event,
                    matcher: config.matcher.clone().unwrap_or_default(),
                    error: err.to_string(),
                }
            })?;
            if config.command.trim().is_empty() {
                return Err(HookConfigError::EmptyCommand { index, event });
            }
            if config.timeout_s == 0 {
                return Err(HookConfigError::ZeroTimeout { index, event });
            }
            hooks.push(Hook {
                event,
                matcher,
                command: config.command,
                timeout: Duration::from_secs(config.timeout_s),
                sandboxed: config.sandboxed,
                callback: config.callback,
            });
        }
        Ok(Self { hooks })
    }

    /// No hooks configured at all.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Whether any hook is configured for `event` (whatever its matcher).
    pub fn has_event(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|hook| hook.event == event)
    }

    /// Ask the `PreToolUse` hooks matching `tool` about a call.
    pub async fn pre_tool_use(
        &self,
        ctx: &HookContext,
        call_id: &str,
        tool: &str,
        input: &Value,
    ) -> PreToolUseOutcome {
        let payload = json!({ "tool_name": tool, "tool_input": input, "tool_use_id": call_id });
        let event = HookEvent::PreToolUse;
        let by_client = |hook: &Hook, run: &run::HookRun| {
            (hook.callback.is_some(), pre_tool_verdict(hook, run))
        };
        let verdicts = self.run_matching(ctx, event, Some(tool), payload, by_client);
        combine_pre_tool(configured_rewrites_first(verdicts.await))
    }

    /// Tell the `PostToolUse` hooks matching `tool` about a finished call.
    pub async fn post_tool_use(
        &self,
        ctx: &HookContext,
        call_id: &str,
        tool: &str,
        input: &Value,
        output: &str,
        is_error: bool,
    ) -> HookFeedback {
        let payload = json!({
            "tool_name": tool,
            "tool_input": input,
            "tool_use_id": call_id,
            "tool_response": { "output": output, "is_error": is_error },
        });
        self.feedback(ctx, HookEvent::PostToolUse, Some(tool), payload)
            .await
    }

    /// Run the `UserPromptSubmit` hooks on a new user prompt.
    pub async fn user_prompt_submit(&self, ctx: &HookContext, prompt: &str) -> HookFeedback {
        let payload = json!({ "prompt": prompt });
        self.feedback(ctx, HookEvent::UserPromptSubmit, None, payload)
            .await
    }

    /// Run the `Stop` hooks when the model is about to end the turn.
    /// `stop_hook_active` is always false: agentd does not re-run Stop hooks on a
    /// turn they already kept going. The last assistant message is passed as
    /// `last_assistant_message`.
    pub async fn stop(&self, ctx: &HookContext, last_message: &str) -> HookFeedback {
        let payload = json!({
            "stop_hook_active": false,
            "last_assistant_message": last_message,
        });
        self.feedback(ctx, HookEvent::Stop, None, payload).await
    }

    /// Run the `PreCompact` hooks matching `trigger` (`manual` or `auto`).
    pub async fn pre_compact(&self, ctx: &HookContext, trigger: &str) -> HookFeedback {
        let payload = json!({ "trigger": trigger, "custom_instructions": "" });
        self.feedback(ctx, HookEvent::PreCompact, Some(trigger), payload)
            .await
    }

    async fn feedback(
        &self,
        ctx: &HookContext,
        event: HookEvent,
        subject: Option<&str>,
        payload: Value,
    ) -> HookFeedback {
        let verdicts = self.run_matching(ctx, event, subject, payload, feedback_verdict);
        combine_feedback(verdicts.await)
    }

    /// Run, in parallel, every hook of `event` whose matcher accepts `subject`
    /// (`None`: the event has nothing to match), each given the common fields plus
    /// `payload` on stdin. Their `verdict`s come back in config order.
    async fn run_matching<T>(
        &self,
        ctx: &HookContext,
        event: HookEvent,
        subject: Option<&str>,
        payload: Value,
        verdict: fn(&Hook, &run::HookRun) -> T,
    ) -> Vec<T> {
        let matching: Vec<&Hook> = self
            .hooks
            .iter()
            .filter(|hook| hook.event == event)
            .filter(|hook| subject.is_none_or(|name| hook.matcher.matches(name)))
            .collect();
        if matching.is_empty() {
            return Vec::new();
        }
        let stdin = stdin_json(ctx, event, payload);
        let runs = futures::future::join_all(matching.iter().map(|hook| async {
            match &hook.callback {
                Some(callback) => callback.run(hook.timeout, &stdin).await,
                None => run_hook(&hook.command, hook.timeout, hook.sandboxed, ctx, &stdin).await,
            }
        }))
        .await;
        let pairs = matching.into_iter().zip(&runs);
        pairs.map(|(hook, run)| verdict(hook, run)).collect()
    }
}

/// The hook's stdin: the common fields, then the event's own.
fn stdin_json(ctx: &HookContext, event: HookEvent, payload: Value) -> Vec<u8> {
    let transcript_path = ctx
        .transcript_path
        .as_ref()
        .map(|p| p.display().to_string());
    let mut stdin = json!({
        "session_id": ctx.session_id,
        "transcript_path": transcript_path,
        "cwd": ctx.cwd.display().to_string(),
        "hook_event_name": event.as_str(),
    });
    if let (Value::Object(object), Value::Object(fields)) = (&mut stdin, payload) {
        object.extend(fields);
    }
    let mut bytes = stdin.to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}

fn join_reasons(reasons: Vec<String>) -> Option<String> {
    (!reasons.is_empty()).then(|| reasons.join("\n"))
}

/// The verdicts, without the client callbacks' rewrites when a configured
/// hook (the operator's, a project's) rewrote the call: an app's hook
/// cannot undo the operator's change (a wrapper, a stripped flag).
fn configured_rewrites_first(verdicts: Vec<(bool, PreToolUseOutcome)>) -> Vec<PreToolUseOutcome> {
    let configured_rewrote = verdicts
        .iter()
        .any(|(client, verdict)| !client && verdict.updated_input.is_some());
    let verdicts = verdicts.into_iter().map(|(client, mut verdict)| {
        if client && configured_rewrote {
            verdict.updated_input = None;
        }
        verdict
    });
    verdicts.collect()
}

/// See [`PreToolUseOutcome`] for the rules.
fn combine_pre_tool(verdicts: Vec<PreToolUseOutcome>) -> PreToolUseOutcome {
    let decision = verdicts
        .iter()
        .map(|verdict| verdict.decision)
        .max()
        .flatten();
    let mut reasons = Vec::new();
    let mut updated_input = None;
    let mut additional_context = Vec::new();
    for verdict in verdicts {
        if verdict.decision.is_some() && verdict.decision == decision {
            reasons.extend(verdict.reason);
        }
        if verdict.updated_input.is_some() {
            updated_input = verdict.updated_input;
        }
        additional_context.extend(verdict.additional_context);
    }
    if decision == Some(HookDecision::Deny) {
        updated_input = None;
    }
    PreToolUseOutcome {
        decision,
        reason: join_reasons(reasons),
        updated_input,
        additional_context,
    }
}

/// See [`HookFeedback`] for the rules.
fn combine_feedback(verdicts: Vec<HookFeedback>) -> HookFeedback {
    let mut combined = HookFeedback::default();
    let mut reasons = Vec::new();
    for verdict in verdicts {
        if verdict.block {
            combined.block = true;
            reasons.extend(verdict.reason);
        }
        combined
            .additional_context
            .extend(verdict.additional_context);
    }
    combined.reason = join_reasons(reasons);
    combined
}
