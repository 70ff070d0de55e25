use agentd_model::{ModelRequest, StopReason};
use agentd_protocol::{ContentBlock, Role};
use serde_json::{Value, json};

use super::*;

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// An Anthropic-type target, which asks for thinking on top of `max_tokens`.
const ANTHROPIC: Target<'static> = Target {
    model_name: "gpt-x",
    max_output_tokens: 64_000,
    thinking_on_top: true,
};

fn convert_for(body: Value, target: &Target<'_>) -> Result<ModelRequest, AnthropicError> {
    let request: MessagesRequest = serde_json::from_value(body).unwrap();
    request.into_model_request(target)
}

fn convert(body: Value) -> Result<ModelRequest, AnthropicError> {
    convert_for(body, &ANTHROPIC)
}

fn message(role: &str, content: Value) -> Value {
    json!({"role": role, "content": content})
}

#[test]
fn a_whole_conversation_translates_block_by_block() {
    let request = convert(json!({
        "model": "fast", "max_tokens": 5000,
        "system": [{"type": "text", "text": "one", "cache_control": {"type": "ephemeral"}},
                   {"type": "text", "text": "two"}],
        "thinking": {"type": "enabled", "budget_tokens": 2000},
        "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "auto"},
        "metadata": {"user_id": "u"},
        "messages": [
            message("user", json!([{"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}])),
            message("assistant", json!([
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "redacted_thinking", "data": "xx"},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}])),
            message("user", json!([{"type": "tool_result", "tool_use_id": "t1", "is_error": true,
                "content": [{"type": "text", "text": "no such"}, {"type": "text", "text": "file"},
                            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]}])),
            message("system", json!("be brief")),
        ],
    }))
    .unwrap();
    assert_eq!(request.model, "gpt-x");
    assert_eq!(request.system.as_deref(), Some("one\n\ntwo\n\nbe brief"));
    // The budget comes out of max_tokens: the provider adds it back.
    assert_eq!(
        (request.max_tokens, request.thinking_budget),
        (3000, Some(2000))
    );
    assert_eq!(request.tools[0].name, "Bash");
    assert_eq!(request.tools[0].input_schema, json!({"type": "object"}));
    let messages = request.messages.as_ref();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[0].role, Role::User);
    assert!(
        matches!(&messages[0].content[1], ContentBlock::Image { source } if source["media_type"] == "image/png")
    );
    assert_eq!(
        messages[1].content,
        vec![
            ContentBlock::Thinking {
                thinking: "hmm".into(),
                signature: Some("sig".into())
            },
            ContentBlock::ToolUse {
                id: "t1".into(),
                name: "Bash".into(),
                input: json!({"command": "ls"})
            },
        ]
    );
    let ContentBlock::ToolResult {
        tool_use_id,
        content,
        is_error,
        images,
    } = &messages[2].content[0]
    else {
        panic!("{:?}", messages[2]);
    };
    assert_eq!(
        (tool_use_id.as_str(), content.as_str(), *is_error),
        ("t1", "no such\nfile", true)
    );
    assert_eq!(images.len(), 1);
}

#[test]
fn plain_strings_are_text_and_results_without_content_are_empty() {
    let request = convert(json!({"model": "m", "max_tokens": 10, "system": "sys",
        "messages": [message("user", json!("hi")),
            message("user", json!([{"type": "tool_result", "tool_use_id": "t"}]))]}))
    .unwrap();
    assert_eq!(request.system.as_deref(), Some("sys"));
    assert_eq!(
        request.messages[0].content,
        vec![ContentBlock::Text { text: "hi".into() }]
    );
    assert_eq!(
        request.messages[1].content,
        vec![ContentBlock::tool_result("t", "", false)]
    );
    assert_eq!(request.thinking_budget, None);
}

fn refusal(body: Value) -> String {
    let err = convert(body).expect_err("refused");
    assert_eq!(err.status, 400);
    err.message
}

#[test]
fn misplaced_or_unsupported_input_is_refused_with_where() {
    let base = |messages: Value| json!({"model": "m", "max_tokens": 10, "messages": messages});
    let text = refusal(base(json!([message(
        "user",
        json!([{"type": "tool_use", "id": "a", "name": "B", "input": {}}])
    )])));
    assert!(
        text.contains("messages.0.content.0") && text.contains("assistant"),
        "{text}"
    );
    let text = refusal(base(json!([message(
        "assistant",
        json!([{"type": "tool_result", "tool_use_id": "a"}])
    )])));
    assert!(text.contains("tool_result"), "{text}");
    let text = refusal(base(json!([message(
        "user",
        json!([{"type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG}}])
    )])));
    assert!(text.contains("messages.0.content.0.source"), "{text}");
    let text = refusal(base(json!([])));
    assert!(text.contains("at least one"), "{text}");
    let mut body = base(json!([message("user", json!("x"))]));
    body["stop_sequences"] = json!(["END"]);
    assert!(refusal(body).contains("stop_sequences"));
    let mut body = base(json!([message("user", json!("x"))]));
    body["max_tokens"] = json!(0);
    assert!(refusal(body).contains("max_tokens"));
    let mut body = base(json!([message("user", json!("x"))]));
    body["thinking"] = json!({"type": "enabled", "budget_tokens": 2048});
    assert!(refusal(body).contains("less than max_tokens"));
}

#[test]
fn fields_of_the_wrong_type_do_not_parse() {
    for body in [
        json!({"model": "m", "messages": []}),
        json!({"model": "m", "max_tokens": -1, "messages": []}),
        json!({"model": "m", "max_tokens": 1, "messages": [{"role": "bot", "content": "x"}]}),
        json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "video"}]}]}),
        json!({"model": "m", "max_tokens": 1, "messages": [], "system": [{"type": "image"}]}),
        json!({"model": "m", "max_tokens": 1, "messages": [], "temperature": "hot"}),
    ] {
        assert!(
            serde_json::from_value::<MessagesRequest>(body.clone()).is_err(),
            "{body}"
        );
    }
}

#[test]
fn stop_reasons_keep_their_names() {
    use agentd_model::anthropic::wire::stop_reason;
    assert_eq!(stop_reason(StopReason::EndTurn), "end_turn");
    assert_eq!(stop_reason(StopReason::ToolUse), "tool_use");
    assert_eq!(stop_reason(StopReason::MaxTokens), "max_tokens");
    assert_eq!(stop_reason(StopReason::StopSequence), "stop_sequence");
}

#[test]
fn openai_targets_get_the_whole_max_tokens_and_every_target_its_cap() {
    let body = json!({"model": "m", "max_tokens": 5000,
        "thinking": {"type": "enabled", "budget_tokens": 2000},
        "messages": [message("user", json!("hi"))]});
    let openai = Target {
        thinking_on_top: false,
        ..ANTHROPIC
    };
    let request = convert_for(body.clone(), &openai).unwrap();
    assert_eq!((request.max_tokens, request.thinking_budget), (5000, None));
    // Capped at the model's max_output_tokens, thinking included.
    let small = Target {
        max_output_tokens: 3000,
        ..ANTHROPIC
    };
    let request = convert_for(body.clone(), &small).unwrap();
    assert_eq!(
        (request.max_tokens, request.thinking_budget),
        (1000, Some(2000))
    );
    let tiny = Target {
        max_output_tokens: 1500,
        ..ANTHROPIC
    };
    let request = convert_for(body, &tiny).unwrap();
    assert_eq!((request.max_tokens, request.thinking_budget), (1500, None));
}

#[test]
fn tool_choice_none_offers_no_tools_and_empty_signatures_are_none() {
    let request = convert(json!({"model": "m", "max_tokens": 10,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "none"},
        "messages": [message("user", json!("hi")),
            message("assistant", json!([{"type": "thinking", "thinking": "t", "signature": ""}])),
            message("user", json!("again"))]}))
    .unwrap();
    assert!(request.tools.is_empty());
    assert_eq!(
        request.messages[1].content,
        vec![ContentBlock::Thinking {
            thinking: "t".into(),
            signature: None
        }]
    );
}

#[test]
fn only_https_urls_and_inline_documents_are_forwarded() {
    let with = |block: Value| json!({"model": "m", "max_tokens": 10, "messages": [message("user", json!([block]))]});
    let image = |url: &str| with(json!({"type": "image", "source": {"type": "url", "url": url}}));
    for url in ["http://10.0.0.1/x.png", "file:///etc/passwd", "not a url"] {
        assert!(refusal(image(url)).contains("https"), "{url}");
    }
    assert!(convert(image("https://example.com/cat.png")).is_ok());
    let document = |source: Value| with(json!({"type": "document", "source": source}));
    let url_doc = document(json!({"type": "url", "url": "https://example.com/a.pdf"}));
    assert!(refusal(url_doc).contains("base64 or text"));
    let text_doc = document(json!({"type": "text", "media_type": "text/plain", "data": "hi"}));
    assert!(convert(text_doc).is_ok());
}
