//! An MCP `CallToolResult` as the text-only [`ToolResult`] the model sees.
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

use crate::ToolResult;

/// Text blocks as they are; images and audio as a one-line description;
/// embedded resources as their text (or a description of a blob); resource
/// links as their URI; structured content as JSON when there is no content.
/// `isError` makes it an error result.
pub(crate) fn to_tool_result(result: CallToolResult) -> ToolResult {
    let mut parts: Vec<String> = result.content.into_iter().map(describe).collect();
    if parts.is_empty()
        && let Some(structured) = result.structured_content
    {
        parts.push(structured.to_string());
    }
    if parts.iter().all(|part| part.is_empty()) {
        parts = vec!["(no output)".to_string()];
    }
    let content = parts.join("\n");
    let is_error = result.is_error == Some(true);
    ToolResult {
        content,
        is_error,
        images: Vec::new(),
    }
}

fn describe(block: ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text,
        ContentBlock::Image(image) => format!(
            "[image: {}, {} bytes base64]",
            image.mime_type,
            image.data.len()
        ),
        ContentBlock::Audio(audio) => format!(
            "[audio: {}, {} bytes base64]",
            audio.mime_type,
            audio.data.len()
        ),
        ContentBlock::Resource(embedded) => match embedded.resource {
            ResourceContents::TextResourceContents { text, .. } => text,
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource {uri} ({}), {} bytes]",
                mime_type.as_deref().unwrap_or("unknown type"),
                decoded_len(&blob)
            ),
            other => serde_json::to_string(&other).unwrap_or_default(),
        },
        ContentBlock::ResourceLink(link) => link.uri,
        // Kinds newer than this code: their JSON beats dropping them.
        other => serde_json::to_string(&other).unwrap_or_default(),
    }
}

/// Size of the data a base64 string encodes, without decoding it.
fn decoded_len(base64: &str) -> usize {
    let trimmed = base64.trim_end_matches('=');
    let significant = trimmed.bytes().filter(|b| !b.is_ascii_whitespace()).count();
    significant * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn map(result: Value) -> ToolResult {
        to_tool_result(serde_json::from_value(result).unwrap())
    }

    #[test]
    fn content_blocks_become_text_lines() {
        let result = map(json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAAAAAA", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "mimeType": "application/zip", "blob": "AAECAw=="}},
            {"type": "resource", "resource": {"uri": "file:///c", "blob": "AAE="}},
            {"type": "resource_link", "uri": "https://example.com/x", "name": "x"},
        ]}));
        assert_eq!(
            result,
            ToolResult::ok(
                "hello\n[image: image/png, 4 bytes base64]\n[audio: audio/wav, 8 bytes base64]\n\
                 inside\n[resource file:///b.bin (application/zip), 4 bytes]\n\
                 [resource file:///c (unknown type), 2 bytes]\nhttps://example.com/x"
            )
        );
    }

    #[test]
    fn is_error_and_structured_content() {
        let failed = map(json!({"content": [{"type": "text", "text": "boom"}], "isError": true}));
        assert_eq!(failed, ToolResult::error("boom"));
        let structured = map(json!({"content": [], "structuredContent": {"sum": 3}}));
        assert_eq!(structured, ToolResult::ok(r#"{"sum":3}"#));
        let both = map(json!({
            "content": [{"type": "text", "text": "3"}],
            "structuredContent": {"sum": 3}
        }));
        assert_eq!(both, ToolResult::ok("3"));
        assert_eq!(map(json!({"content": []})), ToolResult::ok("(no output)"));
    }
}
