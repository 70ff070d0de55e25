//! The event log of one scripted session, compared with a recorded copy
//! (`golden/session_events.json`): a change that alters what clients receive
//! — an event's type, order or fields — shows here, while ids, times,
//! durations and the temporary workspace's path are normalized away. Live
//! tool output is merged per call, since how it is chunked depends on timing.
//! After an intended change, rewrite the copy with `AGENTD_UPDATE_GOLDEN=1
//! cargo test -p agentd-cli --test cli golden_events` and review its diff.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::serve_harness::{Harness, SseEvent, WAIT};

/// Fields whose values differ from run to run: each distinct value becomes
/// `<field:N>`, so which events share an id still shows.
const IDS: [&str; 8] = [
    "session_id",
    "turn_id",
    "call_id",
    "request_id",
    "checkpoint_id",
    "id",
    "tool_use_id",
    "message_id",
];
/// Values that depend on timing: `seq` too, since live output comes in as
/// many events as the pipe had reads.
const TIMES: [&str; 4] = ["at", "created_at", "duration_ms", "seq"];

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cli/golden/session_events.json")
}

struct Normalizer {
    seen: HashMap<(String, String), usize>,
    workspace: String,
}

impl Normalizer {
    fn value(&mut self, key: Option<&str>, value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.value(Some(k), v)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.value(key, v)).collect()),
            Value::String(text) if key.is_some_and(|k| IDS.contains(&k)) => {
                let key = key.unwrap().to_string();
                let next = self.seen.len();
                let n = *self.seen.entry((key.clone(), text.clone())).or_insert(next);
                json!(format!("<{key}:{n}>"))
            }
            _ if key.is_some_and(|k| TIMES.contains(&k)) => json!(format!("<{}>", key.unwrap())),
            Value::String(text) => json!(text.replace(&self.workspace, "<workspace>")),
            other => other.clone(),
        }
    }
}

/// `(type, data)` of each event, normalized, live output merged per call.
fn normalize(events: &[SseEvent], workspace: &str) -> Vec<Value> {
    let mut normalizer = Normalizer {
        seen: HashMap::new(),
        workspace: workspace.to_string(),
    };
    let mut out: Vec<Value> = Vec::new();
    for event in events {
        let data = normalizer.value(None, &event.data);
        if event.event == "tool.output"
            && let Some(last) = out.last_mut()
            && last["type"] == "tool.output"
            && last["data"]["call_id"] == data["call_id"]
            && last["data"]["stream"] == data["stream"]
        {
            let joined = format!(
                "{}{}",
                last["data"]["text"].as_str().unwrap(),
                data["text"].as_str().unwrap()
            );
            last["data"]["text"] = json!(joined);
            continue;
        }
        out.push(json!({"type": event.event, "data": data}));
    }
    out
}

fn script() -> Value {
    let tool =
        |name: &str, input: Value| json!([{"type": "tool_use", "name": name, "input": input}]);
    json!({"replies": [
        {"repeat": true, "when": {"any_contains": "Summarise the conversation above"},
         "usage": {"input_tokens": 900, "output_tokens": 40},
         "content": [{"type": "text", "text": "SUMMARY: wrote a.txt and read it back."}]},
        {"usage": {"input_tokens": 120, "output_tokens": 30},
         "content": [{"type": "text", "text": "Let me plan."},
                     {"type": "tool_use", "name": "TodoWrite", "input": {"todos": [
                         {"content": "write a.txt", "status": "in_progress", "activeForm": "Writing a.txt"},
                         {"content": "read it back", "status": "pending", "activeForm": "Reading it back"}]}}]},
        {"usage": {"input_tokens": 200, "output_tokens": 20},
         "content": tool("Write", json!({"file_path": "a.txt", "content": "hello\n"}))},
        {"usage": {"input_tokens": 260, "output_tokens": 20},
         "content": tool("Bash", json!({"command": "cat a.txt; echo done"}))},
        {"usage": {"input_tokens": 300, "output_tokens": 10},
         "content": [{"type": "text", "text": "All done: a.txt says hello."}]},
        {"repeat": true, "content": [{"type": "text", "text": "ok"}]}
    ]})
}

#[tokio::test]
async fn a_scripted_sessions_event_log_is_the_recorded_one() {
    let toml = "[server]\nauth = \"none\"\n\
        [models.default]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = \"{URL}\"\n\
        [profiles.default]\nmode = \"accept_edits\"\n";
    let h = Harness::new(script(), toml).await;
    let server = h.start().await;
    let session = server.session().await;
    server.message(&session, "write a.txt, then show it").await;
    // The Bash call asks; allow it.
    let deadline = tokio::time::Instant::now() + WAIT;
    let request = loop {
        let (_, pending) = server.get(&format!("/v1/sessions/{session}/pending")).await;
        if let Some(id) = pending["pending"][0]["request_id"].as_str() {
            break id.to_string();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no permission request"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (status, _) = server
        .post(
            &format!("/v1/sessions/{session}/permissions/{request}"),
            json!({"decision": "allow"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    server.wait_idle(&session).await;
    let (status, _) = server
        .post(&format!("/v1/sessions/{session}/compact"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    server.wait_idle(&session).await;

    let workspace = h.data().join("workspaces").join(&session);
    let workspace = workspace.canonicalize().unwrap();
    let events = server.all_events(&session).await;
    let log = normalize(&events, &workspace.display().to_string());
    let text = serde_json::to_string_pretty(&log).unwrap() + "\n";
    let path = golden_path();
    if std::env::var_os("AGENTD_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let recorded = std::fs::read_to_string(&path).unwrap_or_else(|err| {
        panic!(
            "{}: {err}; record it with AGENTD_UPDATE_GOLDEN=1 and review it",
            path.display()
        )
    });
    if recorded != text {
        let got = std::env::temp_dir().join("agentd-golden-session-events.json");
        std::fs::write(&got, &text).unwrap();
        panic!(
            "the event log differs from {} (this run's is in {}); if the change is \
             intended, rewrite it with AGENTD_UPDATE_GOLDEN=1 and review the diff",
            path.display(),
            got.display()
        );
    }
}
