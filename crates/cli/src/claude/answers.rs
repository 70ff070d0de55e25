//! Permission requests answered by the client (`--permission-prompt-tool
//! stdio`): each becomes a `can_use_tool` request, and the client's
//! callback decides: allow (perhaps with a rewritten input, which agentd's
//! hooks and rules judge again), allow always (the suggested rule, only for
//! the call as asked), or deny with a message for the model (and, with
//! `interrupt`, the end of the turn). The agent's questions
//! (`AskUserQuestion`) go the same way, as the CLI sends them: the answers
//! come back in the allowed input's `answers`.

use std::sync::Arc;

use agentd_engine::{Answer, ApprovalRequest, Decision, QuestionAnswer, QuestionRequest};
use agentd_protocol::Resolver;
use agentd_server::approvals::AnswerSource;
use async_trait::async_trait;
use serde_json::{Value, json};

use super::Shared;
use super::control::Control;

pub struct ClientAnswers {
    pub control: Arc<Control>,
    /// Where the running turn is, for a deny that interrupts it.
    pub live: Shared,
}

#[async_trait]
impl AnswerSource for ClientAnswers {
    async fn ask(&self, request: &ApprovalRequest) -> Option<Answer> {
        let body = json!({
            "subtype": "can_use_tool",
            "tool_name": request.tool,
            "input": request.input,
            "tool_use_id": request.call_id,
            "description": request.reason,
            "decision_reason": request.reason,
            "permission_suggestions": suggestions(&request.session_rule),
        });
        let answer = match self.control.request(body).await {
            Ok(response) => {
                if response["behavior"] == "deny" && response["interrupt"] == true {
                    self.interrupt();
                }
                answer(&response, &request.input)
            }
            Err(error) => Answer::new(Decision::Deny, Resolver::Client)
                .with_message(format!("The client could not be asked: {error}")),
        };
        Some(answer)
    }

    async fn ask_question(&self, request: &QuestionRequest) -> Option<QuestionAnswer> {
        let body = json!({
            "subtype": "can_use_tool",
            "tool_name": "AskUserQuestion",
            "input": {"questions": request.questions},
            "tool_use_id": request.call_id,
            "permission_suggestions": [],
        });
        let answers = match self.control.request(body).await {
            Ok(response) if response["behavior"] == "allow" => response
                .pointer("/updatedInput/answers")
                .filter(|answers| answers.is_object())
                .cloned(),
            _ => None,
        };
        Some(QuestionAnswer {
            answers,
            by: Resolver::Client,
        })
    }
}

impl ClientAnswers {
    fn interrupt(&self) {
        if let Ok(live) = self.live.lock()
            && let Some(turn) = &live.current
        {
            turn.cancel();
        }
    }
}

/// The client's `{behavior, updatedInput, updatedPermissions, message}`
/// about a call asked with `input`.
fn answer(response: &Value, input: &Value) -> Answer {
    match response.get("behavior").and_then(Value::as_str) {
        Some("allow") => {
            let updated = response
                .get("updatedInput")
                .filter(|updated| updated.is_object() && *updated != input);
            // "Always" only as suggested: an allow rule, for the call as
            // asked (a rewritten call is allowed once).
            let always = updated.is_none()
                && response
                    .get("updatedPermissions")
                    .and_then(Value::as_array)
                    .is_some_and(|updates| updates.iter().any(adds_allow_rules));
            let decision = if always {
                Decision::AllowSession
            } else {
                Decision::Allow
            };
            let answer = Answer::new(decision, Resolver::Client);
            match updated {
                Some(input) => answer.with_updated_input(input.clone()),
                None => answer,
            }
        }
        Some("deny") => {
            let answer = Answer::new(Decision::Deny, Resolver::Client);
            match response.get("message").and_then(Value::as_str) {
                Some(message) => answer.with_message(message),
                None => answer,
            }
        }
        other => Answer::new(Decision::Deny, Resolver::Client).with_message(format!(
            "The client's answer had behavior {other:?}; the call was not run."
        )),
    }
}

fn adds_allow_rules(update: &Value) -> bool {
    update["type"] == "addRules" && update["behavior"] == "allow"
}

/// "Always allow" as Claude Code suggests it: the session rule
/// `Tool(content)` the approval would add.
fn suggestions(session_rule: &str) -> Value {
    let (tool, content) = match session_rule.split_once('(') {
        Some((tool, rest)) => (tool, rest.strip_suffix(')')),
        None => (session_rule, None),
    };
    let mut rule = json!({"toolName": tool});
    if let Some(content) = content {
        rule["ruleContent"] = json!(content);
    }
    json!([{
        "type": "addRules",
        "rules": [rule],
        "behavior": "allow",
        "destination": "session",
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clients_answers_become_decisions() {
        let asked = json!({"command": "curl x | sh"});
        let allow = answer(&json!({"behavior": "allow", "updatedInput": asked}), &asked);
        assert_eq!(
            (allow.decision, allow.updated_input),
            (Decision::Allow, None)
        );
        let rule = json!([{"type": "addRules", "behavior": "allow", "rules": []}]);
        let always = answer(
            &json!({"behavior": "allow", "updatedPermissions": rule}),
            &asked,
        );
        assert_eq!(always.decision, Decision::AllowSession);
        let deny = answer(&json!({"behavior": "deny", "message": "not today"}), &asked);
        assert_eq!(deny.decision, Decision::Deny);
        assert_eq!(deny.message.as_deref(), Some("not today"));
        assert_eq!(
            answer(&json!({"behavior": "maybe"}), &asked).decision,
            Decision::Deny
        );
    }

    #[test]
    fn always_allows_only_the_call_as_asked_and_only_by_an_allow_rule() {
        let asked = json!({"command": "curl x | sh"});
        let rewritten = json!({"command": "echo skipped"});
        let rule = json!([{"type": "addRules", "behavior": "allow", "rules": []}]);
        let both = answer(
            &json!({"behavior": "allow", "updatedInput": rewritten, "updatedPermissions": rule}),
            &asked,
        );
        assert_eq!(
            both.decision,
            Decision::Allow,
            "a rewritten call is allowed once"
        );
        assert_eq!(both.updated_input, Some(rewritten));
        for other in [
            json!([{"type": "setMode", "mode": "acceptEdits"}]),
            json!([{"type": "addRules", "behavior": "deny", "rules": []}]),
        ] {
            let once = answer(
                &json!({"behavior": "allow", "updatedPermissions": other}),
                &asked,
            );
            assert_eq!(once.decision, Decision::Allow, "{other}");
        }
    }

    #[test]
    fn the_session_rule_is_suggested_as_claude_code_writes_it() {
        let suggested = suggestions("Bash(git status)");
        assert_eq!(suggested[0]["rules"][0]["toolName"], "Bash");
        assert_eq!(suggested[0]["rules"][0]["ruleContent"], "git status");
        assert!(
            suggestions("Edit")[0]["rules"][0]
                .get("ruleContent")
                .is_none()
        );
    }
}
