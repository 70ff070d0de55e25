//! What a delivery says: the event's name, ids, the session's owner and the
//! event's details, with links to answer it when the server's public
//! address is configured.

use agentd_protocol::{ErrorCode, Event, EventEnvelope, TurnFinished, TurnStatus};
use serde_json::{Value, json};

use crate::config::WebhookEvent;

/// The longest tool input summary sent, in characters.
const INPUT_SUMMARY_CHARS: usize = 500;

/// Who and what a delivery is about, besides its event.
pub(super) struct About<'a> {
    pub delivery_id: &'a str,
    pub owner: &'a str,
    pub turn_id: &'a str,
    pub public_url: Option<&'a str>,
}

/// The webhook events `envelope` makes, each with its details.
pub(super) fn notifications(envelope: &EventEnvelope) -> Vec<(WebhookEvent, Value)> {
    let session = &envelope.session_id;
    match &envelope.event {
        Event::TurnFinished(finished) => {
            let mut out = vec![(WebhookEvent::TurnFinished, turn_details(finished))];
            if let Some(limit) = budget_hit(finished) {
                out.push((WebhookEvent::Budget, budget_details(finished, limit)));
            }
            out
        }
        Event::PermissionRequested {
            request_id,
            call_id,
            tool,
            input,
            reason,
            ..
        } => vec![(
            WebhookEvent::PermissionRequested,
            json!({
                "request_id": request_id,
                "call_id": call_id,
                "tool": tool,
                "input_summary": summary(input),
                "reason": reason,
                "answer": answer_route(session, "permissions", request_id),
            }),
        )],
        Event::QuestionAsked {
            request_id,
            call_id,
            questions,
            ..
        } => vec![(
            WebhookEvent::QuestionAsked,
            json!({
                "request_id": request_id,
                "call_id": call_id,
                "questions": questions,
                "answer": answer_route(session, "questions", request_id),
            }),
        )],
        _ => Vec::new(),
    }
}

/// The request body of a delivery.
pub(super) fn body(
    event: WebhookEvent,
    envelope: &EventEnvelope,
    about: &About<'_>,
    mut data: Value,
) -> String {
    let session = &envelope.session_id;
    let mut body = json!({
        "event": event.as_str(),
        "delivery_id": about.delivery_id,
        "timestamp": envelope.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "session_id": session,
        "owner": about.owner,
        "turn_id": about.turn_id,
        "seq": envelope.seq,
    });
    if let Some(base) = about.public_url.map(|b| b.trim_end_matches('/')) {
        body["session_url"] = json!(format!("{base}/#/s/{session}"));
        if let Some(answer) = data.get_mut("answer") {
            let path = answer["path"].as_str().unwrap_or_default().to_string();
            answer["url"] = json!(format!("{base}{path}"));
        }
    }
    body["data"] = data;
    body.to_string()
}

fn answer_route(session: &str, kind: &str, request_id: &str) -> Value {
    json!({
        "method": "POST",
        "path": format!("/v1/sessions/{session}/{kind}/{request_id}"),
    })
}

/// A tool's input as short text: enough to decide whether to look.
fn summary(input: &Value) -> String {
    let text = match input {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match text.char_indices().nth(INPUT_SUMMARY_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn turn_details(finished: &TurnFinished) -> Value {
    json!({
        "status": finished.status,
        "result": finished.result,
        "usage": finished.usage,
        "cost_usd": finished.cost_usd,
        "num_model_calls": finished.num_model_calls,
        "duration_ms": finished.duration_ms,
        "error": finished.error,
        "agent_status": finished.agent_status,
    })
}

/// The budget or quota that stopped the turn, if one did.
fn budget_hit(finished: &TurnFinished) -> Option<&'static str> {
    let code = finished.error.as_ref().map(|e| &e.code);
    match code {
        Some(ErrorCode::BudgetExceeded) => Some("max_budget_usd"),
        Some(ErrorCode::SessionBudgetExceeded) => Some("max_session_budget_usd"),
        Some(ErrorCode::SpendQuotaExceeded) => Some("spend_quota"),
        Some(ErrorCode::QuotaExceeded) => Some("quota"),
        _ if finished.status == TurnStatus::BudgetExceeded => Some("max_budget_usd"),
        _ => None,
    }
}

fn budget_details(finished: &TurnFinished, limit: &str) -> Value {
    json!({
        "limit": limit,
        "status": finished.status,
        "code": finished.error.as_ref().map(|e| &e.code),
        "message": finished.error.as_ref().map(|e| e.message.clone()),
        "cost_usd": finished.cost_usd,
    })
}
