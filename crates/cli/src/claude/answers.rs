//! Permission requests answered by the client (`--permission-prompt-tool
//! stdio`): each becomes a `can_use_tool` request, and the client's
//! callback decides: allow (perhaps with a rewritten input, which agentd's
//! rules judge again), allow always (the suggested rule), or deny with a
//! message for the model.

use std::sync::Arc;

use agentd_engine::{Answer, ApprovalRequest, Decision};
use agentd_protocol::Resolver;
use agentd_server::approvals::AnswerSource;
use async_trait::async_trait;
use serde_json::{Value, json};

use super::control::Control;

pub struct ClientAnswers {
    pub control: Arc<Control>,
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
            "permission_suggestions": suggestions(&request.session_rule),
        });
        Some(match self.control.request(body).await {
            Ok(response) => answer(&response),
            Err(error) => Answer::new(Decision::Deny, Resolver::Client)
                .with_message(format!("The client could not be asked: {error}")),
        })
    }
}

/// The client's `{behavior, updatedInput, updatedPermissions, message}`.
fn answer(response: &Value) -> Answer {
    match response.get("behavior").and_then(Value::as_str) {
        Some("allow") => {
            let always = response
                .get("updatedPermissions")
                .and_then(Value::as_array)
                .is_some_and(|updates| !updates.is_empty());
            let decision = if always {
                Decision::AllowSession
            } else {
                Decision::Allow
            };
            let answer = Answer::new(decision, Resolver::Client);
            match response
                .get("updatedInput")
                .filter(|input| input.is_object())
            {
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
        let allow = answer(&json!({"behavior": "allow", "updatedInput": {"command": "ls"}}));
        assert_eq!(allow.decision, Decision::Allow);
        assert_eq!(allow.updated_input, Some(json!({"command": "ls"})));
        let always = answer(&json!({"behavior": "allow", "updatedPermissions": [{}]}));
        assert_eq!(always.decision, Decision::AllowSession);
        let deny = answer(&json!({"behavior": "deny", "message": "not today"}));
        assert_eq!(deny.decision, Decision::Deny);
        assert_eq!(deny.message.as_deref(), Some("not today"));
        assert_eq!(
            answer(&json!({"behavior": "maybe"})).decision,
            Decision::Deny
        );
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
