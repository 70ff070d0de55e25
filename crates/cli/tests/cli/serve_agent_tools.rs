//! A turn that starts two subagents in parallel and asks the user a question,
//! over the real HTTP API and SSE, against the testkit model server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use reqwest::StatusCode;
use serde_json::{Value, json};
use serve_harness::{Harness, SseEvent, assert_gapless};

fn task(id: &str, prompt: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "Task", "input": {
        "description": "subtask", "prompt": prompt, "subagent_type": "general-purpose"}})
}

fn script() -> Value {
    json!({"replies": [
        {"when": {"last_user_contains": "prepare the release"}, "content": [
            {"type": "text", "text": "Two subtasks first."},
            task("task_a", "ALPHA: check the version"), task("task_b", "BETA: list open work")]},
        {"when": {"last_user_contains": "ALPHA"}, "delay_ms": 30, "content": [
            {"type": "tool_use", "id": "alpha_bash", "name": "Bash", "input": {"command": "echo alpha-out"}}]},
        {"when": {"last_tool_result_contains": "alpha-out"}, "content": [
            {"type": "text", "text": "ALPHA-REPORT: version 1.2.3"}]},
        {"when": {"last_user_contains": "BETA"}, "content": [{"type": "text", "text": "BETA-REPORT: two items"}]},
        {"when": {"last_tool_name": "Task"}, "content": [
            {"type": "tool_use", "id": "todo", "name": "TodoWrite", "input": {"todos": [
                {"content": "Pick a database", "status": "in_progress", "activeForm": "Picking a database"},
                {"content": "Tag the release", "status": "pending", "activeForm": "Tagging the release"}]}},
            {"type": "tool_use", "id": "ask", "name": "AskUserQuestion", "input": {"questions": [
                {"question": "Which database should the release default to?", "header": "Database",
                 "multiSelect": false, "options": [
                    {"label": "SQLite", "description": "embedded"},
                    {"label": "Postgres", "description": "a server"}]}]}}]},
        {"when": {"last_tool_result_contains": "User has answered"}, "content": [
            {"type": "text", "text": "Releasing with the chosen database."}]}
    ]})
}

fn position(events: &[SseEvent], pred: impl Fn(&SseEvent) -> bool) -> usize {
    events.iter().position(pred).unwrap_or_else(|| {
        panic!(
            "event not found in {:#?}",
            events.iter().map(|e| &e.event).collect::<Vec<_>>()
        )
    })
}

fn call(event: &SseEvent, kind: &str, id: &str) -> bool {
    event.event == kind && event.data["call_id"] == id
}

#[tokio::test]
async fn two_parallel_subagents_and_a_question_over_http() {
    let h = Harness::open(script()).await;
    let server = h.start().await;
    let session = server.session().await;
    let mut stream = server.events(&session, None).await;
    server.message(&session, "prepare the release").await;

    // Wait for the question, then check it is pending.
    let asked = loop {
        let event = stream
            .next()
            .await
            .expect("stream ended before the question");
        if event.event == "question.asked" {
            break event;
        }
    };
    let request_id = asked.data["request_id"].as_str().unwrap().to_string();
    assert_eq!(asked.data["call_id"], "ask");
    assert_eq!(asked.data["questions"][0]["header"], "Database");
    let (_, session_json) = server.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(session_json["status"], "waiting");
    let (_, pending) = server.get(&format!("/v1/sessions/{session}/pending")).await;
    assert_eq!(pending["pending"][0]["kind"], "question");
    assert_eq!(pending["pending"][0]["request_id"], request_id.as_str());

    // Bad answers are refused without losing the question.
    let path = format!("/v1/sessions/{session}/questions/{request_id}");
    let (status, body) = server
        .post(&path, json!({"answers": {"Something else?": "x"}}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, _) = server.post(&path, json!({"answers": "Postgres"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = server
        .post(
            &format!("/v1/sessions/{session}/questions/nope"),
            json!({"answers": {}}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let answers = json!({"Which database should the release default to?": "Postgres"});
    let (status, body) = server.post(&path, json!({"answers": answers})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = server.post(&path, json!({"answers": answers})).await;
    assert_eq!(status, StatusCode::CONFLICT, "answered once only");

    let mut events = vec![asked];
    events.extend(stream.until_finished(1).await);
    let all = server.all_events(&session).await;
    assert_gapless(&all);
    let events = all;
    let finished = events.last().unwrap();
    assert_eq!(finished.event, "turn.finished");
    assert_eq!(finished.data["status"], "completed", "{:?}", finished.data);
    assert_eq!(
        finished.data["result"],
        "Releasing with the chosen database."
    );

    // Both subagents started before either finished: they ran in parallel.
    let (a_start, b_start) = (
        position(&events, |e| call(e, "tool.started", "task_a")),
        position(&events, |e| call(e, "tool.started", "task_b")),
    );
    let (a_end, b_end) = (
        position(&events, |e| call(e, "tool.finished", "task_a")),
        position(&events, |e| call(e, "tool.finished", "task_b")),
    );
    assert!(a_start.max(b_start) < a_end.min(b_end));
    assert!(
        events[a_end].data["output"]
            .as_str()
            .unwrap()
            .contains("ALPHA-REPORT")
    );
    assert_eq!(events[b_end].data["output"], "BETA-REPORT: two items");
    // The subagent's Bash call is marked with its Task call and falls inside it.
    let bash = position(&events, |e| call(e, "tool.started", "alpha_bash"));
    assert_eq!(events[bash].data["parent_call_id"], "task_a");
    assert!(a_start < bash && bash < a_end);
    let bash_end = position(&events, |e| call(e, "tool.finished", "alpha_bash"));
    assert!(
        events[bash_end].data["output"]
            .as_str()
            .unwrap()
            .contains("alpha-out")
    );
    for e in &events {
        if e.event == "message.completed" && e.data["message"].to_string().contains("BETA-REPORT") {
            assert_eq!(e.data["parent_call_id"], "task_b");
        }
        if e.event == "tool.started" && e.data["name"] == "Task" {
            assert!(e.data.get("parent_call_id").is_none(), "{:?}", e.data);
        }
    }
    // Then the plan, then the question and its answer, then the end.
    let todo = position(&events, |e| e.event == "todo.updated");
    assert_eq!(
        events[todo].data["todos"][0]["activeForm"],
        "Picking a database"
    );
    let asked = position(&events, |e| e.event == "question.asked");
    let answered = position(&events, |e| e.event == "question.answered");
    assert!(a_end.max(b_end) < todo && todo < asked && asked < answered);
    assert_eq!(events[answered].data["answers"], answers);
    assert_eq!(events[answered].data["by"], "user:local");
    assert!(answered < position(&events, |e| call(e, "tool.finished", "ask")));

    // The answer reached the model, and the subagents' work stayed out of
    // the main context (only their reports came back).
    let requests = h.model_requests();
    let last = requests.last().unwrap().body.to_string();
    assert!(last.contains("User has answered your questions"), "{last}");
    assert!(last.contains("Postgres"));
    assert!(last.contains("ALPHA-REPORT") && !last.contains("alpha-out"));
    let (_, transcript) = server
        .get(&format!("/v1/sessions/{session}/messages"))
        .await;
    let transcript = transcript.to_string();
    assert!(transcript.contains("BETA-REPORT") && !transcript.contains("echo alpha-out"));
    let (_, session_json) = server.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(session_json["status"], "idle");
}
