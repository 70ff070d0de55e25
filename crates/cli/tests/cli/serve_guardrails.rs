//! Long sessions under control over the real HTTP API: automatic and manual
//! compaction (and what a later turn, or a restarted server, sends the
//! model), and each guardrail ending a turn with its own status, recorded.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use reqwest::StatusCode;
use serde_json::{Value, json};
use serve_harness::{Harness, SseEvent};

const BASE: &str = "[server]\nauth = \"none\"\n[models.default]\nprovider = \"anthropic\"\n\
    model = \"claude-sonnet-4-5\"\nbase_url = \"{URL}\"\n";

fn bash(command: &str) -> Value {
    json!({"type": "tool_use", "name": "Bash", "input": {"command": command}})
}

fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn finished(events: &[SseEvent]) -> Vec<&SseEvent> {
    events
        .iter()
        .filter(|e| e.event == "turn.finished")
        .collect()
}

fn request_size(request: &agentd_testkit::RecordedRequest) -> usize {
    request.body["messages"].to_string().len()
}

fn first_text(request: &agentd_testkit::RecordedRequest) -> String {
    request.body["messages"][0]["content"].to_string()
}

#[tokio::test]
async fn a_long_session_compacts_and_later_turns_start_from_the_summary() {
    let script = json!({"replies": [
        {"repeat": true, "when": {"any_contains": "Summarise the conversation above"},
         "content": [text("SESSION-SUMMARY: counted to ten thousand.")]},
        {"when": {"last_user_contains": "count"}, "content": [bash("seq 1 2500; echo MARK-A")]},
        {"when": {"last_tool_result_contains": "MARK-A"}, "content": [bash("seq 2501 5000; echo MARK-B")]},
        {"when": {"last_tool_result_contains": "MARK-B"}, "content": [bash("seq 5001 7500; echo MARK-C")]},
        {"when": {"last_tool_result_contains": "MARK-C"}, "content": [bash("seq 7501 10000; echo MARK-D")]},
        {"when": {"last_tool_result_contains": "MARK-D"}, "content": [text("counted")]},
        {"repeat": true, "content": [text("ok")]}
    ]});
    // The tool specs (about 3 900 tokens) count against the window too: in
    // a smaller one compaction comes so early that it saves nothing.
    let toml = format!("{BASE}context_window = 12500\n[profiles.default]\nmode = \"bypass\"\n");
    let h = Harness::new(script, &toml).await;
    let server = h.start().await;
    let session = server.session().await;
    for message in ["count to ten thousand", "what now?"] {
        server.message(&session, message).await;
        server.wait_idle(&session).await;
    }
    let events = server.all_events(&session).await;
    assert!(
        finished(&events)
            .iter()
            .all(|e| e.data["status"] == "completed")
    );
    let compactions: Vec<&SseEvent> = events.iter().filter(|e| e.event == "compaction").collect();
    assert!(
        !compactions.is_empty(),
        "{:?}",
        events.iter().map(|e| &e.event).collect::<Vec<_>>()
    );
    let compaction = &compactions[0].data;
    assert_eq!(compaction["trigger"], "auto");
    assert!(compaction["tokens_after"].as_u64() < compaction["tokens_before"].as_u64());

    let requests: Vec<_> = h
        .model_requests()
        .into_iter()
        .filter(|r| !first_text(r).contains("Summarise the conversation above"))
        .collect();
    let after = requests
        .iter()
        .position(|r| first_text(r).contains("SESSION-SUMMARY"))
        .expect("a request starts from the summary");
    assert!(request_size(&requests[after]) < request_size(&requests[after - 1]));
    // The next turn, built from the store, also starts from the summary.
    let last = requests.last().unwrap();
    assert!(
        first_text(last).contains("SESSION-SUMMARY"),
        "{}",
        first_text(last)
    );
    assert!(
        !last.body["messages"]
            .to_string()
            .contains("\\n1\\n2\\n3\\n")
    );
    assert!(last.body["messages"].to_string().contains("what now?"));
    // The transcript keeps everything.
    let (_, transcript) = server
        .get(&format!("/v1/sessions/{session}/messages"))
        .await;
    let transcript = transcript.to_string();
    assert!(transcript.contains("MARK-A") && transcript.contains("MARK-D"));

    // A restarted server sends the same compacted context.
    server.terminate().await;
    let server = h.start().await;
    server.message(&session, "and now?").await;
    server.wait_idle(&session).await;
    let last = h.model_requests().pop().unwrap();
    assert!(first_text(&last).contains("SESSION-SUMMARY"));

    // A manual compaction is a turn of its own.
    let (status, accepted) = server
        .post(&format!("/v1/sessions/{session}/compact"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    server.wait_idle(&session).await;
    let events = server.all_events(&session).await;
    let manual = events
        .iter()
        .rev()
        .find(|e| e.event == "compaction")
        .unwrap();
    assert_eq!(manual.data["trigger"], "manual");
    let done = finished(&events).pop().unwrap().data.clone();
    assert_eq!(done["turn_id"], accepted["turn_id"]);
    assert!(
        done["result"].as_str().unwrap().starts_with("Compacted"),
        "{done}"
    );
    // So is a message that says only `/compact` (as typed, spaces and all).
    let compactions_before = events.iter().filter(|e| e.event == "compaction").count();
    let turn_id = server.message(&session, "  /compact\n").await;
    server.wait_idle(&session).await;
    let events = server.all_events(&session).await;
    let typed = finished(&events).pop().unwrap().data.clone();
    assert_eq!(typed["turn_id"], turn_id);
    assert!(
        typed["result"].as_str().unwrap().starts_with("Compacted"),
        "{typed}"
    );
    let compactions = events.iter().filter(|e| e.event == "compaction").count();
    assert_eq!(compactions, compactions_before + 1);
    let (_, transcript) = server
        .get(&format!("/v1/sessions/{session}/messages"))
        .await;
    assert!(
        !transcript.to_string().contains("/compact"),
        "not part of the transcript"
    );
}

async fn one_turn(h: &Harness, message: &str) -> (Value, Value) {
    let server = h.start().await;
    let session = server.session().await;
    server.message(&session, message).await;
    server.wait_idle(&session).await;
    let events = server.all_events(&session).await;
    let done = finished(&events).pop().unwrap().data.clone();
    let (_, record) = server.get(&format!("/v1/sessions/{session}")).await;
    (done, record)
}

#[tokio::test]
async fn each_guardrail_ends_the_turn_with_its_own_status() {
    // max_turns.
    let h = Harness::new(
        json!({"replies": [{"repeat": true, "content": [bash("echo again")]}]}),
        &format!(
            "{BASE}[profiles.default]\nmode = \"bypass\"\nmax_turns = 2\nmax_identical_calls = 0\n"
        ),
    )
    .await;
    let (done, record) = one_turn(&h, "loop").await;
    assert_eq!(done["status"], "max_turns");
    assert_eq!(done["num_model_calls"], 2);
    assert_eq!(record["totals"]["turns"], 1);

    // The circuit breaker: the same call over and over.
    let h = Harness::new(
        json!({"replies": [{"repeat": true, "content": [bash("echo same")]}]}),
        &format!("{BASE}[profiles.default]\nmode = \"bypass\"\nmax_identical_calls = 3\n"),
    )
    .await;
    let (done, _) = one_turn(&h, "loop").await;
    assert_eq!(done["status"], "circuit_breaker");
    assert_eq!(done["error"]["code"], "repeated_call");
    assert!(
        done["error"]["message"]
            .as_str()
            .unwrap()
            .contains("3 times")
    );

    // The circuit breaker: failing calls in a row.
    let h = Harness::new(
        json!({"replies": [{"repeat": true, "content": [bash("exit 3")]}]}),
        &format!(
            "{BASE}[profiles.default]\nmode = \"bypass\"\nmax_failed_calls = 2\nmax_identical_calls = 0\n"
        ),
    )
    .await;
    let (done, _) = one_turn(&h, "fail").await;
    assert_eq!(done["status"], "circuit_breaker");
    assert_eq!(done["error"]["code"], "too_many_failures");

    // The whole-turn timeout.
    let h = Harness::new(
        json!({"replies": [{"repeat": true, "content": [bash("sleep 30")]}]}),
        &format!("{BASE}[profiles.default]\nmode = \"bypass\"\nturn_timeout_s = 1\n"),
    )
    .await;
    let (done, _) = one_turn(&h, "wait").await;
    assert_eq!(done["status"], "timeout");

    // Budgets: $1 per call (100 input tokens at $10 000 per million).
    let priced = "input_per_mtok = 10000.0\noutput_per_mtok = 0.0\n";
    let h = Harness::new(
        json!({"replies": [
            {"repeat": true, "usage": {"input_tokens": 100}, "content": [bash("echo spend")]}]}),
        &format!(
            "{BASE}[models.default.price]\n{priced}[profiles.default]\nmode = \"bypass\"\n\
             max_budget_usd = 2.5\nmax_session_budget_usd = 4.0\nmax_identical_calls = 0\n"
        ),
    )
    .await;
    let server = h.start().await;
    let session = server.session().await;
    server.message(&session, "spend").await;
    server.wait_idle(&session).await;
    server.message(&session, "spend more").await;
    server.wait_idle(&session).await;
    let calls_before = h.model_requests().len();
    server.message(&session, "and more").await;
    server.wait_idle(&session).await;
    let events = server.all_events(&session).await;
    let turns = finished(&events);
    assert_eq!(turns[0].data["status"], "budget_exceeded");
    assert_eq!(turns[0].data["error"]["code"], "budget_exceeded");
    assert_eq!(turns[0].data["cost_usd"], 3.0);
    assert_eq!(turns[1].data["error"]["code"], "session_budget_exceeded");
    assert_eq!(turns[2].data["error"]["code"], "session_budget_exceeded");
    assert_eq!(
        h.model_requests().len(),
        calls_before,
        "a spent session calls no model"
    );
    let (_, record) = server.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(record["totals"]["cost_usd"], 4.0);
    assert_eq!(record["totals"]["turns"], 3);
}

#[tokio::test]
async fn the_agents_status_line_reaches_turn_finished() {
    let h = Harness::new(
        json!({"replies": [{"content": [text("Did half of it.\n\nstatus: partial")]}]}),
        &format!("{BASE}[profiles.default]\nmode = \"bypass\"\n"),
    )
    .await;
    let (done, _) = one_turn(&h, "do it").await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["agent_status"], "partial");
}
