//! The AI SDK's chat request (`useChat` with `DefaultChatTransport`): the
//! whole conversation as `UIMessage`s, of which agentd needs only the last
//! one — the session keeps the history itself. A user message is a new
//! turn; an assistant message carrying answered tool approvals continues the
//! turn that asked.

use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::http::error::ApiError;

/// The body `DefaultChatTransport` posts. `id` and `messageId` are read
/// (and documented) for what they are, but agentd needs neither.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct ChatRequest {
    /// The chat's id on the client (`useChat`'s `id`); the session is the
    /// one in the path.
    pub id: Option<String>,
    /// The conversation as the client has it; only the last message is read.
    pub messages: Vec<UiMessage>,
    /// `submit-message` (or absent); `regenerate-message` is refused, as a
    /// session's history is only rewound explicitly (`POST …/rewind`).
    pub trigger: Option<String>,
    /// The message to regenerate (with `regenerate-message`).
    #[serde(rename = "messageId")]
    pub message_id: Option<String>,
}

/// One `UIMessage`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct UiMessage {
    pub id: String,
    pub role: UiRole,
    /// `text` and `file` parts (a user's), or tool parts with an answered
    /// `approval` (an assistant's); other parts are ignored.
    #[schema(value_type = Vec<Object>)]
    pub parts: Vec<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum UiRole {
    System,
    User,
    Assistant,
}

/// What a chat request asks of the session.
#[derive(Debug, PartialEq)]
pub enum ChatAction {
    /// Start a turn with `content` (Anthropic-shaped blocks, checked as a
    /// message's); `request_id` makes a resent message start nothing new.
    Turn { content: Value, request_id: String },
    /// Answer these approvals, then follow the turn that asked.
    Approvals(Vec<ApprovalAnswer>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalAnswer {
    /// agentd's permission `request_id`, sent as the `approvalId`.
    pub request_id: String,
    pub approved: bool,
}

impl ChatRequest {
    pub fn action(&self) -> Result<ChatAction, ApiError> {
        let bad = |message: String| Err(ApiError::BadRequest(message));
        if let Some(trigger) = self.trigger.as_deref()
            && trigger != "submit-message"
        {
            return bad(format!(
                "trigger {trigger:?} is not supported: only `submit-message`; to redo a reply, \
                 rewind the session (POST /v1/sessions/{{id}}/rewind)"
            ));
        }
        let Some(last) = self.messages.last() else {
            return bad("messages must hold at least the new user message".into());
        };
        match last.role {
            UiRole::User => user_turn(last),
            UiRole::Assistant => approvals(last),
            UiRole::System => {
                bad("the last message must be the user's (or answer approvals)".into())
            }
        }
    }
}

fn user_turn(message: &UiMessage) -> Result<ChatAction, ApiError> {
    let mut content = Vec::new();
    for (index, part) in message.parts.iter().enumerate() {
        let at = format!("messages[-1].parts[{index}]");
        match part.get("type").and_then(Value::as_str) {
            Some("text") => match part.get("text").and_then(Value::as_str) {
                Some(text) if !text.trim().is_empty() => {
                    content.push(json!({"type": "text", "text": text}))
                }
                Some(_) => {}
                None => {
                    return Err(ApiError::BadRequest(format!(
                        "{at}: a text part needs `text`"
                    )));
                }
            },
            Some("file") => content.push(file_block(part, &at)?),
            // Step markers, data parts, sources …: nothing the model reads.
            _ => {}
        }
    }
    if content.is_empty() {
        return Err(ApiError::BadRequest(
            "the last user message has no text or file part".into(),
        ));
    }
    // Kept as the turn's request id, as long as any client's may be.
    let request_id = format!("ai-sdk:{}", message.id);
    if message.id.is_empty()
        || request_id.chars().count() > crate::http::messages::MAX_REQUEST_ID_CHARS
    {
        return Err(ApiError::BadRequest(format!(
            "the message id must be 1 to {} characters",
            crate::http::messages::MAX_REQUEST_ID_CHARS - "ai-sdk:".len()
        )));
    }
    Ok(ChatAction::Turn {
        content: Value::Array(content),
        request_id,
    })
}

/// A `file` part with a `data:` URL as an image or PDF block.
fn file_block(part: &Value, at: &str) -> Result<Value, ApiError> {
    let bad = |message: &str| ApiError::BadRequest(format!("{at}: {message}"));
    let media_type = part
        .get("mediaType")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("a file part needs `mediaType`"))?;
    let url = part
        .get("url")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("a file part needs `url`"))?;
    // `data:<media type>;base64,<data>`: what `useChat` makes of a FileList.
    let data = url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(','))
        .and_then(|(header, data)| header.ends_with(";base64").then_some(data))
        .ok_or_else(|| bad("a file part's `url` must be a base64 `data:` URL"))?;
    if media_type.starts_with("image/") {
        Ok(json!({"type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data}}))
    } else if media_type == "application/pdf" {
        let mut block = json!({"type": "document",
            "source": {"type": "base64", "media_type": media_type, "data": data}});
        if let Some(name) = part.get("filename").and_then(Value::as_str) {
            block["title"] = json!(name);
        }
        Ok(block)
    } else {
        Err(bad(&format!(
            "files of type {media_type:?} are not supported (images and PDFs are)"
        )))
    }
}

/// The answered approvals of an assistant message (tool parts in state
/// `approval-responded`, as `addToolApprovalResponse` leaves them).
fn approvals(message: &UiMessage) -> Result<ChatAction, ApiError> {
    let answers: Vec<ApprovalAnswer> = message
        .parts
        .iter()
        .filter(|part| part.get("state").and_then(Value::as_str) == Some("approval-responded"))
        .filter_map(|part| {
            let approval = part.get("approval")?;
            Some(ApprovalAnswer {
                request_id: approval.get("id")?.as_str()?.to_string(),
                approved: approval.get("approved")?.as_bool()?,
            })
        })
        .collect();
    if answers.is_empty() {
        return Err(ApiError::BadRequest(
            "the last message is the assistant's but answers no tool approval".into(),
        ));
    }
    Ok(ChatAction::Approvals(answers))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn request(body: Value) -> ChatRequest {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn a_user_message_becomes_text_and_image_blocks() {
        let body = request(json!({"id": "c", "trigger": "submit-message", "messages": [
            {"id": "u1", "role": "user", "parts": [
                {"type": "text", "text": "look"},
                {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AAAA"}]}]}));
        assert_eq!(
            body.action().unwrap(),
            ChatAction::Turn {
                content: json!([{"type": "text", "text": "look"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]),
                request_id: "ai-sdk:u1".into(),
            }
        );
    }

    #[test]
    fn answered_approvals_are_read_from_the_assistant_message() {
        let body = request(
            json!({"messages": [{"id": "a", "role": "assistant", "parts": [
            {"type": "tool-Bash", "toolCallId": "t", "state": "approval-responded",
             "approval": {"id": "perm_1", "approved": false}}]}]}),
        );
        assert_eq!(
            body.action().unwrap(),
            ChatAction::Approvals(vec![ApprovalAnswer {
                request_id: "perm_1".into(),
                approved: false
            }])
        );
    }

    #[test]
    fn what_agentd_cannot_do_is_refused_with_the_reason() {
        for (body, says) in [
            (json!({"messages": []}), "at least"),
            (
                json!({"trigger": "regenerate-message", "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "x"}]}]}),
                "rewind",
            ),
            (
                json!({"messages": [{"id": "u", "role": "user", "parts": [{"type": "step-start"}]}]}),
                "no text",
            ),
            (
                json!({"messages": [{"id": "u", "role": "user", "parts": [{"type": "file", "mediaType": "image/png", "url": "https://x/y.png"}]}]}),
                "data:",
            ),
            (
                json!({"messages": [{"id": "u", "role": "user", "parts": [{"type": "file", "mediaType": "text/csv", "url": "data:text/csv;base64,AA=="}]}]}),
                "text/csv",
            ),
            (
                json!({"messages": [{"id": "a", "role": "assistant", "parts": [{"type": "text", "text": "x"}]}]}),
                "approval",
            ),
        ] {
            let err = request(body).action().unwrap_err();
            assert!(err.to_string().contains(says), "{err} should say {says}");
        }
    }
}
