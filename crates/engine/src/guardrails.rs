//! Limits that end a turn with their own status: budgets (per turn, with
//! subagents, and per session) and the circuit breaker (failing calls in a
//! row, the same call over and over); and the agent's own final status line.

use agentd_protocol::{AgentStatus, ContentBlock, ErrorCode, TurnStatus};
use serde_json::Value;

use crate::TurnLimits;
use crate::turn::{Exit, TurnRun};

impl TurnRun<'_> {
    /// `Some` when the turn (subagents included) or the session has spent
    /// its budget.
    pub(crate) fn over_budget(&self) -> Option<Exit> {
        let spent = self.shared.spent_usd();
        budget_reached(&self.agent.config.limits, spent)
            .map(|(code, message)| Exit::stop(TurnStatus::BudgetExceeded, code, message))
    }
}

/// Why a turn that spent `spent` USD must stop under `limits` (its
/// `max_budget_usd`, its owner's spend quota, its session's budget): the
/// code and the message. Shared by the native loop and the loopback model
/// endpoint that serves `claude-code` turns.
pub fn budget_reached(limits: &TurnLimits, spent: f64) -> Option<(ErrorCode, String)> {
    if let Some(budget) = limits.max_budget_usd
        && spent >= budget
    {
        return Some((
            ErrorCode::BudgetExceeded,
            format!(
                "The turn spent ${spent:.4}, reaching its budget of ${budget:.4} (max_budget_usd)."
            ),
        ));
    }
    if let Some(cap) = &limits.owner_spend
        && spent >= cap.remaining_usd
    {
        return Some((
            ErrorCode::SpendQuotaExceeded,
            format!(
                "The turn spent ${spent:.4}, all that was left of your {} quota \
                 (${:.4}). Ask an admin to raise it, or wait for it to reset.",
                cap.quota, cap.remaining_usd
            ),
        ));
    }
    let session = limits.session_spent_usd + spent;
    if let Some(budget) = limits.max_session_budget_usd
        && session >= budget
    {
        return Some((
            ErrorCode::SessionBudgetExceeded,
            format!(
                "The session has spent ${session:.4}, reaching its budget of ${budget:.4} \
                 (max_session_budget_usd). Raise the budget or start a new session."
            ),
        ));
    }
    None
}

/// The circuit breaker's memory of the calls so far in one run.
#[derive(Debug, Default)]
pub(crate) struct CallStreak {
    failed_in_a_row: u32,
    last_call: Option<(String, Value)>,
    same_in_a_row: u32,
}

impl CallStreak {
    /// Feeds one batch of calls (`name`, `input`) and their results, in
    /// order; `Some` when a limit (0: off) trips.
    pub(crate) fn observe(
        &mut self,
        calls: &[(String, Value)],
        results: &[ContentBlock],
        max_failed: u32,
        max_identical: u32,
    ) -> Option<Exit> {
        for ((name, input), result) in calls.iter().zip(results) {
            let failed = matches!(result, ContentBlock::ToolResult { is_error: true, .. });
            self.failed_in_a_row = if failed { self.failed_in_a_row + 1 } else { 0 };
            let same = self
                .last_call
                .as_ref()
                .is_some_and(|(n, i)| n == name && i == input);
            self.same_in_a_row = if same { self.same_in_a_row + 1 } else { 1 };
            self.last_call = Some((name.clone(), input.clone()));
            if max_failed > 0 && self.failed_in_a_row >= max_failed {
                return Some(Exit::stop(
                    TurnStatus::CircuitBreaker,
                    ErrorCode::TooManyFailures,
                    format!(
                        "The turn stopped after {} tool calls in a row failed (the last one: \
                         {name}). Check the errors above, then ask again.",
                        self.failed_in_a_row
                    ),
                ));
            }
            if max_identical > 0 && self.same_in_a_row >= max_identical {
                return Some(Exit::stop(
                    TurnStatus::CircuitBreaker,
                    ErrorCode::RepeatedCall,
                    format!(
                        "The turn stopped because the agent made the same {name} call {} times \
                         in a row without making progress.",
                        self.same_in_a_row
                    ),
                ));
            }
        }
        None
    }
}

/// The agent's verdict from a `status: complete|partial|failed` line, the
/// last such line of its final message (markdown emphasis allowed).
pub(crate) fn agent_status(text: &str) -> Option<AgentStatus> {
    text.lines().rev().find_map(|line| {
        let line = line
            .trim()
            .trim_matches(|c| c == '*' || c == '_' || c == '`');
        let (key, value) = line.split_once(':')?;
        if !key.trim().eq_ignore_ascii_case("status") {
            return None;
        }
        let value =
            value.trim_matches(|c: char| c == '*' || c == '.' || c == '`' || c.is_whitespace());
        match value.to_ascii_lowercase().as_str() {
            "complete" | "completed" => Some(AgentStatus::Complete),
            "partial" => Some(AgentStatus::Partial),
            "failed" | "failure" => Some(AgentStatus::Failed),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(is_error: bool) -> ContentBlock {
        ContentBlock::tool_result("x", "", is_error)
    }

    #[test]
    fn failures_in_a_row_trip_and_a_success_resets() {
        let mut streak = CallStreak::default();
        let call = |n: u32| (String::from("Bash"), json!({"command": n}));
        assert!(
            streak
                .observe(&[call(1), call(2)], &[result(true), result(true)], 3, 0)
                .is_none()
        );
        assert!(streak.observe(&[call(3)], &[result(false)], 3, 0).is_none());
        assert!(
            streak
                .observe(&[call(4), call(5)], &[result(true), result(true)], 3, 0)
                .is_none()
        );
        let exit = streak.observe(&[call(6)], &[result(true)], 3, 0).unwrap();
        assert_eq!(exit.status, TurnStatus::CircuitBreaker);
        assert_eq!(exit.error.unwrap().code, "too_many_failures");
    }

    #[test]
    fn identical_calls_trip_and_a_different_one_resets() {
        let mut streak = CallStreak::default();
        let same = (String::from("Read"), json!({"file_path": "a"}));
        let other = (String::from("Read"), json!({"file_path": "b"}));
        let ok = [result(false)];
        assert!(
            streak
                .observe(std::slice::from_ref(&same), &ok, 0, 3)
                .is_none()
        );
        assert!(
            streak
                .observe(std::slice::from_ref(&same), &ok, 0, 3)
                .is_none()
        );
        assert!(streak.observe(&[other], &ok, 0, 3).is_none());
        assert!(
            streak
                .observe(std::slice::from_ref(&same), &ok, 0, 3)
                .is_none()
        );
        assert!(
            streak
                .observe(std::slice::from_ref(&same), &ok, 0, 3)
                .is_none()
        );
        let exit = streak.observe(&[same], &ok, 0, 3).unwrap();
        assert_eq!(exit.error.unwrap().code, "repeated_call");
    }

    #[test]
    fn status_lines() {
        assert_eq!(
            agent_status("Done.\nstatus: complete"),
            Some(AgentStatus::Complete)
        );
        assert_eq!(
            agent_status("**Status:** partial\n"),
            Some(AgentStatus::Partial)
        );
        assert_eq!(agent_status("Status: FAILED."), Some(AgentStatus::Failed));
        assert_eq!(
            agent_status("status: complete\nlater\nstatus: partial"),
            Some(AgentStatus::Partial)
        );
        assert_eq!(agent_status("the status: of things is good"), None);
        assert_eq!(agent_status("no line here"), None);
    }
}
