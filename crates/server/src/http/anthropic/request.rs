//! An Anthropic Messages API request → a provider-neutral [`ModelRequest`].
//!
//! The wire types are typed so that a field of the wrong type is refused
//! with its path; fields not listed here (`metadata`, `cache_control`,
//! betas) are accepted and ignored. Sampling settings (`temperature`,
//! `top_p`, `top_k`) are accepted but not forwarded: the model layer does
//! not carry them. Of `tool_choice`, `none` offers the model no tools; the
//! others (`auto`, `any`, `tool`) are accepted and the model chooses. `stop_sequences` would change what the
//! client gets back, so asking for them is refused rather than ignored.

use std::sync::Arc;

use agentd_model::{ModelRequest, ToolSpec};
use agentd_protocol::{ContentBlock, IMAGE_MEDIA_TYPES, Message, Role, base64_image_block};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use super::error::AnthropicError;
use crate::config::Provider;
use crate::models::ResolvedModel;

/// `POST /v1/messages`. Fields read only to check their type are kept
/// anyway, so the document says what is accepted.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct MessagesRequest {
    #[serde(flatten)]
    pub conversation: Conversation,
    /// The most tokens of the answer, thinking included.
    #[schema(minimum = 1)]
    pub max_tokens: u32,
    /// Answer as server-sent events.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Accepted; not forwarded.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Accepted; not forwarded.
    #[serde(default)]
    pub top_p: Option<f64>,
    /// Accepted; not forwarded.
    #[serde(default)]
    pub top_k: Option<u32>,
    /// Not supported: refused unless empty.
    #[serde(default)]
    #[schema(max_items = 0)]
    pub stop_sequences: Option<Vec<String>>,
}

/// What the model is asked: `POST /v1/messages/count_tokens` takes just this.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)] // `tool_choice`: checked, not forwarded
pub struct Conversation {
    /// A configured model's name (`GET /v1/models`).
    pub model: String,
    /// The conversation so far, oldest first; at least one message.
    pub messages: Vec<WireMessage>,
    /// Text, or text blocks (joined by blank lines).
    #[serde(default)]
    pub system: Option<TextOrBlocks>,
    #[serde(default)]
    pub tools: Vec<WireTool>,
    /// `{"type": "none"}` offers the model no tools; `auto`, `any` and
    /// `tool` are accepted and not forwarded (see docs/api.md).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub tool_choice: Option<Map<String, Value>>,
    #[serde(default)]
    pub thinking: Option<WireThinking>,
}

impl MessagesRequest {
    /// The checks of what only `/v1/messages` takes; then the model request.
    pub fn into_model_request(self, target: &Target<'_>) -> Result<ModelRequest, AnthropicError> {
        if self.max_tokens == 0 {
            return Err(AnthropicError::invalid("max_tokens: must be at least 1"));
        }
        if self.stop_sequences.as_ref().is_some_and(|s| !s.is_empty()) {
            return Err(AnthropicError::invalid(
                "stop_sequences: not supported by this server; leave it out",
            ));
        }
        to_model_request(self.conversation, self.max_tokens, target)
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct WireMessage {
    /// `system`: a mid-conversation system message, added to the system prompt.
    pub role: WireRole,
    pub content: Content,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WireRole {
    User,
    Assistant,
    System,
}

/// A string (one text block) or content blocks.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Blocks(Vec<WireBlock>),
}

/// A string or text blocks.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum TextOrBlocks {
    Text(String),
    Blocks(Vec<TextBlock>),
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TextBlock {
    Text { text: String },
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(dead_code)] // `redacted_thinking`'s data: checked, then dropped
pub enum WireBlock {
    Text {
        text: String,
    },
    Image {
        source: ImageSource,
    },
    /// A PDF (`base64`) or plain text (`text`) source, as Anthropic's.
    Document {
        #[schema(value_type = Object)]
        source: Map<String, Value>,
        #[serde(default)]
        title: Option<String>,
    },
    ToolUse {
        id: String,
        name: String,
        #[schema(value_type = Object)]
        input: Map<String, Value>,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        content: Option<ToolResultContent>,
        #[serde(default)]
        is_error: Option<bool>,
    },
    Thinking {
        thinking: String,
        #[serde(default)]
        signature: Option<String>,
    },
    /// Dropped: no provider but Anthropic can read it back.
    RedactedThinking {
        data: String,
    },
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ImageSource {
    Base64 {
        #[schema(pattern = "^image/(png|jpeg|gif|webp)$")]
        media_type: String,
        data: String,
    },
    Url {
        url: String,
    },
}

/// A tool result's content: text, or text and image blocks.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ToolResultContent {
    Text(String),
    Blocks(Vec<ResultBlock>),
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResultBlock {
    Text { text: String },
    Image { source: ImageSource },
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct WireTool {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[schema(value_type = Object)]
    pub input_schema: Map<String, Value>,
}

/// `{"type": "enabled", "budget_tokens": N}`, or `disabled`/`adaptive`
/// (no budget asked for).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WireThinking {
    Enabled {
        #[schema(minimum = 1024)]
        budget_tokens: u32,
    },
    Disabled,
    Adaptive,
}

/// Anthropic's least thinking budget.
const MIN_THINKING_BUDGET: u32 = 1024;

/// The model a request goes to, as far as translating it goes.
pub struct Target<'a> {
    /// The provider's model name.
    pub model_name: &'a str,
    /// Its configured `max_output_tokens`: a caller's `max_tokens` is
    /// capped to it.
    pub max_output_tokens: u32,
    /// Its client asks for the thinking budget on top of `max_tokens`
    /// (Anthropic's); otherwise (OpenAI's) there is no budget to ask for
    /// and `max_tokens` is the whole answer's.
    pub thinking_on_top: bool,
}

impl<'a> From<&'a ResolvedModel> for Target<'a> {
    fn from(model: &'a ResolvedModel) -> Self {
        Self {
            model_name: &model.model_name,
            max_output_tokens: model.max_output_tokens,
            thinking_on_top: matches!(model.provider, Provider::Anthropic | Provider::ClaudeCode),
        }
    }
}

/// `request` for `target`: the whole context, the tools, `max_tokens`
/// (thinking included, as the caller's) and the thinking budget.
pub fn to_model_request(
    request: Conversation,
    max_tokens: u32,
    target: &Target<'_>,
) -> Result<ModelRequest, AnthropicError> {
    let thinking_budget = match request.thinking {
        Some(WireThinking::Enabled { budget_tokens }) => {
            if budget_tokens < MIN_THINKING_BUDGET {
                return Err(AnthropicError::invalid(format!(
                    "thinking.budget_tokens: must be at least {MIN_THINKING_BUDGET}"
                )));
            }
            if budget_tokens >= max_tokens {
                return Err(AnthropicError::invalid(
                    "thinking.budget_tokens: must be less than max_tokens",
                ));
            }
            Some(budget_tokens)
        }
        _ => None,
    };
    let mut system = request.system.map(join_system).unwrap_or_default();
    let mut messages = Vec::with_capacity(request.messages.len());
    for (i, message) in request.messages.into_iter().enumerate() {
        let at = format!("messages.{i}");
        let role = match message.role {
            WireRole::User => Role::User,
            WireRole::Assistant => Role::Assistant,
            WireRole::System => {
                push_paragraph(&mut system, &content_text(message.content, &at)?);
                continue;
            }
        };
        let content = match message.content {
            Content::Text(text) => vec![ContentBlock::Text { text }],
            Content::Blocks(blocks) => blocks_of(role, blocks, &at)?,
        };
        messages.push(Message { role, content });
    }
    if messages.is_empty() {
        return Err(AnthropicError::invalid(
            "messages: at least one user or assistant message is required",
        ));
    }
    let no_tools = request
        .tool_choice
        .as_ref()
        .is_some_and(|choice| choice.get("type").and_then(Value::as_str) == Some("none"));
    let offered = if no_tools { Vec::new() } else { request.tools };
    let tools = offered
        .into_iter()
        .map(|tool| ToolSpec {
            name: tool.name,
            description: tool.description.unwrap_or_default(),
            input_schema: Value::Object(tool.input_schema),
        })
        .collect();
    let total = max_tokens.min(target.max_output_tokens);
    let (max_tokens, thinking_budget) = match thinking_budget {
        // The client adds the budget back on top.
        Some(budget) if target.thinking_on_top && budget < total => (total - budget, Some(budget)),
        // No budget to ask for (or, capped, no room left for one): the
        // whole limit is the answer's.
        _ => (total, None),
    };
    Ok(ModelRequest {
        model: target.model_name.to_string(),
        system: (!system.is_empty()).then_some(system),
        messages: Arc::new(messages),
        tools: Arc::new(tools),
        max_tokens,
        thinking_budget,
        wire_cache: None,
    })
}

fn join_system(system: TextOrBlocks) -> String {
    match system {
        TextOrBlocks::Text(text) => text,
        TextOrBlocks::Blocks(blocks) => {
            let mut out = String::new();
            for TextBlock::Text { text } in blocks {
                push_paragraph(&mut out, &text);
            }
            out
        }
    }
}

fn push_paragraph(out: &mut String, text: &str) {
    if text.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(text);
}

/// The text of a system message: text blocks only.
fn content_text(content: Content, at: &str) -> Result<String, AnthropicError> {
    match content {
        Content::Text(text) => Ok(text),
        Content::Blocks(blocks) => {
            let mut out = String::new();
            for (j, block) in blocks.into_iter().enumerate() {
                match block {
                    WireBlock::Text { text } => push_paragraph(&mut out, &text),
                    _ => {
                        return Err(AnthropicError::invalid(format!(
                            "{at}.content.{j}: a system message holds text blocks only"
                        )));
                    }
                }
            }
            Ok(out)
        }
    }
}

fn blocks_of(
    role: Role,
    blocks: Vec<WireBlock>,
    at: &str,
) -> Result<Vec<ContentBlock>, AnthropicError> {
    let mut out = Vec::with_capacity(blocks.len());
    for (j, block) in blocks.into_iter().enumerate() {
        let at = format!("{at}.content.{j}");
        let misplaced = |what: &str, belongs: &str| {
            AnthropicError::invalid(format!("{at}: a {what} block belongs in {belongs} message"))
        };
        let block = match block {
            WireBlock::Text { text } => ContentBlock::Text { text },
            WireBlock::Image { source } if role == Role::User => image(source, &at)?,
            WireBlock::Image { .. } => return Err(misplaced("image", "a user")),
            WireBlock::Document { source, title } if role == Role::User => {
                document(source, title, &at)?
            }
            WireBlock::Document { .. } => return Err(misplaced("document", "a user")),
            WireBlock::ToolUse { id, name, input } if role == Role::Assistant => {
                ContentBlock::ToolUse {
                    id,
                    name,
                    input: Value::Object(input),
                }
            }
            WireBlock::ToolUse { .. } => return Err(misplaced("tool_use", "an assistant")),
            WireBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } if role == Role::User => tool_result(tool_use_id, content, is_error, &at)?,
            WireBlock::ToolResult { .. } => return Err(misplaced("tool_result", "a user")),
            WireBlock::Thinking {
                thinking,
                signature,
            } if role == Role::Assistant => ContentBlock::Thinking {
                thinking,
                // An empty signature is none: Anthropic refuses `""`.
                signature: signature.filter(|s| !s.is_empty()),
            },
            WireBlock::Thinking { .. } => return Err(misplaced("thinking", "an assistant")),
            WireBlock::RedactedThinking { .. } => continue,
        };
        out.push(block);
    }
    Ok(out)
}

fn image(source: ImageSource, at: &str) -> Result<ContentBlock, AnthropicError> {
    match source {
        ImageSource::Base64 { media_type, data } => {
            if !IMAGE_MEDIA_TYPES.contains(&media_type.as_str()) {
                return Err(AnthropicError::invalid(format!(
                    "{at}.source.media_type: must be one of {}",
                    IMAGE_MEDIA_TYPES.join(", ")
                )));
            }
            base64_image_block(&media_type, data)
                .map_err(|err| AnthropicError::invalid(format!("{at}.source: {err}")))
        }
        ImageSource::Url { url } => {
            // The provider fetches it: only public `https` URLs, never a
            // plain-http address inside a self-hosted server's network.
            let parsed = url::Url::parse(&url).ok();
            if parsed
                .as_ref()
                .is_none_or(|u| u.scheme() != "https" || u.host().is_none())
            {
                return Err(AnthropicError::invalid(format!(
                    "{at}.source.url: must be an https URL"
                )));
            }
            Ok(ContentBlock::Image {
                source: json!({"type": "url", "url": url}),
            })
        }
    }
}

/// A document: only inline sources (`base64` PDF, `text`), none the
/// provider would fetch.
fn document(
    source: Map<String, Value>,
    title: Option<String>,
    at: &str,
) -> Result<ContentBlock, AnthropicError> {
    match source.get("type").and_then(Value::as_str) {
        Some("base64" | "text") => Ok(ContentBlock::Document {
            source: Value::Object(source),
            title,
        }),
        _ => Err(AnthropicError::invalid(format!(
            "{at}.source.type: must be base64 or text"
        ))),
    }
}

fn tool_result(
    tool_use_id: String,
    content: Option<ToolResultContent>,
    is_error: Option<bool>,
    at: &str,
) -> Result<ContentBlock, AnthropicError> {
    let mut text = String::new();
    let mut images = Vec::new();
    match content {
        None => {}
        Some(ToolResultContent::Text(t)) => text = t,
        Some(ToolResultContent::Blocks(blocks)) => {
            for (k, block) in blocks.into_iter().enumerate() {
                match block {
                    ResultBlock::Text { text: t } => {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(&t);
                    }
                    ResultBlock::Image { source } => {
                        if let ContentBlock::Image { source } =
                            image(source, &format!("{at}.content.{k}"))?
                        {
                            images.push(source);
                        }
                    }
                }
            }
        }
    }
    Ok(ContentBlock::ToolResult {
        tool_use_id,
        content: text,
        is_error: is_error.unwrap_or(false),
        images,
    })
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
