//! The permission flow through the real runtime: rules, hooks, approvals that a
//! person answers (or nobody does), against the testkit model server over HTTP
//! with a real SQLite store and real bubblewrap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use agentd_engine::{Answer, Decision};
use agentd_protocol::{Event, EventEnvelope, TurnFinished, TurnStatus};
use agentd_server::approvals::Reply;
use agentd_server::config::Config;
use agentd_server::runtime::{Runtime, TurnOptions};
use agentd_store::sqlite::SqliteStore;
use agentd_store::{PendingRecord, SessionRecord, SessionStatus};
use agentd_testkit::ModelServer;
use serde_json::json;
use tempfile::TempDir;

const COMMAND: &str = "echo approved >> out.txt";

struct Setup {
    server: ModelServer,
    runtime: Runtime,
    session: SessionRecord,
    workspace: TempDir,
    _data: TempDir,
}

async fn setup(profile_toml: &str, profile: &str) -> Setup {
    let script = json!({"replies": [
        {"repeat": true, "when": {"last_user_contains": "go"}, "content": [
            {"type": "tool_use", "name": "Bash", "input": {"command": COMMAND}}
        ]},
        {"repeat": true, "content": [{"type": "text", "text": "finished"}]}
    ]});
    setup_with(script, profile_toml, profile).await
}

async fn setup_with(script: serde_json::Value, profile_toml: &str, profile: &str) -> Setup {
    let server = ModelServer::start(serde_json::from_value(script).unwrap())
        .await
        .unwrap();
    let data = TempDir::new().unwrap();
    let workspace = TempDir::new().unwrap();
    let store = Arc::new(
        SqliteStore::open(&data.path().join("agentd.db"))
            .await
            .unwrap(),
    );
    let config = Config::parse(profile_toml).unwrap();
    let runtime = Runtime::new(store, config, data.path().to_path_buf());
    let session = runtime
        .create_session(
            "alice",
            workspace.path(),
            "anthropic:claude-sonnet-4-5",
            profile,
        )
        .await
        .unwrap();
    Setup {
        server,
        runtime,
        session,
        workspace,
        _data: data,
    }
}

impl Setup {
    /// Start a turn in the background; returns its outcome and its events.
    fn start_turn(
        &self,
        text: &str,
    ) -> tokio::task::JoinHandle<(TurnFinished, Vec<EventEnvelope>)> {
        let runtime = self.runtime.clone();
        let session = self.session.clone();
        let url = self.server.url();
        let text = text.to_string();
        tokio::spawn(async move {
            let env = move |key: &str| match key {
                "ANTHROPIC_API_KEY" => Some("test".to_string()),
                "ANTHROPIC_BASE_URL" => Some(url.clone()),
                _ => None,
            };
            let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
            let finished = runtime
                .run_turn(
                    &session,
                    &agentd_server::registry::TurnKind::from_text(text.clone()),
                    TurnOptions::default(),
                    &env,
                    Some(sender),
                    tokio_util::sync::CancellationToken::new(),
                )
                .await
                .unwrap()
                .unwrap();
            let mut events = Vec::new();
            while let Ok(event) = receiver.try_recv() {
                events.push(event);
            }
            (finished, events)
        })
    }

    async fn next_pending(&self) -> PendingRecord {
        for _ in 0..200 {
            let open = self
                .runtime
                .store
                .open_pending(Some(&self.session.id))
                .await
                .unwrap();
            if let Some(first) = open.into_iter().next() {
                return first;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no permission request appeared");
    }

    fn out_txt(&self) -> Option<String> {
        std::fs::read_to_string(self.workspace.path().join("out.txt")).ok()
    }
}

fn resolved(events: &[EventEnvelope]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::PermissionResolved { decision, by, .. } => {
                Some((decision.to_string(), by.to_string()))
            }
            _ => None,
        })
        .collect()
}

fn tool_errors(events: &[EventEnvelope]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolFinished {
                is_error: true,
                output,
                ..
            } => Some(output.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_allowed_request_runs_the_call() {
    let s = setup("", "default").await;
    let turn = s.start_turn("go");
    let pending = s.next_pending().await;
    assert_eq!(pending.kind, "permission");
    assert_eq!(pending.data["tool"], "Bash");
    assert_eq!(pending.data["input"]["command"], COMMAND);
    // The request is stored a moment before the session says it waits.
    let mut status = None;
    for _ in 0..500 {
        let session = s.runtime.store.get_session(&s.session.id).await.unwrap();
        status = session.map(|session| session.status);
        if status == Some(SessionStatus::Waiting) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(status, Some(SessionStatus::Waiting));
    assert!(s.out_txt().is_none(), "nothing runs before the answer");

    assert!(s.runtime.approvals.deliver(
        &pending.id,
        Reply::Permission(Answer::new(Decision::Allow, "user"))
    ));
    let (finished, events) = turn.await.unwrap();
    assert_eq!(finished.status, TurnStatus::Completed);
    assert_eq!(s.out_txt().as_deref(), Some("approved\n"));
    assert_eq!(
        resolved(&events),
        [("allow".to_string(), "user".to_string())]
    );
    let types: Vec<&str> = events.iter().map(|e| e.event.type_name()).collect();
    let requested = types
        .iter()
        .position(|t| *t == "permission.requested")
        .unwrap();
    let started = types.iter().position(|t| *t == "tool.started").unwrap();
    let resolved_at = types
        .iter()
        .position(|t| *t == "permission.resolved")
        .unwrap();
    let ran = types.iter().position(|t| *t == "tool.finished").unwrap();
    assert!(
        started < requested && requested < resolved_at && resolved_at < ran,
        "{types:?}"
    );
    let stored = s
        .runtime
        .store
        .get_pending(&pending.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.resolution.unwrap()["decision"], "allow");
}

#[tokio::test]
async fn a_denied_request_is_reported_to_the_model_and_nothing_runs() {
    let s = setup("", "default").await;
    let turn = s.start_turn("go");
    let pending = s.next_pending().await;
    s.runtime.approvals.deliver(
        &pending.id,
        Reply::Permission(Answer::new(Decision::Deny, "user")),
    );
    let (finished, events) = turn.await.unwrap();
    assert_eq!(finished.status, TurnStatus::Completed);
    assert!(s.out_txt().is_none());
    let errors = tool_errors(&events);
    assert!(errors[0].contains("denied"), "{errors:?}");
    let last = s.server.requests_to("/v1/messages").pop().unwrap();
    assert!(
        last.body.to_string().contains("denied"),
        "the model is told"
    );
}

#[tokio::test]
async fn allow_for_the_session_is_remembered_across_turns() {
    let s = setup("", "default").await;
    let turn = s.start_turn("go");
    let pending = s.next_pending().await;
    s.runtime.approvals.deliver(
        &pending.id,
        Reply::Permission(Answer::new(Decision::AllowSession, "user")),
    );
    turn.await.unwrap();
    assert!(
        !s.runtime
            .store
            .session_rules(&s.session.id)
            .await
            .unwrap()
            .is_empty()
    );

    let (finished, events) = s.start_turn("go again").await.unwrap();
    assert_eq!(finished.status, TurnStatus::Completed);
    assert!(resolved(&events).is_empty(), "not asked the second time");
    assert_eq!(s.out_txt().as_deref(), Some("approved\napproved\n"));
}

#[tokio::test]
async fn nobody_answering_applies_on_no_answer() {
    let s = setup("[profiles.default]\napproval_timeout_s = 1\n", "default").await;
    let (finished, events) = s.start_turn("go").await.unwrap();
    assert_eq!(finished.status, TurnStatus::Completed);
    assert_eq!(
        resolved(&events),
        [("deny".to_string(), "timeout".to_string())]
    );
    assert!(s.out_txt().is_none());

    let s = setup(
        "[profiles.default]\napproval_timeout_s = 1\non_no_answer = \"allow\"\n",
        "default",
    )
    .await;
    let (_, events) = s.start_turn("go").await.unwrap();
    assert_eq!(
        resolved(&events),
        [("allow".to_string(), "timeout".to_string())]
    );
    assert_eq!(s.out_txt().as_deref(), Some("approved\n"));
}

#[tokio::test]
async fn rules_decide_without_asking() {
    let allowed = setup(
        "[profiles.default]\napproval_timeout_s = 5\nallow = [\"Bash(echo approved >> out.txt)\"]\n",
        "default",
    )
    .await;
    let (_, events) = allowed.start_turn("go").await.unwrap();
    assert!(resolved(&events).is_empty());
    assert_eq!(allowed.out_txt().as_deref(), Some("approved\n"));

    let denied = setup(
        "[profiles.default]\nmode = \"bypass\"\ndeny = [\"Bash(echo *)\"]\n",
        "default",
    )
    .await;
    let (_, events) = denied.start_turn("go").await.unwrap();
    assert!(denied.out_txt().is_none(), "deny beats bypass");
    assert!(tool_errors(&events)[0].contains("Bash(echo *)"));
}

#[tokio::test]
async fn the_read_only_preset_refuses_commands() {
    let s = setup("", "read_only").await;
    let (finished, events) = s.start_turn("go").await.unwrap();
    assert_eq!(finished.status, TurnStatus::Completed);
    assert!(resolved(&events).is_empty(), "refused, not asked");
    assert!(s.out_txt().is_none());
    assert_eq!(tool_errors(&events).len(), 1);
}

#[tokio::test]
async fn pre_tool_use_hooks_deny_and_rewrite() {
    let deny = setup(
        "[profiles.default]\nmode = \"bypass\"\n[[profiles.default.hooks]]\nevent = \"PreToolUse\"\nmatcher = \"Bash\"\ncommand = \"echo no commands today >&2; exit 2\"\n",
        "default",
    )
    .await;
    let (_, events) = deny.start_turn("go").await.unwrap();
    assert!(deny.out_txt().is_none());
    assert!(tool_errors(&events)[0].contains("no commands today"));

    let rewrite = setup(
        "[profiles.default]\nmode = \"bypass\"\n[[profiles.default.hooks]]\nevent = \"PreToolUse\"\ncommand = '''echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"updatedInput\":{\"command\":\"echo rewritten > out.txt\"}}}' '''\n",
        "default",
    )
    .await;
    rewrite.start_turn("go").await.unwrap();
    assert_eq!(rewrite.out_txt().as_deref(), Some("rewritten\n"));
}

#[tokio::test]
async fn a_restart_while_waiting_ends_the_request_and_the_session_goes_on() {
    let s = setup("", "default").await;
    let turn = s.start_turn("go");
    let pending = s.next_pending().await;
    // The process dies while the turn waits: nothing gets to finish it.
    turn.abort();
    let _ = turn.await;

    let restarted = Runtime::new(
        s.runtime.store.clone(),
        s.runtime.config.clone(),
        s.runtime.data_dir.clone(),
    );
    assert_eq!(restarted.recover(None).await.unwrap(), 1);
    let stored = restarted
        .store
        .get_pending(&pending.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.resolution.unwrap(),
        json!({"decision": "deny", "by": "restart"})
    );
    let events = restarted
        .store
        .events_after(&s.session.id, 0, 1000)
        .await
        .unwrap();
    let tail: Vec<&str> = events
        .iter()
        .rev()
        .take(2)
        .map(|e| e.event.type_name())
        .collect();
    assert_eq!(tail, ["turn.finished", "permission.resolved"]);
    assert!(s.out_txt().is_none());
    let session = restarted
        .store
        .get_session(&s.session.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(session.status, SessionStatus::Idle);

    // The next message works; the model hears the call never ran.
    let (finished, _) = s.start_turn("what happened?").await.unwrap();
    assert_eq!(finished.status, TurnStatus::Completed);
    let last = s.server.requests_to("/v1/messages").pop().unwrap();
    assert!(
        last.body.to_string().contains("did not run"),
        "{}",
        last.body
    );
}

#[tokio::test]
async fn a_restart_while_a_question_waits_records_it_unanswered() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "ask"}, "content": [
            {"type": "tool_use", "name": "AskUserQuestion", "input": {"questions": [
                {"question": "Which one?", "header": "Pick", "multiSelect": false,
                 "options": [{"label": "A", "description": "a"}, {"label": "B", "description": "b"}]}]}}
        ]},
        {"repeat": true, "content": [{"type": "text", "text": "fine"}]}
    ]});
    let s = setup_with(script, "", "default").await;
    let turn = s.start_turn("ask me");
    let pending = s.next_pending().await;
    assert_eq!(pending.kind, "question");
    turn.abort();
    let _ = turn.await;

    let restarted = Runtime::new(
        s.runtime.store.clone(),
        s.runtime.config.clone(),
        s.runtime.data_dir.clone(),
    );
    assert_eq!(restarted.recover(None).await.unwrap(), 1);
    let stored = restarted
        .store
        .get_pending(&pending.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.resolution.unwrap(),
        json!({"answers": null, "by": "restart"})
    );
    let events = restarted
        .store
        .events_after(&s.session.id, 0, 1000)
        .await
        .unwrap();
    let answered = events
        .iter()
        .find_map(|e| match &e.event {
            Event::QuestionAnswered {
                request_id,
                answers,
                by,
            } if *request_id == pending.id => Some((answers.clone(), by.to_string())),
            _ => None,
        })
        .expect("question.answered after the restart");
    assert_eq!(answered, (serde_json::Value::Null, "restart".to_string()));
    let (finished, _) = s.start_turn("go on").await.unwrap();
    assert_eq!(finished.status, TurnStatus::Completed);
}

#[tokio::test]
async fn a_read_deny_rule_also_hides_the_file_from_searches() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "find"}, "content": [
            {"type": "tool_use", "name": "Grep",
             "input": {"pattern": "TOKEN", "path": ".", "output_mode": "content"}},
            {"type": "tool_use", "name": "Glob", "input": {"pattern": "**/*"}},
            {"type": "tool_use", "name": "Read", "input": {"file_path": "./.env"}}
        ]},
        {"repeat": true, "content": [{"type": "text", "text": "finished"}]}
    ]});
    let s = setup_with(
        script,
        "[profiles.default]\ndeny = [\"Read(.env)\"]\n",
        "default",
    )
    .await;
    std::fs::write(s.workspace.path().join(".env"), "TOKEN=hunter2\n").unwrap();
    std::fs::write(s.workspace.path().join("notes.txt"), "TOKEN is elsewhere\n").unwrap();
    let (_, events) = s.start_turn("find the token").await.unwrap();
    // Read-only calls run in parallel: match results to tools by call id.
    let output_of = |tool: &str| -> String {
        let call = events
            .iter()
            .find_map(|e| match &e.event {
                Event::ToolStarted { call_id, name, .. } if name == tool => Some(call_id.clone()),
                _ => None,
            })
            .unwrap();
        events
            .iter()
            .find_map(|e| match &e.event {
                Event::ToolFinished {
                    call_id, output, ..
                } if *call_id == call => Some(output.clone()),
                _ => None,
            })
            .unwrap()
    };
    let (grep, glob, read) = (output_of("Grep"), output_of("Glob"), output_of("Read"));
    assert!(grep.contains("notes.txt"), "Grep still searches: {grep}");
    for output in [&grep, &glob, &read] {
        assert!(!output.contains("hunter2"), "{output}");
    }
    assert!(!glob.contains(".env"), "Glob hides it: {glob}");
    assert!(read.contains("Read(.env)"), "Read is denied: {read}");
}
