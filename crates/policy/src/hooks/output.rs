//! Reading a hook's answer (Claude Code's protocol).
//!
//! - Exit 0 with empty stdout: no opinion.
//! - Exit 0 with a JSON object on stdout: `hookSpecificOutput.permissionDecision`
//!   (`allow`/`deny`/`ask`), `permissionDecisionReason`, `updatedInput`,
//!   `additionalContext`; the legacy top-level `decision` (`approve` = allow,
//!   `block` = deny) and `reason`; `continue: false` with `stopReason` = deny/block.
//!   Other fields (`suppressOutput`, `systemMessage`, …) are accepted and ignored.
//!   When both a `permissionDecision` and a legacy `decision` are given, the stricter
//!   one counts.
//! - Exit 0 with anything else on stdout: for `UserPromptSubmit` it is added context;
//!   for `PreToolUse` it is a denial ("not understood"); elsewhere it is ignored.
//! - Exit 2: deny/block, with stderr as the reason.
//! - Any other ending (non-zero exit, signal, timeout, not started): `PreToolUse`
//!   denies with a reason naming the hook; other events log a warning and take
//!   nothing from the hook.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::run::{Ending, HookRun};
use super::{Hook, HookDecision, HookEvent, HookFeedback, PreToolUseOutcome};

/// The longest reason taken from a hook's stderr (exit 2).
const REASON_CAP: usize = 8 * 1024;
/// How much of a failed hook's stderr its reason quotes (the tail).
const STDERR_TAIL: usize = 2 * 1024;
/// How much of a garbled answer the "not understood" reason quotes.
const GARBAGE_QUOTE: usize = 200;

/// The JSON a hook may print on stdout.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsonAnswer {
    #[serde(rename = "continue")]
    continue_: Option<bool>,
    stop_reason: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
    hook_specific_output: Option<SpecificAnswer>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecificAnswer {
    permission_decision: Option<String>,
    permission_decision_reason: Option<String>,
    updated_input: Option<Map<String, Value>>,
    additional_context: Option<String>,
}

/// What stdout of a hook that exited 0 holds.
enum Stdout {
    Empty,
    Json(JsonAnswer),
    /// A JSON object whose fields have the wrong types.
    BadJson(String),
    /// Not a JSON object at all.
    Text,
}

fn read_stdout(stdout: &str) -> Stdout {
    let trimmed = stdout.trim();
    if trimmed.is_empty() {
        return Stdout::Empty;
    }
    if !trimmed.starts_with('{') {
        return Stdout::Text;
    }
    match serde_json::from_str::<Value>(trimmed) {
        Err(_) => Stdout::Text,
        Ok(value) => match serde_json::from_value::<JsonAnswer>(value) {
            Ok(answer) => Stdout::Json(answer),
            Err(err) => Stdout::BadJson(err.to_string()),
        },
    }
}

fn non_empty(text: Option<String>) -> Option<String> {
    text.map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
}

/// The first `max` bytes of `text` (on a char boundary), marked when cut.
fn head(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… [truncated]", &text[..cut])
}

/// The last `max` bytes of `text` (on a char boundary), marked when cut.
fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut cut = text.len() - max;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    format!("[…] {}", &text[cut..])
}

/// Why a hook that did not end with exit 0 or 2 failed, naming it.
fn failure_reason(hook: &Hook, run: &HookRun) -> String {
    let label = hook.label();
    let what = match &run.ending {
        Ending::Exited(code) => format!("{label} failed with exit code {code}"),
        Ending::Signaled(signal) => format!("{label} was killed by signal {signal}"),
        Ending::TimedOut(seconds) => format!("{label} timed out after {seconds} s"),
        Ending::Failed(error) => format!("{label} {error}"),
    };
    let stderr = run.stderr.trim();
    if stderr.is_empty() || matches!(run.ending, Ending::Failed(_)) {
        what
    } else {
        format!("{what}; stderr: {}", tail(stderr, STDERR_TAIL))
    }
}

fn exit2_reason(hook: &Hook, run: &HookRun, verb: &str) -> String {
    let stderr = run.stderr.trim();
    if stderr.is_empty() {
        format!("{} {verb} (exit code 2)", hook.label())
    } else {
        head(stderr, REASON_CAP)
    }
}

fn deny(reason: String) -> PreToolUseOutcome {
    PreToolUseOutcome {
        decision: Some(HookDecision::Deny),
        reason: Some(reason),
        ..PreToolUseOutcome::default()
    }
}

fn not_understood(hook: &Hook, detail: &str) -> PreToolUseOutcome {
    deny(format!(
        "the output of {} was not understood ({detail}); denying the call",
        hook.label()
    ))
}

/// A `permissionDecision`, or with `legacy` a top-level `decision` (which
/// also takes `approve` and `block`); absent or empty: none.
fn decision(value: Option<&str>, legacy: bool) -> Result<Option<HookDecision>, String> {
    Ok(Some(match value.unwrap_or_default() {
        "" => return Ok(None),
        "allow" => HookDecision::Allow,
        "approve" if legacy => HookDecision::Allow,
        "deny" => HookDecision::Deny,
        "block" if legacy => HookDecision::Deny,
        "ask" => HookDecision::Ask,
        other if legacy => return Err(format!("unknown decision `{other}`")),
        other => return Err(format!("unknown permissionDecision `{other}`")),
    }))
}

/// One `PreToolUse` hook's answer.
pub(crate) fn pre_tool_verdict(hook: &Hook, run: &HookRun) -> PreToolUseOutcome {
    match run.ending {
        Ending::Exited(0) => {}
        Ending::Exited(2) => return deny(exit2_reason(hook, run, "denied the call")),
        _ => return deny(failure_reason(hook, run)),
    }
    if run.stdout_truncated {
        return not_understood(hook, "more than 1 MiB of output");
    }
    let answer = match read_stdout(&run.stdout) {
        Stdout::Empty => return PreToolUseOutcome::default(),
        Stdout::Json(answer) => answer,
        Stdout::BadJson(error) => return not_understood(hook, &error),
        Stdout::Text => {
            let quote = head(run.stdout.trim(), GARBAGE_QUOTE);
            return not_understood(hook, &format!("expected JSON, got {quote:?}"));
        }
    };
    let outcome =
        pre_tool_answer(hook, answer).unwrap_or_else(|error| not_understood(hook, &error));
    if hook.sandboxed {
        return project_hook_outcome(outcome);
    }
    outcome
}

/// A project's hook (from files the agent can write) may deny, ask or add
/// context, never allow a call or change its input: the operator's rules
/// and hooks keep the last word on what runs.
fn project_hook_outcome(mut outcome: PreToolUseOutcome) -> PreToolUseOutcome {
    if outcome.decision == Some(HookDecision::Allow) {
        outcome.decision = None;
        outcome.reason = None;
    }
    outcome.updated_input = None;
    outcome
}

fn pre_tool_answer(hook: &Hook, answer: JsonAnswer) -> Result<PreToolUseOutcome, String> {
    let specific = answer.hook_specific_output.unwrap_or_default();
    let additional_context = non_empty(specific.additional_context).into_iter().collect();
    if answer.continue_ == Some(false) {
        let reason = non_empty(answer.stop_reason)
            .or_else(|| non_empty(answer.reason))
            .unwrap_or_else(|| format!("{} stopped processing", hook.label()));
        return Ok(PreToolUseOutcome {
            additional_context,
            ..deny(reason)
        });
    }
    let new = decision(specific.permission_decision.as_deref(), false)?;
    let legacy = decision(answer.decision.as_deref(), true)?;
    let new_reason = non_empty(specific.permission_decision_reason);
    let legacy_reason = non_empty(answer.reason);
    let (decision, reason) = if new >= legacy {
        (new, new_reason.or(legacy_reason))
    } else {
        (legacy, legacy_reason.or(new_reason))
    };
    let reason = match decision {
        Some(HookDecision::Deny) => {
            Some(reason.unwrap_or_else(|| format!("denied by {}", hook.label())))
        }
        _ => reason,
    };
    Ok(PreToolUseOutcome {
        decision,
        reason,
        updated_input: specific.updated_input.map(Value::Object),
        additional_context,
    })
}

/// One hook's answer for an event other than `PreToolUse`.
pub(crate) fn feedback_verdict(hook: &Hook, run: &HookRun) -> HookFeedback {
    match run.ending {
        Ending::Exited(0) => {}
        Ending::Exited(2) => {
            return HookFeedback {
                block: true,
                reason: Some(exit2_reason(hook, run, "blocked")),
                additional_context: Vec::new(),
            };
        }
        _ => {
            tracing::warn!("{}; its answer is ignored", failure_reason(hook, run));
            return HookFeedback::default();
        }
    }
    match read_stdout(&run.stdout) {
        Stdout::Empty => HookFeedback::default(),
        Stdout::Json(answer) => feedback_answer(hook, answer),
        Stdout::BadJson(error) => {
            tracing::warn!(
                "the output of {} was not understood ({error}); ignoring it",
                hook.label()
            );
            HookFeedback::default()
        }
        Stdout::Text if hook.event == HookEvent::UserPromptSubmit => HookFeedback {
            additional_context: vec![run.stdout.trim().to_owned()],
            ..HookFeedback::default()
        },
        Stdout::Text => {
            tracing::debug!("{} printed plain text; ignoring it", hook.label());
            HookFeedback::default()
        }
    }
}

fn feedback_answer(hook: &Hook, answer: JsonAnswer) -> HookFeedback {
    let specific = answer.hook_specific_output.unwrap_or_default();
    let additional_context = non_empty(specific.additional_context).into_iter().collect();
    let (block, reason) = if answer.continue_ == Some(false) {
        let reason = non_empty(answer.stop_reason)
            .or_else(|| non_empty(answer.reason))
            .unwrap_or_else(|| format!("{} stopped processing", hook.label()));
        (true, Some(reason))
    } else {
        match answer.decision.as_deref() {
            Some("block") => {
                let reason = non_empty(answer.reason)
                    .unwrap_or_else(|| format!("blocked by {}", hook.label()));
                (true, Some(reason))
            }
            None | Some("approve" | "allow" | "") => (false, None),
            Some(other) => {
                tracing::warn!(
                    "{} answered an unknown decision `{other}`; ignoring it",
                    hook.label()
                );
                (false, None)
            }
        }
    };
    HookFeedback {
        block,
        reason,
        additional_context,
    }
}
