//! Token estimates where no provider counted: `count_tokens`, and what a
//! call that never completed (the client went away, the stream broke) is
//! charged — its input, and the output that had arrived.

use agentd_model::ModelRequest;
use agentd_model::scripted::estimate_tokens;
use agentd_protocol::{ContentBlock, Usage};

/// What an image costs in input, whatever its size: Anthropic's largest
/// images come to about this many tokens. Its base64 data is not text.
const IMAGE_TOKENS: u64 = 1600;

/// The input tokens of `request` (about four characters a token).
pub fn input_tokens(request: &ModelRequest) -> u64 {
    let mut chars = request.system.as_deref().map_or(0, str::len);
    let mut images = 0;
    for block in request.messages.iter().flat_map(|m| &m.content) {
        let (text, pictures) = block_size(block);
        chars += text;
        images += pictures;
    }
    chars += serde_json::to_string(request.tools.as_ref()).map_or(0, |s| s.len());
    estimate_tokens(chars) + images * IMAGE_TOKENS
}

/// The characters of text in `block`, and the images it holds.
fn block_size(block: &ContentBlock) -> (usize, u64) {
    match block {
        ContentBlock::Text { text } => (text.len(), 0),
        ContentBlock::Thinking { thinking, .. } => (thinking.len(), 0),
        ContentBlock::ToolUse { name, input, .. } => (name.len() + input.to_string().len(), 0),
        ContentBlock::ToolResult {
            content, images, ..
        } => (content.len(), images.len() as u64),
        ContentBlock::Image { .. } => (0, 1),
        // A text document is its text; a PDF is counted by its size, as
        // its pages' text is about as long as its base64.
        ContentBlock::Document { source, .. } => (source["data"].as_str().map_or(0, str::len), 0),
    }
}

/// What a call that did not complete is charged: its whole input, and the
/// output that had arrived.
pub fn incomplete(input_tokens: u64, output_chars: usize) -> Usage {
    Usage {
        input_tokens,
        output_tokens: if output_chars == 0 {
            0
        } else {
            estimate_tokens(output_chars)
        },
        ..Usage::default()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use agentd_protocol::Message;
    use serde_json::json;

    use super::*;

    #[test]
    fn images_count_as_images_not_as_their_base64() {
        let data = "A".repeat(400_000);
        let image = ContentBlock::Image {
            source: json!({"type": "base64", "media_type": "image/png", "data": data}),
        };
        let request = ModelRequest {
            model: "m".into(),
            system: Some("abcd".into()),
            messages: Arc::new(vec![Message {
                role: agentd_protocol::Role::User,
                content: vec![
                    ContentBlock::Text {
                        text: "1234".into(),
                    },
                    image,
                ],
            }]),
            tools: Arc::default(),
            max_tokens: 10,
            thinking_budget: None,
            wire_cache: None,
        };
        // 8 characters of text and "[]" of tools: 3 tokens, and one image.
        assert_eq!(input_tokens(&request), 3 + IMAGE_TOKENS);
        assert_eq!(incomplete(7, 0).output_tokens, 0);
        assert_eq!(incomplete(7, 9).output_tokens, 3);
    }
}
