//! The control protocol of the `claude` CLI's stream-json mode: JSON lines
//! on stdout (messages, and requests to the client: `can_use_tool`,
//! `hook_callback`, `mcp_message`) and on stdin (user messages, the
//! client's answers, and its own requests: `initialize`, `interrupt`,
//! `set_permission_mode`, `set_model`, …).

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

type Waiting = oneshot::Sender<Result<Value, String>>;

/// stdout, written by one task in the order lines are sent.
#[derive(Clone)]
pub struct Output {
    lines: mpsc::UnboundedSender<Value>,
    /// Fired when stdout cannot be written: the client went away.
    gone: CancellationToken,
}

impl Output {
    /// The writer task's handle ends once every `Output` is dropped and
    /// what was sent is written.
    pub fn start() -> (Self, tokio::task::JoinHandle<()>) {
        let (sender, mut lines) = mpsc::unbounded_channel::<Value>();
        let gone = CancellationToken::new();
        let writer = tokio::task::spawn_blocking({
            let gone = gone.clone();
            move || {
                let stdout = std::io::stdout();
                while let Some(line) = lines.blocking_recv() {
                    let mut out = stdout.lock();
                    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                        gone.cancel();
                        break;
                    }
                }
            }
        });
        let output = Self {
            lines: sender,
            gone,
        };
        (output, writer)
    }

    pub fn send(&self, line: Value) {
        let _ = self.lines.send(line);
    }

    pub fn gone(&self) -> CancellationToken {
        self.gone.clone()
    }
}

/// Requests to the client and their answers.
pub struct Control {
    out: Output,
    waiting: Mutex<HashMap<String, Waiting>>,
    next_id: AtomicU64,
    /// stdin ended: no answer can come any more.
    closed: AtomicBool,
}

impl Control {
    pub fn new(out: Output) -> Self {
        Self {
            out,
            waiting: Mutex::default(),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
        }
    }

    pub fn output(&self) -> &Output {
        &self.out
    }

    /// Sends `request` (an object with its `subtype`) and waits for the
    /// client's answer: its `response` object, or its error.
    pub async fn request(&self, request: Value) -> Result<Value, String> {
        let number = self.next_id.fetch_add(1, Ordering::Relaxed);
        let request_id = format!("agentd_req_{number}");
        let (sender, answer) = oneshot::channel();
        {
            let mut waiting = self.waiting.lock().map_err(|_| "poisoned".to_string())?;
            if self.closed.load(Ordering::Acquire) {
                return Err("the client closed stdin; nobody can answer".into());
            }
            waiting.insert(request_id.clone(), sender);
        }
        self.out.send(json!({
            "type": "control_request",
            "request_id": request_id,
            "request": request,
        }));
        let mut pending = Pending {
            control: self,
            request_id,
            answered: false,
        };
        let answer = answer.await;
        pending.answered = true;
        answer.unwrap_or_else(|_| Err("the client closed stdin before answering".into()))
    }

    /// Sends `request` and does not wait: the client's answer, if any,
    /// is dropped (for what has no answer, as an MCP notification).
    pub fn notify(&self, request: Value) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        let number = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.out.send(json!({
            "type": "control_request",
            "request_id": format!("agentd_req_{number}"),
            "request": request,
        }));
    }

    /// A `control_response` line from the client.
    pub fn answered(&self, line: &Value) {
        let response = line.get("response").unwrap_or(&Value::Null);
        let Some(request_id) = response.get("request_id").and_then(Value::as_str) else {
            return;
        };
        let sender = self
            .waiting
            .lock()
            .ok()
            .and_then(|mut waiting| waiting.remove(request_id));
        let Some(sender) = sender else {
            return;
        };
        let answer = match response.get("subtype").and_then(Value::as_str) {
            Some("error") => Err(response
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("the client answered with an error")
                .to_string()),
            _ => Ok(response.get("response").cloned().unwrap_or(json!({}))),
        };
        let _ = sender.send(answer);
    }

    /// stdin ended: every open request fails, and so will later ones.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.clear();
        }
    }

    /// Answers a request of the client's.
    pub fn reply(&self, request_id: &str, outcome: Result<Value, String>) {
        let response = match outcome {
            Ok(body) => json!({"subtype": "success", "request_id": request_id, "response": body}),
            Err(error) => json!({"subtype": "error", "request_id": request_id, "error": error}),
        };
        self.out
            .send(json!({"type": "control_response", "response": response}));
    }
}

/// A request on its way: dropped unanswered (the turn was interrupted, a
/// hook or call timed out), it is forgotten and the client told to stop
/// working on it.
struct Pending<'a> {
    control: &'a Control,
    request_id: String,
    answered: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let forgotten = self
            .control
            .waiting
            .lock()
            .ok()
            .and_then(|mut waiting| waiting.remove(&self.request_id));
        if forgotten.is_some() {
            self.control.out.send(json!({
                "type": "control_cancel_request",
                "request_id": self.request_id,
            }));
        }
    }
}
