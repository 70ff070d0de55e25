//! A `claude-code` model with `backend = "<model>"`: the real `claude` CLI
//! runs the turn against an OpenAI-format model, through the loopback
//! `/v1/messages` agentd starts itself — for `agentd run` (no server
//! listening) and `agentd serve` alike. No Anthropic key anywhere.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::claude_code_engine::{bash, claude_binary, side};
use crate::run_harness::{self, Wire};
use crate::serve_harness;

use agentd_protocol::{TurnFinished, TurnStatus};
use agentd_testkit::RecordedRequest;
use serde_json::{Value, json};

fn toml() -> String {
    toml_with("")
}

/// The backend config; `profile` adds lines to the default profile.
fn toml_with(profile: &str) -> String {
    format!(
        "[models.default]\nprovider = \"claude-code\"\nbackend = \"fast\"\ncommand = \"{}\"\n\
         [models.fast]\nprovider = \"openai\"\nmodel = \"gpt-testkit\"\nbase_url = \"{{URL}}/v1\"\n\
         price = {{ input_per_mtok = 1000.0, output_per_mtok = 2000.0 }}\n\
         [profiles.default]\nmode = \"bypass\"\n{profile}",
        claude_binary().display()
    )
}

/// What `usage` costs at the backend's price.
fn priced(usage: &agentd_protocol::Usage) -> f64 {
    (usage.input_tokens as f64 * 1000.0
        + usage.output_tokens as f64 * 2000.0
        + usage.cache_read_tokens as f64 * 100.0
        + usage.cache_write_tokens as f64 * 1250.0)
        / 1e6
}

/// The run's `turn.finished`, which must have `status`.
fn finished_as(run: &run_harness::Run, status: TurnStatus) -> &TurnFinished {
    let finished = run.finished();
    assert_eq!(finished.status, status, "{finished:?}\n{}", run.stderr);
    finished
}

/// The CLI's side requests (titles, topic checks), each costing little.
fn cheap_side() -> Value {
    let mut side = side();
    side["usage"] = json!({"input_tokens": 1, "output_tokens": 1});
    side
}

fn script(probe: &str, file: &str) -> Value {
    json!({"replies": [
        {"when": {"last_user_contains": probe}, "content": [
            {"type": "text", "text": "Writing."}, bash(&format!("echo via-backend > {file}"))
        ]},
        {"when": {"last_tool_result_contains": ""}, "content": [{"type": "text", "text": "BACKEND-DONE"}]},
        side()
    ]})
}

/// The CLI's calls reached the model in OpenAI's format, with agentd's tool
/// and its result; none in Anthropic's.
fn assert_openai_round_trip(requests: &[RecordedRequest], all: &[RecordedRequest]) {
    let with_result = requests
        .iter()
        .find(|r| {
            r.body["messages"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
        })
        .unwrap_or_else(|| panic!("no request with a tool result: {requests:#?}"));
    assert_eq!(with_result.body["model"], "gpt-testkit");
    let messages = with_result.body["messages"].as_array().unwrap();
    let call = messages
        .iter()
        .find(|m| m["tool_calls"].is_array())
        .unwrap();
    assert_eq!(
        call["tool_calls"][0]["function"]["name"],
        "mcp__agentd__Bash"
    );
    assert!(
        all.iter().all(|r| r.path != "/v1/messages"),
        "a request went in Anthropic's format to the model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentd_run_serves_the_cli_an_openai_model_itself() {
    let h = run_harness::Harness::new(Wire::OpenAi, script("RUN-PROBE", "run.txt"))
        .await
        .with_config(&toml());
    let run = h.run("RUN-PROBE", &[]).await;
    let finished = run.finished();
    assert_eq!(
        finished.result.as_deref(),
        Some("BACKEND-DONE"),
        "{:?}\n{}",
        finished,
        run.stderr
    );
    // Priced by the backend's price, not the CLI's table for a name it
    // does not know.
    let usage = &finished.usage;
    assert!(
        usage.input_tokens > 0 && usage.output_tokens > 0,
        "{usage:?}"
    );
    let expected = priced(usage);
    assert!(
        (finished.cost_usd - expected).abs() < 1e-9,
        "{} != {expected} ({usage:?})",
        finished.cost_usd
    );
    let written = std::fs::read_to_string(h.ws().join("run.txt")).unwrap();
    assert_eq!(written, "via-backend\n");
    let all = h.server.requests();
    assert_openai_round_trip(&h.server.requests_to("/v1/chat/completions"), &all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_claude_code_session_runs_on_its_backend() {
    let toml = format!("[server]\nauth = \"none\"\n{}", toml());
    let h = serve_harness::Harness::new(script("SERVE-PROBE", "serve.txt"), &toml).await;
    let server = h.start().await;
    let session = server.session().await;
    let mut stream = server.events(&session, None).await;
    server.message(&session, "SERVE-PROBE").await;
    let events = tokio::time::timeout(serve_harness::WAIT * 2, stream.until_finished(1))
        .await
        .unwrap_or_else(|_| panic!("no turn.finished; log:\n{}", server.log()));
    let finished = events.last().unwrap();
    assert_eq!(
        finished.data["status"],
        "completed",
        "{events:#?}\n{}",
        server.log()
    );
    assert_eq!(finished.data["result"], "BACKEND-DONE");
    let workspace = h.data().join("workspaces").join(&session);
    let written = std::fs::read_to_string(workspace.join("serve.txt")).unwrap();
    assert_eq!(written, "via-backend\n");
    let all = h.model.requests();
    assert_openai_round_trip(&h.model.requests_to("/v1/chat/completions"), &all);
}

/// The endpoint meters each of the CLI's calls: once the turn's budget is
/// spent, the next call is refused before it reaches the model, and the
/// turn ends as `budget_exceeded` with what the calls cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_on_a_backend_stops_at_its_budget() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "BUDGET-PROBE"}, "content": [
            {"type": "text", "text": "Writing."}, bash("echo spent > budget.txt")
        ], "usage": {"input_tokens": 20, "output_tokens": 20}},
        {"when": {"last_tool_result_contains": ""}, "content": [{"type": "text", "text": "OVER-BUDGET"}]},
        cheap_side()
    ]});
    let h = run_harness::Harness::new(Wire::OpenAi, script)
        .await
        .with_config(&toml());
    // The first call costs $0.06: over the budget once it is answered.
    let run = h.run("BUDGET-PROBE", &["--max-budget-usd", "0.05"]).await;
    let finished = finished_as(&run, TurnStatus::BudgetExceeded);
    assert_eq!(
        finished.error.as_ref().map(|e| e.code.to_string()),
        Some("budget_exceeded".to_string())
    );
    assert_ne!(finished.result.as_deref(), Some("OVER-BUDGET"));
    assert!(finished.cost_usd >= 0.06, "{finished:?}");
    assert!((finished.cost_usd - priced(&finished.usage)).abs() < 1e-9);
    // The first call's tool ran; the call after it never reached the model.
    assert!(h.ws().join("budget.txt").is_file());
    let with_result = h
        .server
        .requests_to("/v1/chat/completions")
        .into_iter()
        .filter(|r| {
            r.body["messages"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
        })
        .count();
    assert_eq!(with_result, 0, "a call over the budget reached the model");
}

/// A turn that times out while the model is still answering records what
/// its calls cost, the unfinished one included (its input, and the output
/// that had arrived): the CLI itself reports nothing then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_turn_on_a_backend_records_what_its_calls_cost() {
    let slow = "slowly ".repeat(200);
    let script = json!({"replies": [
        {"when": {"last_user_contains": "TIMEOUT-PROBE"}, "content": [
            {"type": "text", "text": "Writing."}, bash("echo first > first.txt")
        ], "usage": {"input_tokens": 20, "output_tokens": 20}},
        {"when": {"last_tool_result_contains": ""}, "content": [{"type": "text", "text": slow}],
         "delay_ms": 1000},
        cheap_side()
    ]});
    let h = run_harness::Harness::new(Wire::OpenAi, script)
        .await
        .with_config(&toml_with("turn_timeout_s = 20\n"));
    let run = h.run("TIMEOUT-PROBE", &[]).await;
    let finished = finished_as(&run, TurnStatus::Timeout);
    assert!(h.ws().join("first.txt").is_file());
    // The first call ($0.06), and the slow one's input on top.
    assert!(
        finished.cost_usd > 0.06 && finished.usage.input_tokens > 20,
        "{finished:?}"
    );
    assert!((finished.cost_usd - priced(&finished.usage)).abs() < 1e-9);
}
