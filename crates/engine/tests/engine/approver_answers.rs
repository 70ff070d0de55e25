//! What an approver's answer may carry besides its decision: a rewritten
//! input (an Agent SDK app's `canUseTool`), which the rules judge again,
//! and a deny's message for the model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentd_engine::{Agent, AgentConfig, Answer, ApprovalRequest, Approver, Decision, TurnLimits};
use agentd_model::scripted::{Script, ScriptedClient};
use agentd_policy::permissions::PermissionPolicy;
use agentd_protocol::{ContentBlock, TurnStatus};
use agentd_tools::{ToolContext, builtin_tools};
use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::collected::{Collected, user_turn};

/// Rewrites `echo` commands to `to`, denies `touch` with a message.
struct Rewriting {
    to: &'static str,
}

#[async_trait]
impl Approver for Rewriting {
    async fn decide(&self, request: &ApprovalRequest, _c: &CancellationToken) -> Answer {
        let command = request.input["command"].as_str().unwrap_or_default();
        if command.starts_with("touch") {
            return Answer::new(Decision::Deny, "test").with_message("the app says no touching");
        }
        Answer::new(Decision::Allow, "test").with_updated_input(json!({"command": self.to}))
    }
}

fn bash(id: &str, command: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": command}})
}

async fn run(to: &'static str, ws: &std::path::Path) -> Vec<(String, bool)> {
    let script: Script = serde_json::from_value(json!({"replies": [
        {"content": [bash("a", "echo asked > asked.txt")]},
        {"content": [bash("b", "touch touched.txt")]},
        {"content": [{"type": "text", "text": "done"}]}
    ]}))
    .unwrap();
    let policy = PermissionPolicy::new(Default::default(), &[], &["Bash(rm *)".into()], &[]);
    let agent = Agent::new(
        Arc::new(ScriptedClient::new(script)),
        builtin_tools(),
        ToolContext::for_workspace(ws).unwrap(),
        AgentConfig {
            model_name: "scripted".into(),
            system_prompt: "prompt".into(),
            limits: TurnLimits::default(),
            price: None,
        },
    )
    .with_permissions(policy.unwrap(), Arc::new(Rewriting { to }));
    let sink = Collected::default();
    let finished = agent
        .run_turn(user_turn("go"), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::Completed);
    let messages = sink.messages.lock().unwrap();
    let results = messages.iter().flat_map(|m| &m.content);
    results
        .filter_map(|block| match block {
            ContentBlock::ToolResult {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_allowed_call_runs_with_the_answers_input_and_a_deny_says_why() {
    let ws = tempfile::tempdir().unwrap();
    let results = run("echo rewritten > asked.txt", ws.path()).await;
    let asked = std::fs::read_to_string(ws.path().join("asked.txt")).unwrap();
    assert_eq!(asked, "rewritten\n");
    assert!(!ws.path().join("touched.txt").exists());
    assert_eq!(results[1], ("the app says no touching".to_string(), true));
}

#[tokio::test]
async fn a_rewritten_input_a_deny_rule_forbids_does_not_run() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("keep.txt"), "kept").unwrap();
    let results = run("rm -f keep.txt asked.txt", ws.path()).await;
    assert!(
        ws.path().join("keep.txt").exists(),
        "the deny rule was dodged"
    );
    assert!(
        results[0].1 && results[0].0.contains("Permission denied"),
        "{results:?}"
    );
}
