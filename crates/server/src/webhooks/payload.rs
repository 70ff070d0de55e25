//! What a delivery says: the event's name, ids, the session's owner and the
//! event's details, with links to answer it when the server's public
//! address is configured.

use agentd_protocol::{ErrorCode, Event, EventEnvelope, TurnFinished, TurnStatus};
use serde_json::{Value, json};

use crate::config::WebhookEvent;

/// The longest tool input summary sent, in characters.
const INPUT_SUMMARY_CHARS: usize = 500;
/// The longest turn result sent, in characters (`result_truncated` says so).
const RESULT_CHARS: usize = 4000;

/// Who and what a delivery is about, besides its event.
pub(super) struct About<'a> {
    pub delivery_id: &'a str,
    pub owner: &'a str,
    pub turn_id: &'a str,
    pub public_url: Option<&'a str>,
    /// The profile's `approval_timeout_s`: a request's `expires_at`.
    pub answer_within_s: u64,
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
    if data.get("answer").is_some() {
        let within = chrono::Duration::seconds(
            i64::try_from(about.answer_within_s).unwrap_or(i64::MAX / 1000),
        );
        if let Some(expires) = envelope.at.checked_add_signed(within) {
            data["expires_at"] =
                json!(expires.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        }
    }
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
    cut(&text, INPUT_SUMMARY_CHARS).unwrap_or(text)
}

/// `text` cut to `chars` characters and an ellipsis, if it is longer.
fn cut(text: &str, chars: usize) -> Option<String> {
    let (at, _) = text.char_indices().nth(chars)?;
    Some(format!("{}…", &text[..at]))
}

fn turn_details(finished: &TurnFinished) -> Value {
    let long = finished
        .result
        .as_deref()
        .and_then(|r| cut(r, RESULT_CHARS));
    let truncated = long.is_some();
    json!({
        "status": finished.status,
        "result": long.map_or_else(|| json!(finished.result), Value::from),
        "result_truncated": truncated,
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

#[cfg(test)]
mod tests {
    use agentd_protocol::{ErrorCode, ErrorInfo};
    use chrono::TimeZone;

    use super::*;

    fn envelope(event: Event) -> EventEnvelope {
        EventEnvelope {
            seq: 7,
            session_id: "s1".into(),
            at: chrono::Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
            event,
        }
    }

    fn about() -> About<'static> {
        About {
            delivery_id: "d1",
            owner: "alice",
            turn_id: "t1",
            public_url: None,
            answer_within_s: 600,
        }
    }

    fn sent(envelope: &EventEnvelope) -> Vec<Value> {
        notifications(envelope)
            .into_iter()
            .map(|(event, data)| {
                serde_json::from_str(&body(event, envelope, &about(), data)).unwrap()
            })
            .collect()
    }

    /// A request says until when it can be answered (the profile's
    /// `approval_timeout_s` after it was asked).
    #[test]
    fn requests_carry_their_deadline() {
        let asked = envelope(Event::PermissionRequested {
            request_id: "r1".into(),
            call_id: "c1".into(),
            tool: "Bash".into(),
            input: json!({"command": "ls"}),
            reason: "ask".into(),
            parent_call_id: None,
        });
        let body = &sent(&asked)[0];
        assert_eq!(
            body["data"]["expires_at"], "2026-01-02T03:14:05.000Z",
            "{body}"
        );
    }

    /// A long result is cut and says so; a short one is whole.
    #[test]
    fn a_long_result_is_truncated() {
        let mut finished = TurnFinished::never_ran(
            "t1",
            TurnStatus::Completed,
            ErrorInfo {
                code: ErrorCode::ServerRestarted,
                message: String::new(),
                retryable: false,
            },
        );
        finished.error = None;
        finished.result = Some("é".repeat(RESULT_CHARS + 10));
        let body = &sent(&envelope(Event::TurnFinished(finished.clone())))[0];
        let result = body["data"]["result"].as_str().unwrap();
        assert_eq!(
            result.chars().count(),
            RESULT_CHARS + 1,
            "cut, with an ellipsis"
        );
        assert_eq!(body["data"]["result_truncated"], true);
        finished.result = Some("done".into());
        let body = &sent(&envelope(Event::TurnFinished(finished)))[0];
        assert_eq!(body["data"]["result"], "done");
        assert_eq!(body["data"]["result_truncated"], false);
        assert!(body["data"].get("expires_at").is_none());
    }
}
