//! Waiting for a turn: its events followed on the session's event stream
//! (stored, then live, so nothing is missed between the message and the
//! subscription), progress sent to the MCP client as they come, and the
//! turn's end turned into the tool's result.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use futures::StreamExt;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};

use super::api::{Api, ApiResult, segment};

/// A tool result: `status` is the turn's (`completed`, `failed`,
/// `interrupted`, …), or `waiting` (an approval to answer) or `timeout`
/// (the turn goes on).
pub type Waited = Value;

/// Where progress goes: the client's `progressToken`, if it sent one.
pub struct Follow {
    target: Option<(Peer<RoleServer>, ProgressToken)>,
    step: u32,
}

impl Follow {
    pub fn new(peer: Peer<RoleServer>, token: Option<ProgressToken>) -> Self {
        Follow {
            target: token.map(|token| (peer, token)),
            step: 0,
        }
    }

    async fn note(&mut self, message: String) {
        let Some((peer, token)) = &self.target else {
            return;
        };
        self.step += 1;
        let param = ProgressNotificationParam::new(token.clone(), f64::from(self.step))
            .with_message(message);
        // A client gone away does not stop the turn.
        let _ = peer.notify_progress(param).await;
    }
}

/// Send `text` as a message of the session and wait for its turn.
pub async fn send_and_wait(
    api: &Api,
    session_id: &str,
    text: &str,
    timeout: Duration,
    follow: Follow,
) -> ApiResult<Waited> {
    let id = segment(session_id);
    let session = api.get(&format!("/v1/sessions/{id}")).await?;
    let after = session["last_seq"].as_u64().unwrap_or(0);
    let accepted = api
        .post(
            &format!("/v1/sessions/{id}/messages"),
            json!({ "content": text }),
        )
        .await?;
    let turn_id = accepted["turn_id"].as_str().unwrap_or_default().to_string();
    wait(api, session_id, &turn_id, after, timeout, follow).await
}

/// Follow the turn `turn_id` from the event after `after` until it ends,
/// asks for an approval, or `timeout` passes.
pub async fn wait(
    api: &Api,
    session_id: &str,
    turn_id: &str,
    after: u64,
    timeout: Duration,
    mut follow: Follow,
) -> ApiResult<Waited> {
    let events = api.events(session_id, after).await?;
    let mut events = std::pin::pin!(events);
    let mut turn = TurnSoFar::default();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let next = tokio::time::timeout_at(deadline, events.next()).await;
        let event = match next {
            Err(_) => return Ok(turn.unfinished(session_id, turn_id, "timeout")),
            Ok(None) => return Ok(turn.unfinished(session_id, turn_id, "stream_ended")),
            Ok(Some(event)) => event,
        };
        if let Some(note) = turn.take(turn_id, &event) {
            follow.note(note).await;
        }
        match event["type"].as_str() {
            Some("turn.finished") if event["turn_id"] == turn_id => {
                return Ok(turn.finished(session_id, &event));
            }
            Some("permission.requested") if turn.owns(&event) => {
                let mut waiting = turn.unfinished(session_id, turn_id, "waiting");
                waiting["approval"] = json!({
                    "request_id": event["request_id"],
                    "tool": event["tool"],
                    "input": event["input"],
                    "reason": event["reason"],
                });
                return Ok(waiting);
            }
            _ => {}
        }
    }
}

/// What a turn did so far, from its events.
#[derive(Default)]
struct TurnSoFar {
    /// Tool calls of this turn (`tool.finished` names only the call).
    calls: HashSet<String>,
    /// File-editing calls and the file each edits, until they succeed.
    edits: Vec<(String, String)>,
    changed: BTreeSet<String>,
    text: String,
}

/// The tools whose `file_path` is the file they change.
const FILE_TOOLS: [&str; 4] = ["Write", "Edit", "MultiEdit", "NotebookEdit"];

impl TurnSoFar {
    fn owns(&self, event: &Value) -> bool {
        event["call_id"]
            .as_str()
            .is_some_and(|call| self.calls.contains(call))
    }

    /// Note `event` if it is this turn's; what to tell the client, if anything.
    fn take(&mut self, turn_id: &str, event: &Value) -> Option<String> {
        let call_id = event["call_id"].as_str().unwrap_or_default().to_string();
        match event["type"].as_str()? {
            "tool.started" if event["turn_id"] == turn_id => {
                let name = event["name"].as_str().unwrap_or("tool").to_string();
                let path = event["input"]["file_path"]
                    .as_str()
                    .or_else(|| event["input"]["notebook_path"].as_str());
                if let (true, Some(path)) = (FILE_TOOLS.contains(&name.as_str()), path) {
                    self.edits.push((call_id.clone(), path.to_string()));
                }
                self.calls.insert(call_id);
                Some(format!("tool: {name}"))
            }
            "tool.finished" if self.calls.contains(&call_id) => {
                if event["is_error"] != true {
                    let done = self.edits.iter().filter(|(call, _)| *call == call_id);
                    self.changed.extend(done.map(|(_, path)| path.clone()));
                }
                None
            }
            "message.completed" if event["turn_id"] == turn_id => {
                let blocks = event["message"]["content"].as_array().cloned();
                let text: String = blocks
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|block| block["text"].as_str())
                    .collect();
                if text.is_empty() {
                    return None;
                }
                self.text = text.clone();
                Some(format!(
                    "message: {}",
                    text.chars().take(200).collect::<String>()
                ))
            }
            "permission.requested" if self.calls.contains(&call_id) => Some(format!(
                "waiting for approval of {}",
                event["tool"].as_str().unwrap_or("a tool call")
            )),
            _ => None,
        }
    }

    fn finished(&self, session_id: &str, event: &Value) -> Waited {
        let text = event["result"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| self.text.clone());
        json!({
            "session_id": session_id,
            "turn_id": event["turn_id"],
            "status": event["status"],
            "text": text,
            "usage": event["usage"],
            "cost_usd": event["cost_usd"],
            "changed_files": self.changed,
            "error": event["error"],
        })
    }

    fn unfinished(&self, session_id: &str, turn_id: &str, status: &str) -> Waited {
        json!({
            "session_id": session_id,
            "turn_id": turn_id,
            "status": status,
            "text": self.text,
            "changed_files": self.changed,
        })
    }
}

/// An approval answered when no turn of this server waits on it any more.
pub fn answered_only(session_id: &str) -> Waited {
    json!({ "session_id": session_id, "status": "answered" })
}
