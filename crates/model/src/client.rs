use std::pin::Pin;
use std::sync::Arc;

use agentd_protocol::{ContentBlock, Message, Usage};
use async_trait::async_trait;
use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ModelError;

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// One model call: the whole context, provider-neutral.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The provider's model name, e.g. `claude-sonnet-4-5` or `gpt-4o`.
    pub model: String,
    pub system: Option<String>,
    /// Shared, not copied: an agent loop sends a growing transcript many times.
    pub messages: Arc<Vec<Message>>,
    /// Shared too: the same for every call of an agent.
    pub tools: Arc<Vec<ToolSpec>>,
    pub max_tokens: u32,
    /// Extended thinking: tokens the model may think in before it answers
    /// (Anthropic's `thinking.budget_tokens`); `None`: no thinking asked for.
    pub thinking_budget: Option<u32>,
    /// The transcript's messages as earlier calls serialised them (see
    /// [`crate::WireCache`]); `None`: serialised whole.
    pub wire_cache: Option<Arc<crate::WireCache>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    Refusal,
    Other,
}

/// The assembled result of one model call.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    /// Content blocks in order. A tool call whose input was not valid JSON has its
    /// raw text as a JSON string in `input`.
    pub content: Vec<ContentBlock>,
    pub stop_reason: StopReason,
    pub usage: Usage,
}

/// What a model stream yields: deltas as they arrive, then exactly one
/// `Completed` as the last item (or an error, after which nothing follows).
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// `index` is the content block index the delta belongs to.
    TextDelta {
        index: u32,
        text: String,
    },
    ThinkingDelta {
        index: u32,
        text: String,
    },
    Completed(ModelResponse),
}

pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ModelError>> + Send>>;

/// A model provider. `stream` returns once the response has started (after any
/// retries of the initial request); failures mid-stream arrive as stream items
/// and are not retried, since deltas may already have been shown.
#[async_trait]
pub trait ModelClient: Send + Sync {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError>;
}
