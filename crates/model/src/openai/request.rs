//! `ModelRequest` → Chat Completions request body.
//!
//! Conversions from our Anthropic-shaped transcript:
//! - the system prompt becomes the first message, role `system`;
//! - a user message's tool results become `role: tool` messages (first, since
//!   they must follow the assistant message that called them), and its text
//!   and images one `user` message; a failed result's content is prefixed with
//!   `Error: ` because the format has no `is_error`; a `tool` message holds
//!   text only, so a result's images go into that `user` message (first,
//!   each after a line naming the call), as other clients do;
//! - a document becomes a `file` part (a PDF, as a data URL) or a text part;
//! - an assistant message becomes text `content` plus `tool_calls`, whose
//!   `arguments` is the input as a JSON string (a string input, i.e. invalid
//!   JSON the model sent, is passed back verbatim);
//! - thinking blocks are dropped: the format has no way to send them back.
//!
//! The output limit goes in `max_completion_tokens` for OpenAI reasoning models
//! (o-series, gpt-5), which reject `max_tokens`, and in `max_tokens` otherwise,
//! which every OpenAI-compatible server understands (see [`TokenLimitField`]).

use agentd_protocol::{ContentBlock, Message, Role};
use serde_json::{Map, Value, json};

use super::TokenLimitField;
use crate::ModelRequest;

pub(crate) fn body(request: &ModelRequest, limit_field: TokenLimitField) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in request.messages.iter() {
        match message.role {
            Role::User => user(message, &mut messages),
            Role::Assistant => messages.extend(assistant(message)),
        }
    }
    let field = match limit_field {
        TokenLimitField::MaxTokens => "max_tokens",
        TokenLimitField::MaxCompletionTokens => "max_completion_tokens",
        TokenLimitField::Auto if is_reasoning_model(&request.model) => "max_completion_tokens",
        TokenLimitField::Auto => "max_tokens",
    };
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        field: request.max_tokens,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.input_schema,
                    },
                })
            })
            .collect();
    }
    body
}

/// OpenAI models that accept only `max_completion_tokens`.
fn is_reasoning_model(model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model);
    ["o1", "o3", "o4", "gpt-5"]
        .iter()
        .any(|family| name.starts_with(family))
}

fn user(message: &Message, out: &mut Vec<Value>) {
    let mut parts = Vec::new();
    let mut tool_parts = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                images,
            } => {
                let content = if *is_error && !content.to_ascii_lowercase().starts_with("error") {
                    format!("Error: {content}")
                } else {
                    content.clone()
                };
                out.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}));
                let urls: Vec<String> = images.iter().filter_map(image_url).collect();
                if !urls.is_empty() {
                    let note = format!("The image(s) the tool call {tool_use_id} returned:");
                    tool_parts.push(json!({"type": "text", "text": note}));
                    tool_parts.extend(urls.into_iter().map(image_part));
                }
            }
            ContentBlock::Document { source, title } => parts.extend(document_part(source, title)),
            ContentBlock::Text { text } if !text.is_empty() => {
                parts.push(json!({"type": "text", "text": text}));
            }
            ContentBlock::Image { source } => parts.extend(image_url(source).map(image_part)),
            _ => {}
        }
    }
    // After every `tool` message: they must follow the assistant's calls.
    tool_parts.append(&mut parts);
    let parts = tool_parts;
    if parts.is_empty() {
        return;
    }
    // Plain string content when there are no images: the most widely
    // supported form among OpenAI-compatible servers.
    let content = if parts.iter().all(|p| p["type"] == "text") {
        let texts: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
        json!(texts.join("\n\n"))
    } else {
        Value::Array(parts)
    };
    out.push(json!({"role": "user", "content": content}));
}

fn image_part(url: String) -> Value {
    json!({"type": "image_url", "image_url": {"url": url}})
}

/// A document as a content part: a PDF as a `file` part with a data URL,
/// plain text as a text part.
fn document_part(source: &Value, title: &Option<String>) -> Option<Value> {
    let data = source["data"].as_str()?;
    match source["type"].as_str()? {
        "base64" => Some(json!({"type": "file", "file": {
            "filename": title.as_deref().unwrap_or("document.pdf"),
            "file_data": format!("data:{};base64,{data}", source["media_type"].as_str()?),
        }})),
        "text" => Some(json!({"type": "text", "text": data})),
        _ => None,
    }
}

/// An Anthropic image `source` as a URL: a data URL for base64 data.
fn image_url(source: &Value) -> Option<String> {
    match source["type"].as_str()? {
        "base64" => Some(format!(
            "data:{};base64,{}",
            source["media_type"].as_str()?,
            source["data"].as_str()?
        )),
        "url" => source["url"].as_str().map(str::to_string),
        _ => None,
    }
}

fn assistant(message: &Message) -> Option<Value> {
    let text = message.text();
    let tool_calls: Vec<Value> = message
        .tool_uses()
        .map(|call| {
            let arguments = match call.input {
                Value::String(raw) => raw.clone(),
                input => input.to_string(),
            };
            json!({
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": arguments},
            })
        })
        .collect();
    if text.is_empty() && tool_calls.is_empty() {
        return None;
    }
    let mut out = Map::new();
    out.insert("role".into(), json!("assistant"));
    out.insert(
        "content".into(),
        if text.is_empty() {
            Value::Null
        } else {
            json!(text)
        },
    );
    if !tool_calls.is_empty() {
        out.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    Some(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolSpec;

    fn request() -> ModelRequest {
        ModelRequest {
            model: "gpt-4o".into(),
            system: Some("be brief".into()),
            messages: std::sync::Arc::new(vec![
                Message::user_text("list files"),
                Message::assistant(vec![
                    ContentBlock::Thinking {
                        thinking: "hmm".into(),
                        signature: None,
                    },
                    ContentBlock::Text {
                        text: "Sure.".into(),
                    },
                    ContentBlock::ToolUse {
                        id: "call_1".into(),
                        name: "Bash".into(),
                        input: json!({"command": "ls"}),
                    },
                    ContentBlock::ToolUse {
                        id: "call_2".into(),
                        name: "Bash".into(),
                        input: json!("{\"command\": "),
                    },
                ]),
                Message {
                    role: Role::User,
                    content: vec![
                        ContentBlock::tool_result("call_1", "README.md", false),
                        ContentBlock::tool_result("call_2", "invalid JSON input", true),
                        ContentBlock::Text {
                            text: "and now?".into(),
                        },
                        ContentBlock::Image {
                            source: json!({"type": "base64", "media_type": "image/png",
                                           "data": "AA=="}),
                        },
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
    fn builds_the_chat_completions_body() {
        let body = body(&request(), TokenLimitField::Auto);
        assert_eq!(
            body,
            json!({
                "model": "gpt-4o",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "list files"},
                    {"role": "assistant", "content": "Sure.", "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "Bash", "arguments": "{\"command\":\"ls\"}"}},
                        {"id": "call_2", "type": "function",
                         "function": {"name": "Bash", "arguments": "{\"command\": "}},
                    ]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "README.md"},
                    {"role": "tool", "tool_call_id": "call_2",
                     "content": "Error: invalid JSON input"},
                    {"role": "user", "content": [
                        {"type": "text", "text": "and now?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
                    ]},
                ],
                "max_tokens": 1024,
                "tools": [{"type": "function", "function": {
                    "name": "Bash", "description": "run a command",
                    "parameters": {"type": "object"}}}],
                "stream": true,
                "stream_options": {"include_usage": true},
            })
        );
    }

    #[test]
    fn tool_result_images_follow_the_tool_messages_in_a_user_message() {
        let png = json!({"type": "base64", "media_type": "image/png", "data": "AA=="});
        let mut request = request();
        request.system = None;
        request.messages = std::sync::Arc::new(vec![Message {
            role: Role::User,
            content: vec![
                ContentBlock::ToolResult {
                    tool_use_id: "call_1".into(),
                    content: "a.png".into(),
                    is_error: false,
                    images: vec![png],
                },
                ContentBlock::Document {
                    source: json!({"type": "text", "media_type": "text/plain", "data": "notes"}),
                    title: None,
                },
            ],
        }]);
        let body = body(&request, TokenLimitField::Auto);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "tool", "tool_call_id": "call_1", "content": "a.png"},
                {"role": "user", "content": [
                    {"type": "text", "text": "The image(s) the tool call call_1 returned:"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
                    {"type": "text", "text": "notes"},
                ]},
            ])
        );
    }

    #[test]
    fn picks_the_token_limit_field() {
        let mut request = request();
        for (model, field) in [
            ("o3", "max_completion_tokens"),
            ("o4-mini", "max_completion_tokens"),
            ("gpt-5-mini", "max_completion_tokens"),
            ("openai/gpt-5", "max_completion_tokens"),
            ("gpt-4.1", "max_tokens"),
            ("llama3.1:8b", "max_tokens"),
        ] {
            request.model = model.into();
            let body = body(&request, TokenLimitField::Auto);
            assert_eq!(body[field], json!(1024), "{model}");
        }
        let body = body(&request, TokenLimitField::MaxCompletionTokens);
        assert!(body.get("max_tokens").is_none());
        assert_eq!(body["max_completion_tokens"], json!(1024));
    }

    #[test]
    fn thinking_only_messages_and_empty_system_are_dropped() {
        let mut request = request();
        request.system = None;
        request.tools = Default::default();
        request.messages = std::sync::Arc::new(vec![
            Message::user_text("hi"),
            Message::assistant(vec![ContentBlock::Thinking {
                thinking: "x".into(),
                signature: None,
            }]),
        ]);
        let body = body(&request, TokenLimitField::Auto);
        assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
        assert!(body.get("tools").is_none());
    }
}
