//! Conversation messages: what the model saw and said, losslessly.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::image::base64_image_source;

/// Who authored a message. Tool results travel in `User` messages, as in the
/// Anthropic Messages API.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// One message of a session's transcript.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
}

impl Message {
    pub fn user_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    pub fn assistant(content: Vec<ContentBlock>) -> Self {
        Self {
            role: Role::Assistant,
            content,
        }
    }

    /// All text blocks joined with newlines (thinking and tool blocks left out).
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let ContentBlock::Text { text } = block {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }

    /// The tool calls this message asks for, in order.
    pub fn tool_uses(&self) -> impl Iterator<Item = ToolUse<'_>> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolUse { id, name, input } => Some(ToolUse { id, name, input }),
            _ => None,
        })
    }
}

/// A borrowed view of a `ContentBlock::ToolUse`.
#[derive(Debug, Clone, Copy)]
pub struct ToolUse<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub input: &'a Value,
}

/// A block of message content. The shapes follow the Anthropic Messages API so
/// that a transcript converts to a request without loss.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// A tool call. `input` is the parsed JSON object; when the model sent input
    /// that is not valid JSON, it is kept as a JSON string holding the raw text
    /// so the engine can answer with a tool error.
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        #[serde(default)]
        is_error: bool,
        /// Images the tool gave back after its text (say, `Read` of a PNG),
        /// each an image `source` object as in [`ContentBlock::Image`].
        /// Absent from results stored before tools could return images.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Value>,
    },
    /// An image, kept as the provider's `source` object (base64 or URL).
    Image {
        source: Value,
    },
    /// A document (a PDF as base64, or plain text), kept as Anthropic's
    /// `source` object: `{type: "base64", media_type: "application/pdf",
    /// data}` or `{type: "text", media_type: "text/plain", data}`.
    Document {
        source: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
}

impl ContentBlock {
    /// A tool result of text only.
    pub fn tool_result(
        tool_use_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        ContentBlock::ToolResult {
            tool_use_id: tool_use_id.into(),
            content: content.into(),
            is_error,
            images: Vec::new(),
        }
    }

    /// A base64 image block of `media_type` (one of [`crate::IMAGE_MEDIA_TYPES`]).
    pub fn base64_image(media_type: &str, data: String) -> Self {
        ContentBlock::Image {
            source: base64_image_source(media_type, data),
        }
    }
}

/// Token counts of one model call or a sum of several.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }

    /// Tokens the model read for this call: the size of its context.
    pub fn context_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}
