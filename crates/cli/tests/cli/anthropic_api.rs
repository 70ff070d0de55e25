//! `POST /v1/messages` on a real `agentd serve`, used by real Anthropic
//! clients against a testkit model that speaks the *OpenAI* format: the
//! official `anthropic` Python SDK (pinned in `scripts/install-deps.sh`, in
//! `.tools/venv`) and the real `claude` CLI with `ANTHROPIC_BASE_URL` set
//! to agentd.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::claude_code_engine::{claude_binary, side};
use crate::serve_harness;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use agentd_testkit::RecordedRequest;
use serde_json::{Value, json};
use serve_harness::{Harness, WAIT};
use tokio::process::Command;

/// Token auth; `fast` is an OpenAI-format model on the testkit.
const TOML: &str = "[server]\nauth = \"token\"\n\
    [models.fast]\nprovider = \"openai\"\nmodel = \"gpt-testkit\"\nbase_url = \"{URL}/v1\"\n\
    [profiles.default]\nmode = \"bypass\"\n";

fn python() -> PathBuf {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/venv/bin/python");
    assert!(
        python.is_file(),
        "the Python venv is missing ({}): run bash scripts/install-deps.sh",
        python.display()
    );
    python
}

/// The model's OpenAI-format requests.
fn openai_requests(h: &Harness) -> Vec<RecordedRequest> {
    h.model.requests_to("/v1/chat/completions")
}

/// Runs `script` with the Python SDK; the JSON it prints.
async fn run_python(script: &str, base_url: &str, token: &str) -> Value {
    let output = tokio::time::timeout(
        WAIT,
        Command::new(python())
            .args(["-c", script])
            .env_clear()
            .env("BASE_URL", base_url)
            .env("TOKEN", token)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python SDK took too long")
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "python failed:\n{stdout}\n{stderr}"
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("not JSON: {stdout}\n{stderr}"))
}

const SDK_SCRIPT: &str = r#"
import json, os, anthropic
client = anthropic.Anthropic(base_url=os.environ["BASE_URL"], api_key=os.environ["TOKEN"], max_retries=0)
tools = [{"name": "Bash", "description": "Run a command",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
out = {}
with client.messages.stream(model="fast", max_tokens=1000, tools=tools, system="Be brief.",
        messages=[{"role": "user", "content": "STREAM-PROBE"}]) as stream:
    texts = [t for t in stream.text_stream]
    final = stream.get_final_message()
out["streamed_text"] = texts
out["stream"] = final.model_dump()
reply = client.messages.create(model="fast", max_tokens=1000, tools=tools, messages=[
    {"role": "user", "content": "STREAM-PROBE"},
    {"role": "assistant", "content": [b.model_dump() for b in final.content]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": final.content[-1].id,
                                  "content": "RESULT-TEXT", "is_error": True}]}])
out["create"] = reply.model_dump()
out["count"] = client.messages.count_tokens(model="fast", messages=[{"role": "user", "content": "hi"}]).input_tokens
for name, key in [("bad_key", "agentd_" + "0" * 64), ("missing_model", os.environ["TOKEN"])]:
    try:
        anthropic.Anthropic(base_url=os.environ["BASE_URL"], api_key=key, max_retries=0).messages.create(
            model="nope" if name == "missing_model" else "fast", max_tokens=10,
            messages=[{"role": "user", "content": "x"}])
        out[name] = "accepted"
    except anthropic.APIStatusError as err:
        out[name] = {"status": err.status_code, "body": err.body}
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_python_sdk_streams_text_and_a_tool_call_from_an_openai_model() {
    let script = json!({"replies": [
        {"when": {"last_tool_result_contains": "RESULT-TEXT"}, "content": [{"type": "text", "text": "Saw the error."}],
         "usage": {"input_tokens": 40, "output_tokens": 4}},
        {"when": {"last_user_contains": "STREAM-PROBE"}, "content": [
            {"type": "text", "text": "Let me look at the files here."},
            {"type": "tool_use", "name": "Bash", "input": {"command": "ls -la"}}
        ], "usage": {"input_tokens": 30, "output_tokens": 12}},
    ]});
    let h = Harness::new(script, TOML).await;
    let token = h.token("alice").await;
    let server = h.start().await;
    let out = run_python(SDK_SCRIPT, &server.url, &token).await;

    // Streamed: the text arrived in deltas, then the tool call.
    let streamed: String = out["streamed_text"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(streamed, "Let me look at the files here.");
    let message = &out["stream"];
    assert!(
        message["id"].as_str().unwrap().starts_with("msg_"),
        "{message}"
    );
    assert_eq!(message["model"], "fast");
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(message["content"][0]["type"], "text");
    assert_eq!(message["content"][1]["type"], "tool_use");
    assert_eq!(message["content"][1]["name"], "Bash");
    assert_eq!(message["content"][1]["input"], json!({"command": "ls -la"}));
    assert_eq!(message["usage"]["input_tokens"], 30);
    assert_eq!(message["usage"]["output_tokens"], 12);

    // Not streamed, with the tool's failed result.
    let reply = &out["create"];
    assert_eq!(
        reply["content"],
        json!([{"type": "text", "text": "Saw the error.", "citations": null}])
    );
    assert_eq!(reply["stop_reason"], "end_turn");
    assert_eq!(reply["usage"]["input_tokens"], 40);
    assert_ne!(reply["id"], message["id"], "every reply has its own id");
    assert!(out["count"].as_u64().unwrap() >= 1);

    // Refusals in Anthropic's shape.
    assert_eq!(out["bad_key"]["status"], 401, "{out}");
    assert_eq!(out["bad_key"]["body"]["type"], "error");
    assert_eq!(
        out["bad_key"]["body"]["error"]["type"],
        "authentication_error"
    );
    assert_eq!(out["missing_model"]["status"], 404, "{out}");
    assert_eq!(
        out["missing_model"]["body"]["error"]["type"],
        "not_found_error"
    );

    // What reached the model: OpenAI Chat Completions, the tool call and its
    // failed result translated.
    let requests = openai_requests(&h);
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let first = &requests[0].body;
    assert_eq!(first["model"], "gpt-testkit");
    assert_eq!(
        first["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(first["tools"][0]["function"]["name"], "Bash");
    let second = &requests[1].body;
    let tool = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap_or_else(|| panic!("no tool message: {second}"));
    assert_eq!(tool["tool_call_id"], message["content"][1]["id"]);
    assert!(
        tool["content"].as_str().unwrap().contains("RESULT-TEXT"),
        "{tool}"
    );
    let called = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    assert_eq!(called["tool_calls"][0]["function"]["name"], "Bash");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ungranted_model_and_a_spent_quota_are_refused_in_anthropics_shape() {
    let toml = format!(
        "{TOML}[access]\nmodels = []\n[quotas]\nspend_usd_per_day = 0.000001\n\
         [models.fast.price]\ninput_per_mtok = 1000.0\noutput_per_mtok = 1000.0\n"
    );
    let script = json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "ok"}],
        "usage": {"input_tokens": 100, "output_tokens": 100}}]});
    let h = Harness::new(script, &toml).await;
    let bob = h.token("bob").await;
    let (code, _, stderr) = h.cli(&["users", "grant", "bob", "--model", "fast"]).await;
    let granted = code == 0;
    let server = h.start().await;
    let call = |token: &str| {
        server
            .client
            .post(format!("{}/v1/messages", server.url))
            .header("x-api-key", token)
            .json(&json!({"model": "fast", "max_tokens": 10,
                "messages": [{"role": "user", "content": "hi"}]}))
    };
    let eve = h.token("eve").await;
    let (status, body) = server.send(call(&eve)).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["type"], "permission_error", "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("fast"),
        "{body}"
    );
    assert!(granted, "granting bob the model failed: {stderr}");
    // The first call spends past the quota; the next is refused.
    let (status, body) = server.send(call(&bob)).await;
    assert_eq!(status, 200, "{body}");
    let mut refused = None;
    for _ in 0..50 {
        let (status, body) = server.send(call(&bob)).await;
        if status == 403 {
            refused = Some(body);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let body = refused.expect("spend over the quota was never refused");
    assert_eq!(body["type"], "error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("spend_usd_per_day"),
        "{body}"
    );
    // Malformed input: 400 naming the field.
    let (status, body) = server
        .send(call(&bob).json(&json!({"model": "fast", "max_tokens": "ten", "messages": []})))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_tokens"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claude_cli_runs_a_tool_call_through_agentd_against_an_openai_model() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "MAKE-THE-FILE"}, "content": [
            {"type": "text", "text": "Writing it."},
            {"type": "tool_use", "name": "Bash", "input": {"command": "echo from-claude > made.txt", "description": "write"}}
        ]},
        {"when": {"last_tool_result_contains": ""}, "content": [{"type": "text", "text": "FILE-WRITTEN"}]},
        side()
    ]});
    let h = Harness::new(script, TOML).await;
    let token = h.token("alice").await;
    let server = h.start().await;
    let work = tempfile::TempDir::new().unwrap();
    let home = tempfile::TempDir::new().unwrap();
    let output = tokio::time::timeout(
        WAIT * 2,
        Command::new(claude_binary())
            .args([
                "-p",
                "MAKE-THE-FILE",
                "--model",
                "fast",
                "--output-format",
                "json",
            ])
            .args(["--dangerously-skip-permissions", "--max-turns", "4"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .env("HOME", home.path())
            .env("ANTHROPIC_BASE_URL", &server.url)
            .env("ANTHROPIC_API_KEY", &token)
            // Its side requests (titles) go to the same configured model.
            .env("ANTHROPIC_SMALL_FAST_MODEL", "fast")
            .env("ANTHROPIC_DEFAULT_HAIKU_MODEL", "fast")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("IS_SANDBOX", "1")
            .current_dir(work.path())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("claude took too long")
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "claude failed:\n{stdout}\n{stderr}\n--- agentd\n{}",
        server.log()
    );
    let result: Value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    assert_eq!(result["result"], "FILE-WRITTEN", "{stdout}");
    let made = std::fs::read_to_string(work.path().join("made.txt")).unwrap();
    assert_eq!(made, "from-claude\n");
    // The model got OpenAI requests: the CLI's tool call and its result.
    let requests = openai_requests(&h);
    let answered = requests
        .iter()
        .find(|r| {
            r.body_text().contains("FILE-WRITTEN")
                || r.body["messages"]
                    .as_array()
                    .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
        })
        .unwrap_or_else(|| panic!("no request with the tool result: {requests:#?}"));
    let messages = answered.body["messages"].as_array().unwrap();
    let call = messages
        .iter()
        .find(|m| m["tool_calls"].is_array())
        .unwrap();
    assert_eq!(call["tool_calls"][0]["function"]["name"], "Bash");
    assert!(
        messages.iter().any(|m| m["role"] == "tool"),
        "{messages:#?}"
    );
    assert!(
        h.model.requests_to("/v1/messages").is_empty(),
        "nothing went in Anthropic's format"
    );
}

/// `(event, data)` of each event of an SSE body.
fn sse_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|chunk| !chunk.trim().is_empty())
        .map(|chunk| {
            let field = |name: &str| {
                chunk
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .unwrap_or_default()
                    .to_string()
            };
            (
                field("event: "),
                serde_json::from_str(&field("data: ")).unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_upstream_ends_in_an_error_event_after_what_arrived() {
    let script = json!({"replies": [
        {"when": {"last_user_contains": "WHOLE"}, "content": [{"type": "text", "text": "one two three four five six"}]},
        {"when": {"last_user_contains": "CUT"}, "content": [{"type": "text", "text": "one two three four five six"}],
         "fault": {"kind": "cut_stream", "after_chunks": 2}},
    ]});
    let h = Harness::new(script, TOML).await;
    let token = h.token("alice").await;
    let server = h.start().await.with_token(&token);
    let stream = |text: &str| {
        server
            .request(reqwest::Method::POST, "/v1/messages")
            .json(&json!({"model": "fast", "max_tokens": 100, "stream": true,
                "messages": [{"role": "user", "content": text}]}))
    };
    let response = stream("WHOLE").send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let events = sse_events(&response.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[..3], ["message_start", "ping", "content_block_start"]);
    assert_eq!(
        names[names.len() - 3..],
        ["content_block_stop", "message_delta", "message_stop"]
    );
    for (name, data) in &events {
        assert_eq!(&data["type"], name, "{data}");
    }
    let text: String = events
        .iter()
        .filter_map(|(_, d)| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "one two three four five six");

    let response = stream("CUT").send().await.unwrap();
    assert_eq!(response.status(), 200);
    let events = sse_events(&response.text().await.unwrap());
    let (last, data) = events.last().unwrap();
    assert_eq!(last, "error", "{events:?}");
    assert_eq!(data["error"]["type"], "api_error", "{data}");
    assert!(
        !events.iter().any(|(n, _)| n == "message_stop"),
        "{events:?}"
    );
}

/// A streamed call the client leaves mid-reply is paid for all the same:
/// its spend is the caller's (the whole input, the output sent so far).
/// And `max_tokens` is capped at the model's `max_output_tokens`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_stream_still_counts_and_max_tokens_is_capped() {
    let toml =
        format!("{TOML}[models.fast.price]\ninput_per_mtok = 1000.0\noutput_per_mtok = 1000.0\n")
            .replace("base_url = ", "max_output_tokens = 50\nbase_url = ");
    let slow = "word ".repeat(400);
    let script = json!({"replies": [
        {"when": {"last_user_contains": "CAPPED"}, "content": [{"type": "text", "text": "ok"}]},
        {"when": {"last_user_contains": "ABANDON"}, "content": [{"type": "text", "text": slow}],
         "delay_ms": 200},
    ]});
    let h = Harness::new(script, &toml).await;
    let token = h.token("alice").await;
    let server = h.start().await.with_token(&token);
    let call = |text: &str, stream: bool| {
        server.request(reqwest::Method::POST, "/v1/messages").json(
            &json!({"model": "fast", "max_tokens": 100000, "stream": stream,
                "messages": [{"role": "user", "content": text}]}),
        )
    };
    let response = call("CAPPED", false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let sent = openai_requests(&h);
    assert_eq!(sent.last().unwrap().body["max_tokens"], 50, "{sent:#?}");

    let spent = || async {
        let (_, usage) = server.get("/v1/usage").await;
        usage["spend_today_usd"].as_f64().unwrap_or(0.0)
    };
    let before = spent().await;
    let mut response = call("ABANDON", true).send().await.unwrap();
    assert_eq!(response.status(), 200);
    // The first event, then the client goes away mid-reply.
    let first = response.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("message_start"));
    drop(response);
    let mut after = before;
    for _ in 0..50 {
        after = spent().await;
        if after > before {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        after > before,
        "the abandoned call was not counted: {before} → {after}"
    );
}
