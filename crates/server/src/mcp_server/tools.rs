//! The MCP tools: their arguments (whose JSON Schemas are the tools' input
//! schemas) and what each does with the API.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::api::{Api, ApiResult, segment};
use super::turn::{Follow, Waited};

/// How long `send_message` and `run` wait for a turn when not told.
pub const DEFAULT_TIMEOUT_S: u64 = 600;
/// The longest wait a call may ask for.
pub const MAX_TIMEOUT_S: u64 = 3600;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    /// A profile the caller may use; `default` when omitted.
    pub profile: Option<String>,
    /// A model the caller may use (or `provider:name`); the default when omitted.
    pub model: Option<String>,
    /// Work in this existing directory (absolute, inside one of the caller's
    /// workspace roots) instead of a new empty one.
    pub workspace: Option<String>,
    /// The session's title.
    pub title: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessage {
    pub session_id: String,
    /// The user's message.
    pub text: String,
    /// Seconds to wait for the turn's end (default 600, at most 3600); the
    /// turn goes on after a timeout.
    pub timeout_s: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Run {
    /// The task: the first message of a new session.
    pub prompt: String,
    pub profile: Option<String>,
    pub model: Option<String>,
    pub workspace: Option<String>,
    pub title: Option<String>,
    pub timeout_s: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListSessions {
    /// Sessions per page, 1–200 (default 50).
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionId {
    pub session_id: String,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Allow this call.
    Allow,
    /// Allow this call and the same call again in this session.
    AllowSession,
    Deny,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerApproval {
    pub session_id: String,
    /// The pending request's id (`request_id` of a `waiting` result).
    pub request_id: String,
    pub decision: Decision,
    /// Seconds to wait for the turn to end after the answer (default 600).
    pub timeout_s: Option<u64>,
}

fn schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    rmcp::handler::server::common::schema_for_type::<T>()
}

/// Every tool, as `tools/list` shows them.
pub fn list() -> Vec<Tool> {
    vec![
        Tool::new(
            "create_session",
            "Create an agentd session (a sandboxed coding agent with its own workspace).",
            schema::<CreateSession>(),
        ),
        Tool::new(
            "send_message",
            "Send a message to a session and wait for the turn's end: the final text, \
             usage, cost, status and the files the turn changed. A turn waiting for an \
             approval returns `waiting` with the request to answer (answer_approval).",
            schema::<SendMessage>(),
        ),
        Tool::new(
            "run",
            "Start a new session on a prompt and wait for its result (as send_message).",
            schema::<Run>(),
        ),
        Tool::new(
            "list_sessions",
            "The caller's sessions, newest first.",
            schema::<ListSessions>(),
        ),
        Tool::new(
            "get_session",
            "A session: status, totals, pending approvals and a transcript summary.",
            schema::<SessionId>(),
        ),
        Tool::new(
            "answer_approval",
            "Answer a pending permission request (allow, allow_session or deny), then \
             wait for the turn as send_message does.",
            schema::<AnswerApproval>(),
        ),
        Tool::new(
            "cancel",
            "Interrupt the session's running turn.",
            schema::<SessionId>(),
        ),
    ]
}

/// The `POST /v1/sessions` body of a create.
fn create_body(
    profile: Option<String>,
    model: Option<String>,
    workspace: Option<String>,
    title: Option<String>,
) -> Value {
    let mut body = serde_json::Map::new();
    for (key, value) in [
        ("profile", profile),
        ("model", model),
        ("workspace", workspace),
        ("title", title),
    ] {
        if let Some(value) = value {
            body.insert(key.into(), Value::String(value));
        }
    }
    Value::Object(body)
}

pub async fn create_session(api: &Api, args: CreateSession) -> ApiResult<Value> {
    let body = create_body(args.profile, args.model, args.workspace, args.title);
    api.post("/v1/sessions", body).await
}

pub async fn send_message(api: &Api, args: SendMessage, follow: Follow) -> ApiResult<Waited> {
    super::turn::send_and_wait(
        api,
        &args.session_id,
        &args.text,
        timeout(args.timeout_s),
        follow,
    )
    .await
}

pub async fn run(api: &Api, args: Run, follow: Follow) -> ApiResult<Waited> {
    let body = create_body(args.profile, args.model, args.workspace, args.title);
    let session = api.post("/v1/sessions", body).await?;
    let id = session["id"].as_str().unwrap_or_default().to_string();
    super::turn::send_and_wait(api, &id, &args.prompt, timeout(args.timeout_s), follow).await
}

pub async fn list_sessions(api: &Api, args: ListSessions) -> ApiResult<Value> {
    let mut path = format!(
        "/v1/sessions?sort=created&limit={}",
        args.limit.unwrap_or(50)
    );
    if let Some(cursor) = args.cursor {
        path.push_str(&format!("&cursor={}", segment(&cursor)));
    }
    api.get(&path).await
}

/// Most characters of one message in a transcript summary.
const SUMMARY_CHARS: usize = 500;
/// Most messages in a transcript summary (the newest).
const SUMMARY_MESSAGES: usize = 20;

pub async fn get_session(api: &Api, args: SessionId) -> ApiResult<Value> {
    let id = segment(&args.session_id);
    let mut session = api.get(&format!("/v1/sessions/{id}")).await?;
    let messages = api.get(&format!("/v1/sessions/{id}/messages")).await?;
    let pending = api.get(&format!("/v1/sessions/{id}/pending")).await?;
    let all = messages["messages"].as_array().cloned().unwrap_or_default();
    let summary: Vec<Value> = all
        .iter()
        .skip(all.len().saturating_sub(SUMMARY_MESSAGES))
        .map(summarize)
        .collect();
    session["message_count"] = json!(all.len());
    session["transcript"] = Value::Array(summary);
    session["pending"] = pending["pending"].clone();
    Ok(session)
}

/// One stored message in a line or two: its role, text and tool calls.
fn summarize(stored: &Value) -> Value {
    let message = &stored["message"];
    let blocks = message["content"].as_array().cloned().unwrap_or_default();
    let mut text = String::new();
    let mut tools = Vec::new();
    for block in &blocks {
        match block["type"].as_str() {
            Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") => tools.push(block["name"].clone()),
            Some("tool_result") => tools.push(json!("result")),
            _ => {}
        }
    }
    if text.chars().count() > SUMMARY_CHARS {
        text = text.chars().take(SUMMARY_CHARS).collect::<String>() + "…";
    }
    json!({ "id": stored["id"], "role": message["role"], "text": text, "tools": tools })
}

pub async fn answer_approval(api: &Api, args: AnswerApproval, follow: Follow) -> ApiResult<Waited> {
    let (decision, remember) = match args.decision {
        Decision::Allow => ("allow", None),
        Decision::AllowSession => ("allow", Some("session")),
        Decision::Deny => ("deny", None),
    };
    let id = segment(&args.session_id);
    if decision == "allow" {
        refuse_confirm_commands(api, &id, &args.request_id).await?;
    }
    // Where to follow the turn from: it goes on once answered.
    let session = api.get(&format!("/v1/sessions/{id}")).await?;
    let after = session["last_seq"].as_u64().unwrap_or(0);
    let mut body = json!({ "decision": decision });
    if let Some(remember) = remember {
        body["remember"] = json!(remember);
    }
    let path = format!(
        "/v1/sessions/{id}/permissions/{}",
        segment(&args.request_id)
    );
    api.post(&path, body).await?;
    let Some(turn_id) = session["running_turn_id"].as_str() else {
        return Ok(super::turn::answered_only(&args.session_id));
    };
    super::turn::wait(
        api,
        &args.session_id,
        turn_id,
        after,
        timeout(args.timeout_s),
        follow,
    )
    .await
}

/// A `confirm = true` command runs only when a person allows it: not when
/// the model on the other side of this MCP server does.
async fn refuse_confirm_commands(api: &Api, session: &str, request_id: &str) -> ApiResult<()> {
    let pending = api.get(&format!("/v1/sessions/{session}/pending")).await?;
    let request = pending["pending"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|item| item["request_id"] == request_id)
        .map(|item| item["request"].clone());
    let Some(tool) = request
        .as_ref()
        .and_then(|request| request["tool"].as_str().map(str::to_string))
    else {
        // Unknown or answered already: the API says which.
        return Ok(());
    };
    let is_command = request
        .as_ref()
        .and_then(|request| request["reason"].as_str())
        .is_some_and(|reason| reason.contains(agentd_tools::command::RUNS_MARK));
    let commands = api.get(&format!("/v1/sessions/{session}/commands")).await?;
    let listed = commands["commands"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|command| command["name"] == tool.as_str())
        .map(|command| command["confirm"] == false);
    // The list holds what the profile offers; a turn's rules may offer more.
    // An operator command not listed as needing no confirmation is refused.
    let confirm = match listed {
        Some(no_confirm) => !no_confirm,
        None => is_command,
    };
    if confirm {
        return Err(super::api::Refused {
            status: axum::http::StatusCode::FORBIDDEN,
            message: format!(
                "{tool} must be confirmed by a person (in the web UI, `agentd run`'s terminal or the API); \
                 it cannot be allowed through this MCP server"
            ),
        });
    }
    Ok(())
}

pub async fn cancel(api: &Api, args: SessionId) -> ApiResult<Value> {
    let path = format!("/v1/sessions/{}/interrupt", segment(&args.session_id));
    api.post(&path, json!({})).await
}

fn timeout(asked: Option<u64>) -> std::time::Duration {
    std::time::Duration::from_secs(asked.unwrap_or(DEFAULT_TIMEOUT_S).clamp(1, MAX_TIMEOUT_S))
}
