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

use agentd_protocol::{ContentBlock, Message, Role};
use serde_json::{Map, Value, json};

use crate::ModelRequest;

pub(crate) fn body(request: &ModelRequest, prompt_caching: bool) -> Value {
    let mut messages: Vec<Value> = request.messages.iter().filter_map(message).collect();
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.input_schema,
            })
        })
        .collect();
    if prompt_caching {
        if let Some(tool) = tools.last_mut() {
            mark_cached(tool);
        }
        let last_block = messages
            .last_mut()
            .and_then(|m| m.get_mut("content"))
            .and_then(Value::as_array_mut)
            .and_then(|blocks| {
                blocks
                    .iter_mut()
                    .rev()
                    .find(|b| b.get("type").and_then(Value::as_str) != Some("thinking"))
            });
        if let Some(block) = last_block {
            mark_cached(block);
        }
    }

    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("max_tokens".into(), json!(request.max_tokens));
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        body.insert("system".into(), json!(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), json!(true));
    Value::Object(body)
}

fn mark_cached(value: &mut Value) {
    if let Some(object) = value.as_object_mut() {
        object.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

fn message(message: &Message) -> Option<Value> {
    let content: Vec<Value> = message.content.iter().filter_map(block).collect();
    if content.is_empty() {
        return None;
    }
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    Some(json!({"role": role, "content": content}))
}

fn block(block: &ContentBlock) -> Option<Value> {
    Some(match block {
        ContentBlock::Text { text } if text.is_empty() => return None,
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::Thinking {
            thinking,
            signature: Some(signature),
        } => json!({"type": "thinking", "thinking": thinking, "signature": signature}),
        ContentBlock::Thinking {
            signature: None, ..
        } => return None,
        ContentBlock::ToolUse { id, name, input } => {
            let input = if input.is_object() {
                input.clone()
            } else {
                json!({})
            };
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => json!({
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": content,
            "is_error": is_error,
        }),
        ContentBlock::Image { source } => json!({"type": "image", "source": source}),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolSpec;

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
                        ContentBlock::ToolResult {
                            tool_use_id: "toolu_1".into(),
                            content: "README.md".into(),
                            is_error: false,
                        },
                        ContentBlock::ToolResult {
                            tool_use_id: "toolu_2".into(),
                            content: "invalid JSON".into(),
                            is_error: true,
                        },
                    ],
                },
            ]),
            tools: vec![ToolSpec {
                name: "Bash".into(),
                description: "run a command".into(),
                input_schema: json!({"type": "object"}),
            }],
            max_tokens: 1024,
        }
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
        request.tools.clear();
        request.messages = std::sync::Arc::new(vec![
            Message::user_text("hi"),
            Message::assistant(vec![ContentBlock::Thinking {
                thinking: "x".into(),
                signature: None,
            }]),
        ]);
        let body = body(&request, true);
        assert!(body.get("system").is_none());
        assert!(body.get("tools").is_none());
        assert_eq!(body["messages"].as_array().map(Vec::len), Some(1));
    }
}
