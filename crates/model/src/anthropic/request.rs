//! `ModelRequest` → Messages API request body.
//!
//! Our `Message`/`ContentBlock` follow Anthropic's shapes, so this is mostly a
//! copy, with these adjustments:
//! - A `tool_use` whose `input` is not a JSON object (the engine keeps invalid
//!   model JSON as a string) is sent with input `{}`: the API requires an
//!   object, and the tool result that follows already tells the model what was
//!   wrong with its call.
//! - `thinking` blocks without a signature (e.g. from another provider) are
//!   dropped: the API rejects them.
//! - Empty text blocks are dropped (the API rejects them), and so are messages
//!   left with no content.
//! - With prompt caching on, the last tool and the last block of the last
//!   message carry `cache_control` breakpoints, so each call of an agent loop
//!   reads the previous call's prefix from the cache.

//!
//! The body borrows from the request and is serialised straight to bytes: the
//! transcript is sent whole at every call, so no copy of it is built, and
//! with the request's [`WireCache`] only the messages added since the last
//! call are serialised.

use agentd_protocol::{ContentBlock, Message, Role};
use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::wire_cache::Kept;
use crate::{ModelError, ModelRequest, ToolSpec, WireCache};

/// A Messages API request body, borrowing from a [`ModelRequest`].
#[derive(Serialize)]
pub(crate) struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<&'a str>,
    messages: Vec<Wire<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    stream: bool,
}

/// `{"type": "enabled", "budget_tokens": N}`.
#[derive(Serialize)]
struct Thinking {
    r#type: &'static str,
    budget_tokens: u32,
}

/// A message of the body: serialised by an earlier call, or now.
#[derive(Serialize)]
#[serde(untagged)]
enum Wire<'a> {
    Kept(&'a RawValue),
    Fresh(WireMessage<'a>),
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Cached<WireBlock<'a>>>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Ephemeral>,
}

/// `{"type": "ephemeral"}`: a prompt-cache breakpoint.
#[derive(Serialize, Clone, Copy)]
struct Ephemeral {
    r#type: &'static str,
}

const EPHEMERAL: Ephemeral = Ephemeral {
    r#type: "ephemeral",
};

/// A block and, at a cache breakpoint, its `cache_control`.
#[derive(Serialize)]
struct Cached<T> {
    #[serde(flatten)]
    block: T,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Ephemeral>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock<'a> {
    Text {
        text: &'a str,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: ToolResultContent<'a>,
        is_error: bool,
    },
    Image {
        source: &'a Value,
    },
    Document {
        source: &'a Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<&'a str>,
    },
}

/// A `tool_result`'s `content`: its text, or with images, an array of a
/// text block and image blocks.
#[derive(Serialize)]
#[serde(untagged)]
enum ToolResultContent<'a> {
    Text(&'a str),
    Blocks(Vec<WireBlock<'a>>),
}

fn tool_result_content<'a>(text: &'a str, images: &'a [Value]) -> ToolResultContent<'a> {
    if images.is_empty() {
        return ToolResultContent::Text(text);
    }
    // The API rejects empty text blocks.
    let text = (!text.is_empty()).then_some(WireBlock::Text { text });
    let images = images.iter().map(|source| WireBlock::Image { source });
    ToolResultContent::Blocks(text.into_iter().chain(images).collect())
}

/// What a `tool_use` with a non-object input is sent with.
static EMPTY_OBJECT: std::sync::LazyLock<Value> =
    std::sync::LazyLock::new(|| Value::Object(Default::default()));

/// The request's body as sent: what its [`WireCache`] keeps is not
/// serialised again. (Debug builds check it against a whole serialisation.)
pub(crate) fn body_bytes(
    request: &ModelRequest,
    prompt_caching: bool,
) -> Result<Bytes, ModelError> {
    let Some(cache) = request.wire_cache.as_deref() else {
        return crate::sse::body_bytes(&body(request, prompt_caching, None));
    };
    let Ok(kept) = kept(cache, &request.messages) else {
        // Serialised whole, it fails with the reason.
        return crate::sse::body_bytes(&body(request, prompt_caching, None));
    };
    // What is kept, and room for the rest (tools, system prompt, the last
    // message).
    let capacity = kept.wire().map(|raw| raw.get().len() + 1).sum::<usize>() + (64 << 10);
    let bytes =
        crate::sse::body_bytes_sized(&body(request, prompt_caching, Some(&kept)), capacity)?;
    debug_assert_eq!(
        bytes,
        crate::sse::body_bytes(&body(request, prompt_caching, None))?,
        "a kept message is not what the transcript has now"
    );
    Ok(bytes)
}

fn kept<'c>(
    cache: &'c WireCache,
    messages: &[Message],
) -> serde_json::Result<std::sync::MutexGuard<'c, Kept>> {
    cache.prefix(messages, |message| {
        self::message(message)
            .map(|wire| serde_json::value::to_raw_value(&wire))
            .transpose()
    })
}

/// The body, with `kept` (the serialised forms of all messages but the
/// last) where it can serve: the last message is made now, with its cache
/// breakpoint.
pub(crate) fn body<'a>(
    request: &'a ModelRequest,
    prompt_caching: bool,
    kept: Option<&'a Kept>,
) -> Body<'a> {
    let last = request.messages.last().and_then(message);
    let mut messages: Vec<Wire<'a>> = match (kept, last) {
        (Some(kept), Some(last)) => kept
            .wire()
            .map(Wire::Kept)
            .chain([Wire::Fresh(last)])
            .collect(),
        _ => request
            .messages
            .iter()
            .filter_map(message)
            .map(Wire::Fresh)
            .collect(),
    };
    let mut tools: Vec<WireTool<'_>> = request.tools.iter().map(tool).collect();
    if prompt_caching {
        if let Some(tool) = tools.last_mut() {
            tool.cache_control = Some(EPHEMERAL);
        }
        // The last message is always made now (see `messages` above).
        let last_block = match messages.last_mut() {
            Some(Wire::Fresh(last)) => last
                .content
                .iter_mut()
                .rev()
                .find(|b| !matches!(b.block, WireBlock::Thinking { .. })),
            _ => None,
        };
        if let Some(block) = last_block {
            block.cache_control = Some(EPHEMERAL);
        }
    }
    let thinking = request.thinking_budget.map(|budget_tokens| Thinking {
        r#type: "enabled",
        budget_tokens,
    });
    Body {
        model: &request.model,
        // The budget comes out of `max_tokens`: the answer keeps its own.
        max_tokens: request
            .max_tokens
            .saturating_add(request.thinking_budget.unwrap_or(0)),
        thinking,
        system: request.system.as_deref().filter(|s| !s.is_empty()),
        messages,
        tools,
        stream: true,
    }
}

fn tool(tool: &ToolSpec) -> WireTool<'_> {
    WireTool {
        name: &tool.name,
        description: &tool.description,
        input_schema: &tool.input_schema,
        cache_control: None,
    }
}

fn message(message: &Message) -> Option<WireMessage<'_>> {
    let content: Vec<_> = message
        .content
        .iter()
        .filter_map(block)
        .map(|block| Cached {
            block,
            cache_control: None,
        })
        .collect();
    if content.is_empty() {
        return None;
    }
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    Some(WireMessage { role, content })
}

fn block(block: &ContentBlock) -> Option<WireBlock<'_>> {
    Some(match block {
        ContentBlock::Text { text } if text.is_empty() => return None,
        ContentBlock::Text { text } => WireBlock::Text { text },
        // An empty signature is none: Anthropic refuses `""`.
        ContentBlock::Thinking {
            thinking,
            signature: Some(signature),
        } if !signature.is_empty() => WireBlock::Thinking {
            thinking,
            signature,
        },
        ContentBlock::Thinking { .. } => return None,
        ContentBlock::ToolUse { id, name, input } => WireBlock::ToolUse {
            id,
            name,
            input: if input.is_object() {
                input
            } else {
                &EMPTY_OBJECT
            },
        },
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
            images,
        } => WireBlock::ToolResult {
            tool_use_id,
            content: tool_result_content(content, images),
            is_error: *is_error,
        },
        ContentBlock::Image { source } => WireBlock::Image { source },
        ContentBlock::Document { source, title } => WireBlock::Document {
            source,
            title: title.as_deref(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The body as it goes on the wire.
    fn body(request: &ModelRequest, prompt_caching: bool) -> Value {
        serde_json::to_value(super::body(request, prompt_caching, None)).unwrap()
    }

    fn request() -> ModelRequest {
        ModelRequest {
            model: "claude-sonnet-4-5".into(),
            system: Some("be brief".into()),
            messages: std::sync::Arc::new(vec![
                Message::user_text("list files"),
                Message::assistant(vec![
                    ContentBlock::Thinking {
                        thinking: "hmm".into(),
                        signature: Some("sig".into()),
                    },
                    ContentBlock::Thinking {
                        thinking: "unsigned".into(),
                        signature: None,
                    },
                    ContentBlock::Text { text: "".into() },
                    ContentBlock::ToolUse {
                        id: "toolu_1".into(),
                        name: "Bash".into(),
                        input: json!({"command": "ls"}),
                    },
                    ContentBlock::ToolUse {
                        id: "toolu_2".into(),
                        name: "Bash".into(),
                        input: json!("{\"command\": "),
                    },
                ]),
                Message {
                    role: Role::User,
                    content: vec![
                        ContentBlock::tool_result("toolu_1", "README.md", false),
                        ContentBlock::tool_result("toolu_2", "invalid JSON", true),
                    ],
                },
            ]),
            tools: std::sync::Arc::new(vec![ToolSpec {
                name: "Bash".into(),
                description: "run a command".into(),
                input_schema: json!({"type": "object"}),
            }]),
            max_tokens: 1024,
            thinking_budget: None,
            wire_cache: None,
        }
    }

    #[test]
    fn a_thinking_budget_is_asked_for_on_top_of_the_answer() {
        let mut with = request();
        with.thinking_budget = Some(2048);
        let sent = body(&with, false);
        assert_eq!(
            sent["thinking"],
            json!({"type": "enabled", "budget_tokens": 2048})
        );
        assert_eq!(sent["max_tokens"], 1024 + 2048);
        assert!(body(&request(), false).get("thinking").is_none());
    }

    #[test]
    fn builds_the_messages_body() {
        let body = body(&request(), false);
        assert_eq!(
            body,
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 1024,
                "system": "be brief",
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "list files"}]},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                        {"type": "tool_use", "id": "toolu_1", "name": "Bash",
                         "input": {"command": "ls"}},
                        {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1",
                         "content": "README.md", "is_error": false},
                        {"type": "tool_result", "tool_use_id": "toolu_2",
                         "content": "invalid JSON", "is_error": true},
                    ]},
                ],
                "tools": [{"name": "Bash", "description": "run a command",
                           "input_schema": {"type": "object"}}],
                "stream": true,
            })
        );
    }

    #[test]
    fn tool_result_images_and_documents_keep_anthropic_shapes() {
        let png = json!({"type": "base64", "media_type": "image/png", "data": "AA=="});
        let pdf = json!({"type": "base64", "media_type": "application/pdf", "data": "JVBE"});
        let mut request = request();
        request.messages = std::sync::Arc::new(vec![Message {
            role: Role::User,
            content: vec![
                ContentBlock::ToolResult {
                    tool_use_id: "toolu_1".into(),
                    content: "a.png".into(),
                    is_error: false,
                    images: vec![png.clone()],
                },
                ContentBlock::Document {
                    source: pdf.clone(),
                    title: Some("spec.pdf".into()),
                },
            ],
        }]);
        let sent = body(&request, false);
        assert_eq!(
            sent["messages"][0]["content"],
            json!([
                {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": false, "content": [
                    {"type": "text", "text": "a.png"},
                    {"type": "image", "source": png},
                ]},
                {"type": "document", "source": pdf, "title": "spec.pdf"},
            ])
        );
    }

    #[test]
    fn marks_cache_breakpoints() {
        let body = body(&request(), true);
        let cached = json!({"type": "ephemeral"});
        assert_eq!(body["tools"][0]["cache_control"], cached);
        assert_eq!(body["messages"][2]["content"][1]["cache_control"], cached);
        assert!(
            body["messages"][2]["content"][0]
                .get("cache_control")
                .is_none()
        );
        assert!(
            body["messages"][0]["content"][0]
                .get("cache_control")
                .is_none()
        );
    }

    #[test]
    fn omits_empty_system_tools_and_messages() {
        let mut request = request();
        request.system = Some(String::new());
        request.tools = Default::default();
        request.messages = std::sync::Arc::new(vec![
            Message::user_text("hi"),
            Message::assistant(vec![
                ContentBlock::Thinking {
                    thinking: "x".into(),
                    signature: None,
                },
                ContentBlock::Thinking {
                    thinking: "y".into(),
                    signature: Some(String::new()),
                },
            ]),
        ]);
        let body = body(&request, true);
        assert!(body.get("system").is_none());
        assert!(body.get("tools").is_none());
        assert_eq!(body["messages"].as_array().map(Vec::len), Some(1));
    }
}
