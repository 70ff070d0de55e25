//! The engine's own tools: `TodoWrite`, `AskUserQuestion` and `Task`
//! subagents, with the in-process scripted model and real tools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd_engine::{
    Agent, AgentConfig, Answer, ApprovalRequest, Approver, Decision, QuestionAnswer,
    QuestionRequest, SubagentDef, Subagents, TurnLimits,
};
use agentd_model::scripted::{Script, ScriptedClient};
use agentd_protocol::{ContentBlock, Event, Message, TodoStatus, TurnStatus};
use agentd_tools::{ToolContext, builtin_tools};
use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::collected::{Collected, user_turn as input};

/// Answers every question with `answers`.
struct Answering(Option<Value>);

#[async_trait]
impl Approver for Answering {
    async fn decide(&self, _r: &ApprovalRequest, _c: &CancellationToken) -> Answer {
        Answer::new(Decision::Deny, "test")
    }
    async fn answer_question(
        &self,
        _r: &QuestionRequest,
        _c: &CancellationToken,
    ) -> QuestionAnswer {
        match &self.0 {
            Some(answers) => QuestionAnswer {
                answers: Some(answers.clone()),
                by: "user:test".into(),
            },
            None => QuestionAnswer::unanswered("timeout"),
        }
    }
}

fn agent(script: Value, workspace: &std::path::Path) -> (Agent, Arc<ScriptedClient>) {
    let script: Script = serde_json::from_value(script).unwrap();
    let client = Arc::new(ScriptedClient::new(script));
    let agent = Agent::new(
        client.clone(),
        builtin_tools(),
        ToolContext::for_workspace(workspace).unwrap(),
        AgentConfig {
            model_name: "scripted".into(),
            system_prompt: "parent prompt".into(),
            limits: TurnLimits::default(),
            price: None,
        },
    );
    (agent, client)
}

fn task(id: &str, prompt: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "Task", "input": {
        "description": "a subtask", "prompt": prompt, "subagent_type": "general-purpose"}})
}

fn tool_results(messages: &[Message]) -> Vec<(String, String, bool)> {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } => Some((tool_use_id.clone(), content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn todo_write_publishes_the_plan() {
    let ws = tempfile::tempdir().unwrap();
    let (agent, _) = agent(
        json!({"replies": [
            {"content": [{"type": "tool_use", "id": "td", "name": "TodoWrite", "input": {"todos": [
                {"content": "Read code", "status": "completed", "activeForm": "Reading code"},
                {"content": "Fix bug", "status": "in_progress", "activeForm": "Fixing bug"}
            ]}}]},
            {"content": [{"type": "tool_use", "id": "bad", "name": "TodoWrite", "input": {"todos": [
                {"content": "x", "status": "someday"}]}}]},
            {"content": [{"type": "text", "text": "ok"}]}
        ]}),
        ws.path(),
    );
    let sink = Collected::default();
    let finished = agent
        .run_turn(input("plan"), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::Completed);
    let events = sink.events.lock().unwrap();
    let updates: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::TodoUpdated { call_id, todos, .. } => Some((call_id.clone(), todos.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(updates.len(), 1, "the invalid list is not published");
    assert_eq!(updates[0].0, "td");
    assert_eq!(updates[0].1[1].status, TodoStatus::InProgress);
    let results = tool_results(&sink.messages.lock().unwrap());
    assert!(!results[0].2 && results[0].1.contains("Todos have been modified"));
    assert!(
        results[1].2 && results[1].1.contains("someday"),
        "{:?}",
        results[1]
    );
}

#[tokio::test]
async fn parallel_subagents_report_back_with_their_events_marked() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "SECRET-NOTE").unwrap();
    let (agent, client) = agent(
        json!({"replies": [
            {"when": {"last_user_contains": "start"}, "content": [
                {"type": "text", "text": "Splitting the work."},
                task("A", "ALPHA: read notes.txt"), task("B", "BETA: just report")]},
            {"when": {"last_user_contains": "ALPHA"}, "delay_ms": 20, "content": [
                {"type": "tool_use", "id": "A-read", "name": "Read", "input": {"file_path": "notes.txt"}}]},
            {"when": {"last_tool_result_contains": "SECRET-NOTE"}, "content": [
                {"type": "text", "text": "ALPHA-REPORT: the note says SECRET-NOTE"}]},
            {"when": {"last_user_contains": "BETA"}, "content": [{"type": "text", "text": "BETA-REPORT"}]},
            {"when": {"last_tool_name": "Task"}, "content": [{"type": "text", "text": "all done"}]}
        ]}),
        ws.path(),
    );
    let agent = agent.with_subagents(Subagents::default());
    let sink = Collected::default();
    let finished = agent
        .run_turn(input("start"), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::Completed, "{finished:?}");
    assert_eq!(finished.result.as_deref(), Some("all done"));

    let events = sink.events.lock().unwrap();
    let pos = |pred: &dyn Fn(&Event) -> bool| events.iter().position(pred).unwrap();
    let started = |id: &'static str| move |e: &Event| matches!(e, Event::ToolStarted { call_id, .. } if call_id == id);
    let finished_call = |id: &'static str| move |e: &Event| matches!(e, Event::ToolFinished { call_id, .. } if call_id == id);
    // Both subagents start before either finishes: they run in parallel.
    assert!(
        pos(&started("A")).max(pos(&started("B")))
            < pos(&finished_call("A")).min(pos(&finished_call("B")))
    );
    // The subagent's own tool call is marked with its Task call.
    let read = events
        .iter()
        .find_map(|e| match e {
            Event::ToolStarted {
                call_id,
                parent_call_id,
                ..
            } if call_id == "A-read" => Some(parent_call_id.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(read.as_deref(), Some("A"));
    assert!(
        pos(&started("A-read")) > pos(&started("A"))
            && pos(&started("A-read")) < pos(&finished_call("A"))
    );
    let marked: Vec<Option<&str>> = events
        .iter()
        .filter_map(|e| match e {
            Event::MessageCompleted { parent_call_id, .. } => Some(parent_call_id.as_deref()),
            _ => None,
        })
        .collect();
    assert_eq!(marked.iter().filter(|p| **p == Some("A")).count(), 2);
    assert_eq!(marked.iter().filter(|p| **p == Some("B")).count(), 1);
    assert_eq!(marked.iter().filter(|p| p.is_none()).count(), 2);
    // Usage of subagent calls is counted in the turn's totals.
    let calls = events
        .iter()
        .filter(|e| matches!(e, Event::Usage { .. }))
        .count();
    assert_eq!(calls, 5);
    let subagent_usage: u64 = events
        .iter()
        .filter_map(|e| match e {
            Event::Usage {
                usage,
                parent_call_id: Some(_),
                ..
            } => Some(usage.output_tokens),
            _ => None,
        })
        .sum();
    assert!(subagent_usage > 0 && finished.usage.output_tokens > subagent_usage);

    // The reports are the Task results; the subagents' work stays out of the transcript.
    let messages = sink.messages.lock().unwrap();
    let results = tool_results(&messages);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].0, "A");
    assert!(results[0].1.contains("ALPHA-REPORT"), "{results:?}");
    assert_eq!(results[1].1, "BETA-REPORT");
    assert!(
        !messages
            .iter()
            .any(|m| m.text().contains("SECRET-NOTE") && m.text().contains("ALPHA:"))
    );
    assert_eq!(messages.len(), 4, "user, assistant, results, assistant");

    // Each subagent started with its own prompt only, under its own system prompt.
    let requests = client.requests();
    let alpha = requests
        .iter()
        .find(|r| {
            r.messages
                .first()
                .is_some_and(|m| m.text().starts_with("ALPHA"))
        })
        .unwrap();
    assert_eq!(alpha.messages.len(), 1);
    assert!(alpha.system.as_deref().unwrap().contains("subagent"));
    assert!(
        !alpha
            .tools
            .iter()
            .any(|t| t.name == "Task" || t.name == "AskUserQuestion")
    );
    assert!(requests[0].tools.iter().any(|t| t.name == "Task"));
}

#[tokio::test]
async fn subagents_are_capped_per_turn_and_by_depth() {
    let ws = tempfile::tempdir().unwrap();
    let (agent, _) = agent(
        json!({"replies": [
            {"when": {"last_user_contains": "start"}, "content": [task("A", "ONE"), task("B", "TWO")]},
            {"when": {"last_user_contains": "ONE"}, "content": [task("nested", "THREE")]},
            {"when": {"last_tool_name": "Task", "last_tool_result_contains": "no tool named"}, "content": [
                {"type": "text", "text": "could not nest"}]},
            {"when": {"last_tool_name": "Task"}, "content": [{"type": "text", "text": "done"}]}
        ]}),
        ws.path(),
    );
    let agent = agent.with_subagents(Subagents::new(Vec::new(), 1, 1));
    let sink = Collected::default();
    let finished = agent
        .run_turn(input("start"), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::Completed, "{finished:?}");
    let results = tool_results(&sink.messages.lock().unwrap());
    let by_id = |id: &str| results.iter().find(|r| r.0 == id).unwrap().clone();
    let (a, b) = (by_id("A"), by_id("B"));
    // One of the two got the only slot; the subagent could not nest a Task.
    let (ran, refused) = if a.2 { (b, a) } else { (a, b) };
    assert!(
        refused.2 && refused.1.contains("max_subagents"),
        "{refused:?}"
    );
    assert!(!ran.2, "{ran:?}");
    if ran.0 == "A" {
        assert_eq!(ran.1, "could not nest");
    }
}

#[tokio::test]
async fn a_subagent_gets_only_its_tools_and_model() {
    let ws = tempfile::tempdir().unwrap();
    let (agent, _) = agent(
        json!({"replies": [
            {"when": {"last_user_contains": "start"}, "content": [{"type": "tool_use", "id": "R", "name": "Task",
                "input": {"description": "review", "prompt": "REVIEW", "subagent_type": "reviewer"}}]},
            {"when": {"last_tool_name": "Task"}, "content": [{"type": "text", "text": "done"}]}
        ]}),
        ws.path(),
    );
    let reviewer_script: Script = serde_json::from_value(json!({"replies": [
        {"when": {"last_user_contains": "REVIEW"}, "content": [
            {"type": "tool_use", "id": "W", "name": "Write", "input": {"file_path": "x.txt", "content": "no"}}]},
        {"content": [{"type": "text", "text": "REVIEWED"}]}
    ]}))
    .unwrap();
    let reviewer_client = Arc::new(ScriptedClient::new(reviewer_script));
    let def = SubagentDef {
        name: "reviewer".into(),
        description: "reviews".into(),
        prompt: "You review code.".into(),
        tools: Some(vec!["Read".into(), "Grep".into()]),
        model: Some(agentd_engine::SubagentModel {
            client: reviewer_client.clone(),
            model_name: "reviewer-model".into(),
        }),
    };
    let agent = agent.with_subagents(Subagents::new(vec![def], 4, 1));
    let sink = Collected::default();
    let finished = agent
        .run_turn(input("start"), &sink, CancellationToken::new())
        .await;
    assert_eq!(finished.status, TurnStatus::Completed, "{finished:?}");
    assert!(!ws.path().join("x.txt").exists());
    let requests = reviewer_client.requests();
    assert_eq!(requests[0].model, "reviewer-model");
    assert_eq!(requests[0].system.as_deref(), Some("You review code."));
    let names: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["Grep", "Read"]);
    assert!(requests[1].messages.iter().any(|m| {
        m.text().contains("no tool named \"Write\"")
            || tool_results(std::slice::from_ref(m))
                .iter()
                .any(|r| r.1.contains("no tool named"))
    }));
    let results = tool_results(&sink.messages.lock().unwrap());
    assert_eq!(results[0].1, "REVIEWED");
}

#[tokio::test]
async fn an_interrupt_reaches_a_running_subagent() {
    let ws = tempfile::tempdir().unwrap();
    let (agent, _) = agent(
        json!({"replies": [
            {"when": {"last_user_contains": "start"}, "content": [task("A", "SLOW")]},
            {"when": {"last_user_contains": "SLOW"}, "content": [
                {"type": "tool_use", "id": "sleep", "name": "Bash", "input": {"command": "sleep 30"}}]},
            {"content": [{"type": "text", "text": "never"}]}
        ]}),
        ws.path(),
    );
    let agent = agent.with_subagents(Subagents::default());
    let sink = Arc::new(Collected::default());
    let cancel = CancellationToken::new();
    let watcher = {
        let (sink, cancel) = (sink.clone(), cancel.clone());
        tokio::spawn(async move {
            loop {
                let running =
                    sink.events.lock().unwrap().iter().any(
                        |e| matches!(e, Event::ToolStarted { call_id, .. } if call_id == "sleep"),
                    );
                if running {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    cancel.cancel();
                    return Instant::now();
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let finished = agent.run_turn(input("start"), sink.as_ref(), cancel).await;
    let cancelled_at = watcher.await.unwrap();
    assert_eq!(finished.status, TurnStatus::Interrupted);
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(2),
        "took {:?}",
        cancelled_at.elapsed()
    );
}

#[tokio::test]
async fn ask_user_question_waits_for_the_answer() {
    let questions = json!([{"question": "Which DB?", "header": "DB", "multiSelect": false,
        "options": [{"label": "SQLite", "description": "embedded"}, {"label": "Postgres", "description": "server"}]}]);
    let script = json!({"replies": [
        {"when": {"last_user_contains": "start"}, "content": [
            {"type": "tool_use", "id": "Q", "name": "AskUserQuestion", "input": {"questions": questions}}]},
        {"when": {"last_tool_result_contains": "Postgres"}, "content": [{"type": "text", "text": "using Postgres"}]},
        {"when": {"last_tool_name": "AskUserQuestion"}, "content": [{"type": "text", "text": "no answer"}]}
    ]});
    for (answers, expected) in [
        (Some(json!({"Which DB?": "Postgres"})), "using Postgres"),
        (None, "no answer"),
    ] {
        let ws = tempfile::tempdir().unwrap();
        let (agent, _) = agent(script.clone(), ws.path());
        let agent = agent.with_permissions(
            agentd_policy::permissions::PermissionPolicy::new(Default::default(), &[], &[], &[])
                .unwrap(),
            Arc::new(Answering(answers.clone())),
        );
        let sink = Collected::default();
        let finished = agent
            .run_turn(input("start"), &sink, CancellationToken::new())
            .await;
        assert_eq!(finished.result.as_deref(), Some(expected));
        let events = sink.events.lock().unwrap();
        let asked = events
            .iter()
            .position(|e| matches!(e, Event::QuestionAsked { call_id, .. } if call_id == "Q"))
            .unwrap();
        let answered = events
            .iter()
            .position(|e| matches!(e, Event::QuestionAnswered { .. }))
            .unwrap();
        assert!(asked < answered);
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, Event::PermissionRequested { .. })),
            "no approval needed"
        );
        match &events[answered] {
            Event::QuestionAnswered {
                answers: got, by, ..
            } => {
                assert_eq!(Some(got.clone()).filter(|v| !v.is_null()), answers);
                assert_eq!(
                    by,
                    if answers.is_some() {
                        "user:test"
                    } else {
                        "timeout"
                    }
                );
            }
            _ => unreachable!(),
        }
    }
}
