//! Whether a tool call may run: `PreToolUse` hooks, then the permission rules,
//! then, when still undecided, asking through the [`Approver`].
//!
//! Precedence: a deny rule always wins (a hook cannot allow what the operator
//! denied, and `read_only` mode denies every writing tool); then a hook's
//! decision; then the rules and the mode's default.

use agentd_protocol::{Event, Resolver};
use serde_json::Value;

use crate::approval::{ApprovalRequest, Decision};
use crate::context::TurnContext;
use crate::sink::SinkError;
use agentd_policy::hooks::HookDecision;
use agentd_policy::permissions::{PermissionPolicy, ToolCallView, Verdict};

/// The outcome of gating one call.
pub(crate) enum Gate {
    /// Run with this input (a hook may have rewritten it).
    Run(Value),
    /// Do not run; tell the model this.
    Refuse(String),
}

impl TurnContext<'_> {
    pub(crate) async fn gate(
        &self,
        call_id: &str,
        tool: &str,
        read_only: bool,
        input: &Value,
    ) -> Result<Gate, SinkError> {
        let Some((input, hook)) = self.hooks_on(call_id, tool, input.clone()).await else {
            return Ok(Gate::Refuse(crate::history::NOT_RUN.to_string()));
        };
        let Some(policy) = self.agent.permissions.as_deref() else {
            // No policy configured: only hooks can stop a call.
            return Ok(match hook {
                Some((HookDecision::Deny, reason)) => Gate::Refuse(hook_denied(reason)),
                _ => Gate::Run(input),
            });
        };
        let workspace = self.agent.tool_context.guard.workspace().to_path_buf();
        let view = ToolCallView {
            tool,
            input: &input,
            read_only,
            workspace: &workspace,
        };
        let (verdict, confirm) = match policy.lock() {
            Ok(policy) => (policy.evaluate(&view), policy.must_confirm(tool)),
            Err(_) => (
                Verdict::Deny {
                    reason: "the permission policy is unavailable".into(),
                },
                true,
            ),
        };
        let ask_reason = match (verdict, hook) {
            (Verdict::Deny { reason }, _) => {
                return Ok(Gate::Refuse(format!("Permission denied: {reason}.")));
            }
            (_, Some((HookDecision::Deny, reason))) => {
                return Ok(Gate::Refuse(hook_denied(reason)));
            }
            // A command with `confirm = true` asks a human whatever a hook says.
            (Verdict::Ask { reason }, _) if confirm => reason,
            (_, Some((HookDecision::Allow, _))) | (Verdict::Allow, None) if !confirm => {
                return Ok(Gate::Run(input));
            }
            (_, Some((HookDecision::Ask, reason))) => {
                reason.unwrap_or_else(|| "a PreToolUse hook asked for approval".into())
            }
            (Verdict::Ask { reason }, None) => reason,
            // Only a `confirm` command gets here: the policy never allows
            // one (should it, it still asks), and a hook's allow is not enough.
            (Verdict::Allow | Verdict::Ask { .. }, _) => {
                format!("command {tool} always asks for confirmation")
            }
        };
        // The person asked sees everything the call runs (a command's
        // whole argv), not the one input field an approver shows.
        let ask_reason = match self
            .agent
            .tools
            .get(tool)
            .and_then(|t| t.describe_call(&input))
        {
            Some(runs) => format!("{ask_reason}; {runs}"),
            None => ask_reason,
        };
        let rule = PermissionPolicy::session_rule_for(&view);
        let call = AskedCall {
            call_id,
            tool,
            read_only,
            confirm,
        };
        self.ask(call, input, ask_reason, policy, rule).await
    }

    /// What the `PreToolUse` hooks say of a call, run once as Claude Code
    /// runs them, and its input as they left it. `None` when the turn was
    /// interrupted first (the call does not run).
    async fn hooks_on(
        &self,
        call_id: &str,
        tool: &str,
        input: Value,
    ) -> Option<(Value, HookVerdict)> {
        let Some((hooks, context)) = self.agent.hooks() else {
            return Some((input, None));
        };
        let outcome = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return None,
            outcome = hooks.pre_tool_use(context, call_id, tool, &input) => outcome,
        };
        if self.cancel.is_cancelled() {
            return None;
        }
        let decision = outcome.decision.map(|decision| (decision, outcome.reason));
        Some((outcome.updated_input.unwrap_or(input), decision))
    }

    async fn ask(
        &self,
        call: AskedCall<'_>,
        input: Value,
        reason: String,
        policy: &std::sync::Mutex<PermissionPolicy>,
        session_rule: String,
    ) -> Result<Gate, SinkError> {
        let AskedCall { call_id, tool, .. } = call;
        let request = ApprovalRequest {
            request_id: uuid::Uuid::now_v7().to_string(),
            turn_id: self.turn_id.to_string(),
            call_id: call_id.to_string(),
            tool: tool.to_string(),
            input,
            reason,
            session_rule: session_rule.clone(),
        };
        let approver = &self.agent.approver;
        approver.prepare(&request).await;
        self.sink
            .emit(Event::PermissionRequested {
                parent_call_id: None,
                request_id: request.request_id.clone(),
                call_id: request.call_id.clone(),
                tool: request.tool.clone(),
                input: request.input.clone(),
                reason: request.reason.clone(),
            })
            .await?;
        // Whoever answers must be able to see the request first.
        self.sink.flush().await?;
        // The approver watches `cancel` itself, so it can record how the
        // request ended; an interrupted turn never runs the call.
        let answer = approver.decide(&request, self.cancel).await;
        let interrupted = self.cancel.is_cancelled();
        // A `confirm` command runs only when a person said so: a timeout's
        // or a missing terminal's `on_no_answer = "allow"` does not count.
        let unconfirmed = call.confirm
            && matches!(answer.decision, Decision::Allow | Decision::AllowSession)
            && !answered_by_a_person(&answer.by);
        let (decision, by) = if interrupted {
            (Decision::Deny, Resolver::Interrupted)
        } else if unconfirmed {
            (Decision::Deny, answer.by.clone())
        } else {
            (answer.decision.clone(), answer.by.clone())
        };
        self.sink
            .emit(Event::PermissionResolved {
                request_id: request.request_id.clone(),
                decision: decision.clone(),
                by: by.clone(),
            })
            .await?;
        let rewritten = answer
            .updated_input
            .as_ref()
            .is_some_and(|updated| *updated != request.input);
        Ok(match decision {
            _ if interrupted => Gate::Refuse(crate::history::NOT_RUN.to_string()),
            _ if unconfirmed => Gate::Refuse(format!(
                "{tool} runs only when a person confirms it, and nobody did ({by}); it did not run. \
                 Do not retry the same call; ask the user to run it or confirm it."
            )),
            Decision::Allow => {
                self.allowed(call, request.input, answer.updated_input, policy)
                    .await
            }
            Decision::AllowSession => {
                // The rule is the asked call's: never remembered for a call
                // that then ran as something else.
                if !rewritten
                    && let Ok(mut policy) = policy.lock()
                    && let Err(err) = policy.allow(&session_rule)
                {
                    tracing::warn!(%err, rule = %session_rule, "could not remember a session allow");
                }
                self.allowed(call, request.input, answer.updated_input, policy)
                    .await
            }
            // A decision this build does not know never runs the call.
            Decision::Deny | Decision::Other(_) => Gate::Refuse(match answer.message {
                Some(message) if !message.trim().is_empty() => message,
                _ => format!(
                    "Permission to use {tool} was denied ({by}). Do not retry the same call; \
                     ask the user or take another approach."
                ),
            }),
        })
    }

    /// An allowed call runs with the answer's input when it gave one, which
    /// the hooks and the rules judge again: an answer cannot turn a call
    /// into one a hook or a deny rule forbids.
    async fn allowed(
        &self,
        call: AskedCall<'_>,
        input: Value,
        updated: Option<Value>,
        policy: &std::sync::Mutex<PermissionPolicy>,
    ) -> Gate {
        let Some(updated) = updated.filter(|updated| *updated != input) else {
            return Gate::Run(input);
        };
        // The hooks judge what will run, as they judged the model's call:
        // they may deny it or rewrite it (the operator's wrapper applies to
        // the approved input too); their ask is answered already.
        let updated = match self.hooks_on(call.call_id, call.tool, updated).await {
            None => return Gate::Refuse(crate::history::NOT_RUN.to_string()),
            Some((_, Some((HookDecision::Deny, reason)))) => {
                return Gate::Refuse(hook_denied(reason));
            }
            Some((updated, _)) => updated,
        };
        let workspace = self.agent.tool_context.guard.workspace().to_path_buf();
        let view = ToolCallView {
            tool: call.tool,
            input: &updated,
            read_only: call.read_only,
            workspace: &workspace,
        };
        match policy.lock().map(|policy| policy.evaluate(&view)) {
            Ok(Verdict::Deny { reason }) => Gate::Refuse(format!("Permission denied: {reason}.")),
            Err(_) => Gate::Refuse("the permission policy is unavailable".into()),
            Ok(_) => Gate::Run(updated),
        }
    }
}

/// A hook decision and its reason.
type HookVerdict = Option<(HookDecision, Option<String>)>;

/// The call an approver is asked about.
#[derive(Clone, Copy)]
struct AskedCall<'a> {
    call_id: &'a str,
    tool: &'a str,
    read_only: bool,
    /// A `confirm = true` command: only a person's allow runs it.
    confirm: bool,
}

/// Whether `by` is a person (or the client program that asks one), not a
/// fallback: the profile's `on_no_answer` after a timeout or without a
/// terminal, a store error, a restart.
fn answered_by_a_person(by: &Resolver) -> bool {
    matches!(
        by,
        Resolver::Terminal | Resolver::Client | Resolver::User(_)
    )
}

fn hook_denied(reason: Option<String>) -> String {
    match reason {
        Some(reason) => format!("Blocked by a PreToolUse hook: {reason}"),
        None => "Blocked by a PreToolUse hook.".to_string(),
    }
}
