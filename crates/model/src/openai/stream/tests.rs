use bytes::Bytes;
use futures::StreamExt;
use serde_json::json;

use super::*;
use crate::sse::drive;

async fn run(body: &str, chunk: usize) -> Vec<Result<ModelEvent, ModelError>> {
    let chunks: Vec<Result<Bytes, std::io::Error>> = body
        .as_bytes()
        .chunks(chunk)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    drive(futures::stream::iter(chunks), Parser::new())
        .collect()
        .await
}

fn completed(events: &[Result<ModelEvent, ModelError>]) -> ModelResponse {
    match events.last() {
        Some(Ok(ModelEvent::Completed(response))) => response.clone(),
        other => panic!("no Completed at the end: {other:?}"),
    }
}

fn sse(chunks: &[Value]) -> String {
    chunks.iter().map(|c| format!("data: {c}\n\n")).collect()
}

fn delta(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})
}

fn tool_turn() -> String {
    let mut body = sse(&[
        delta(json!({"role": "assistant", "content": ""}), None),
        delta(json!({"reasoning_content": "Think"}), None),
        delta(json!({"reasoning_content": "ing."}), None),
        delta(json!({"content": "Listing "}), None),
        delta(json!({"content": "files ✓."}), None),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                   "function": {"name": "Bash", "arguments": ""}}]}),
            None,
        ),
        delta(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"comm"}}]}),
            None,
        ),
        delta(
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                                   "function": {"name": "Read", "arguments": "{\"file_path\""}}]}),
            None,
        ),
        delta(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "and\": \"ls\"}"}}]}),
            None,
        ),
        delta(
            json!({"tool_calls": [{"index": 1, "function": {"arguments": ": \"a.md\"}"}}]}),
            None,
        ),
        delta(json!({}), Some("tool_calls")),
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
               "usage": {"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240,
                         "prompt_tokens_details": {"cached_tokens": 1000}}}),
    ]);
    body.push_str("data: [DONE]\n\n");
    body
}

#[tokio::test]
async fn parses_a_tool_call_turn() {
    let body = tool_turn();
    for chunk in [1, 13, usize::MAX] {
        let events = run(&body, chunk).await;
        let deltas: Vec<_> = events[..events.len() - 1]
            .iter()
            .map(|e| e.as_ref().ok().cloned())
            .collect();
        assert_eq!(
            deltas,
            vec![
                Some(ModelEvent::ThinkingDelta {
                    index: 0,
                    text: "Think".into()
                }),
                Some(ModelEvent::ThinkingDelta {
                    index: 0,
                    text: "ing.".into()
                }),
                Some(ModelEvent::TextDelta {
                    index: 1,
                    text: "Listing ".into()
                }),
                Some(ModelEvent::TextDelta {
                    index: 1,
                    text: "files ✓.".into()
                }),
            ]
        );
        let response = completed(&events);
        assert_eq!(
            response.content,
            vec![
                ContentBlock::Thinking {
                    thinking: "Thinking.".into(),
                    signature: None
                },
                ContentBlock::Text {
                    text: "Listing files ✓.".into()
                },
                ContentBlock::ToolUse {
                    id: "call_a".into(),
                    name: "Bash".into(),
                    input: json!({"command": "ls"}),
                },
                ContentBlock::ToolUse {
                    id: "call_b".into(),
                    name: "Read".into(),
                    input: json!({"file_path": "a.md"}),
                },
            ]
        );
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(
            response.usage,
            Usage {
                input_tokens: 200,
                output_tokens: 40,
                cache_read_tokens: 1000,
                cache_write_tokens: 0,
            }
        );
    }
}

#[tokio::test]
async fn invalid_arguments_stay_raw() {
    let body = sse(&[
        delta(
            json!({"tool_calls": [{"index": 0, "id": "c1",
                                   "function": {"name": "Bash", "arguments": "{\"command\": "}}]}),
            None,
        ),
        delta(
            json!({"tool_calls": [{"index": 1, "id": "c2", "function": {"name": "LS"}}]}),
            Some("tool_calls"),
        ),
    ]) + "data: [DONE]\n\n";
    let response = completed(&run(&body, 4).await);
    assert_eq!(
        response.content,
        vec![
            ContentBlock::ToolUse {
                id: "c1".into(),
                name: "Bash".into(),
                input: json!("{\"command\": "),
            },
            ContentBlock::ToolUse {
                id: "c2".into(),
                name: "LS".into(),
                input: json!({}),
            },
        ]
    );
}

#[tokio::test]
async fn finish_reasons() {
    for (reason, stop) in [
        ("stop", StopReason::EndTurn),
        ("length", StopReason::MaxTokens),
        ("content_filter", StopReason::Refusal),
        ("weird", StopReason::Other),
    ] {
        let body = sse(&[delta(json!({"content": "x"}), Some(reason))]) + "data: [DONE]\n\n";
        assert_eq!(completed(&run(&body, 64).await).stop_reason, stop);
    }
    // Tool calls with "stop" (some local servers) still mean tool use; a
    // missing `index` falls back to the position; a missing id is generated.
    let body = sse(&[delta(
        json!({"tool_calls": [{"function": {"name": "LS", "arguments": "{}"}}]}),
        Some("stop"),
    )]);
    // And no [DONE]: the finish reason was seen, so the response is complete.
    let response = completed(&run(&body, 64).await);
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        response.content,
        vec![ContentBlock::ToolUse {
            id: "call_0".into(),
            name: "LS".into(),
            input: json!({}),
        }]
    );
}

#[tokio::test]
async fn a_cut_stream_is_a_stream_error() {
    let body = tool_turn();
    let cut = &body[..body.find("tool_calls\"}").unwrap_or(body.len() / 2)];
    let events = run(cut, 50).await;
    assert!(
        matches!(events.last(), Some(Err(ModelError::Stream(_)))),
        "{events:?}"
    );
    assert!(events[..events.len() - 1].iter().all(Result::is_ok));
}

#[tokio::test]
async fn error_chunks_and_garbage() {
    let body = sse(&[
        delta(json!({"content": "Hi"}), None),
        json!({"error": {"message": "Provider overloaded", "code": 529}}),
    ]);
    let events = run(&body, 64).await;
    assert!(matches!(
        events[..],
        [Ok(_), Err(ModelError::Overloaded { .. })]
    ));

    let events = run("{\"object\": \"chat.completion\", \"choices\": []}", 64).await;
    assert!(
        matches!(events[..], [Err(ModelError::Protocol(_))]),
        "{events:?}"
    );
    let events = run("data: [1, 2]\n\n", 64).await;
    assert!(
        matches!(events[..], [Err(ModelError::Protocol(_))]),
        "{events:?}"
    );
}

#[tokio::test]
async fn ollama_style_reasoning_field_and_comments() {
    let body = format!(
        ": OPENROUTER PROCESSING\n\n{}data: [DONE]\n\n",
        sse(&[
            delta(json!({"reasoning": "hm"}), None),
            delta(json!({"content": "ok"}), Some("stop")),
        ])
    );
    let response = completed(&run(&body, 7).await);
    assert_eq!(
        response.content,
        vec![
            ContentBlock::Thinking {
                thinking: "hm".into(),
                signature: None
            },
            ContentBlock::Text { text: "ok".into() },
        ]
    );
}
