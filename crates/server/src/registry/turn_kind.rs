//! What a turn does: a user message (text and attachments, with an optional
//! thinking budget and permission mode of its own) or a compaction; and how it is written into
//! the cluster's queue, whose one column is text.

use agentd_policy::permissions::PermissionMode;
use agentd_protocol::{ContentBlock, Message, Role};
use serde::{Deserialize, Serialize};

/// What a turn does.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnKind {
    /// A user message for the agent.
    Message(UserTurn),
    /// Compact the session's context (`POST …/compact`).
    Compact,
}

/// A user's message: its content blocks (text, images, documents) and the
/// thinking budget and permission mode asked for this turn only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserTurn {
    pub content: Vec<ContentBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// Checked when accepted: never looser than the profile's mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<PermissionMode>,
}

/// The message text that asks for a compaction instead of a conversation turn.
const COMPACT_TEXT: &str = "/compact";

/// Starts a queue entry holding a [`UserTurn`] as JSON; any other entry is
/// the message's plain text (as every entry was before attachments). A
/// control character no one types, and PostgreSQL's text takes it.
const QUEUED_JSON: &str = "\u{1}agentd-turn-v1\n";

impl TurnKind {
    /// A message as a user typed it: the text `/compact` compacts.
    pub fn from_text(text: String) -> Self {
        Self::from_blocks(vec![ContentBlock::Text { text }], None)
    }

    /// A message of `content`; one text block of only `/compact` (and no
    /// thinking budget) compacts, as typed text does.
    pub fn from_blocks(content: Vec<ContentBlock>, thinking_budget: Option<u32>) -> Self {
        let compact = matches!(content.as_slice(), [ContentBlock::Text { text }] if text.trim() == COMPACT_TEXT);
        if compact && thinking_budget.is_none() {
            TurnKind::Compact
        } else {
            TurnKind::Message(UserTurn {
                content,
                thinking_budget,
                permission_mode: None,
            })
        }
    }

    /// The same turn under `mode` (a compaction runs no tools: unchanged).
    pub fn with_permission_mode(mut self, mode: Option<PermissionMode>) -> Self {
        if let TurnKind::Message(turn) = &mut self {
            turn.permission_mode = mode;
        }
        self
    }

    /// The permission mode the message asked for, over the profile's.
    pub fn permission_mode(&self) -> Option<PermissionMode> {
        match self {
            TurnKind::Message(turn) => turn.permission_mode,
            TurnKind::Compact => None,
        }
    }

    /// The user message the turn starts with.
    pub fn message(&self) -> Message {
        let content = match self {
            TurnKind::Message(turn) => turn.content.clone(),
            TurnKind::Compact => vec![ContentBlock::Text {
                text: COMPACT_TEXT.into(),
            }],
        };
        Message {
            role: Role::User,
            content,
        }
    }

    /// The thinking budget the message asked for, over the profile's.
    pub fn thinking_budget(&self) -> Option<u32> {
        match self {
            TurnKind::Message(turn) => turn.thinking_budget,
            TurnKind::Compact => None,
        }
    }

    /// How the turn is written into the cluster's queue: plain text when
    /// that is all it is, else [`QUEUED_JSON`] and the turn as JSON.
    pub fn to_queue_text(&self) -> String {
        let turn = match self {
            TurnKind::Compact => return COMPACT_TEXT.into(),
            TurnKind::Message(turn) => turn,
        };
        if let ([ContentBlock::Text { text }], None, None) = (
            turn.content.as_slice(),
            turn.thinking_budget,
            turn.permission_mode,
        ) && !text.starts_with(QUEUED_JSON)
        {
            return text.clone();
        }
        // A `UserTurn` is plain data: serialising it cannot fail.
        let json = serde_json::to_string(turn).unwrap_or_default();
        format!("{QUEUED_JSON}{json}")
    }

    /// A queue entry read back (entries written before attachments are
    /// text). One marked as JSON that does not parse is an error: running
    /// its raw text would send the model something the user never wrote.
    pub fn from_queue_text(text: String) -> Result<Self, String> {
        match text.strip_prefix(QUEUED_JSON) {
            Some(json) => serde_json::from_str(json)
                .map(TurnKind::Message)
                .map_err(|err| format!("the queued message could not be read back: {err}")),
            None => Ok(Self::from_text(text)),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_message_of_only_compact_compacts_and_the_queue_text_round_trips() {
        assert_eq!(TurnKind::from_text(" /compact\n".into()), TurnKind::Compact);
        let message = TurnKind::from_text("/compact the logs, please".into());
        assert_eq!(
            message.message(),
            Message::user_text("/compact the logs, please")
        );
        let image = ContentBlock::Image {
            source: json!({"type": "base64", "media_type": "image/png", "data": "AA=="}),
        };
        let with_image = TurnKind::from_blocks(
            vec![
                ContentBlock::Text {
                    text: "look".into(),
                },
                image,
            ],
            Some(2048),
        );
        let sneaky = TurnKind::from_text(format!("{QUEUED_JSON}{{}}"));
        let read_only = TurnKind::from_text("look only".into())
            .with_permission_mode(Some(PermissionMode::ReadOnly));
        assert!(read_only.to_queue_text().starts_with(QUEUED_JSON));
        for kind in [TurnKind::Compact, message, with_image, sneaky, read_only] {
            let back = TurnKind::from_queue_text(kind.to_queue_text());
            assert_eq!(back, Ok(kind));
        }
    }

    #[test]
    fn old_text_entries_of_the_queue_still_read() {
        let kind = TurnKind::from_queue_text("fix the tests".into()).unwrap();
        assert_eq!(kind.message(), Message::user_text("fix the tests"));
        assert_eq!(kind.thinking_budget(), None);
        assert_eq!(
            TurnKind::from_queue_text("/compact".into()),
            Ok(TurnKind::Compact)
        );
    }

    #[test]
    fn a_queue_entry_marked_json_that_does_not_parse_is_an_error_not_text() {
        for broken in ["{", "{\"content\": 3}", ""] {
            let err = TurnKind::from_queue_text(format!("{QUEUED_JSON}{broken}")).unwrap_err();
            assert!(
                err.contains("the queued message could not be read back"),
                "{broken:?}: {err}"
            );
        }
    }
}
