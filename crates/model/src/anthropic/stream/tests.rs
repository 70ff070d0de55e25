use bytes::Bytes;
use futures::StreamExt;
use serde_json::json;

use super::*;
use crate::sse::drive;

/// Runs the parser over `body` cut into `chunk`-byte pieces.
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

/// A tool-use turn in the documented wire format, with thinking and text.
const TOOL_TURN: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"look."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: ping
data: {"type": "ping"}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Listing "}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"files 🌍."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01","name":"Bash","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"comm"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"and\": \"ls -la\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"#;

#[tokio::test]
async fn parses_a_tool_use_turn() {
    for chunk in [1, 7, 64, usize::MAX] {
        let events = run(TOOL_TURN, chunk).await;
        let deltas: Vec<_> = events[..events.len() - 1]
            .iter()
            .map(|e| e.as_ref().ok().cloned())
            .collect();
        assert_eq!(
            deltas,
            vec![
                Some(ModelEvent::ThinkingDelta {
                    index: 0,
                    text: "Let me ".into()
                }),
                Some(ModelEvent::ThinkingDelta {
                    index: 0,
                    text: "look.".into()
                }),
                Some(ModelEvent::TextDelta {
                    index: 1,
                    text: "Listing ".into()
                }),
                Some(ModelEvent::TextDelta {
                    index: 1,
                    text: "files 🌍.".into()
                }),
            ]
        );
        let response = completed(&events);
        assert_eq!(
            response.content,
            vec![
                ContentBlock::Thinking {
                    thinking: "Let me look.".into(),
                    signature: Some("EqQB".into()),
                },
                ContentBlock::Text {
                    text: "Listing files 🌍.".into()
                },
                ContentBlock::ToolUse {
                    id: "toolu_01".into(),
                    name: "Bash".into(),
                    input: json!({"command": "ls -la"}),
                },
            ]
        );
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(
            response.usage,
            Usage {
                input_tokens: 25,
                output_tokens: 89,
                cache_read_tokens: 2000,
                cache_write_tokens: 100,
            }
        );
    }
}

fn sse(events: &[serde_json::Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

fn start() -> serde_json::Value {
    json!({"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}})
}

#[tokio::test]
async fn invalid_tool_json_is_kept_raw_and_empty_input_is_an_object() {
    let body = sse(&[
        start(),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "input_json_delta", "partial_json": "{\"command\": "}}),
        json!({"type": "content_block_start", "index": 1,
               "content_block": {"type": "tool_use", "id": "t2", "name": "LS", "input": {}}}),
        json!({"type": "message_stop"}),
    ]);
    let response = completed(&run(&body, 5).await);
    assert_eq!(
        response.content,
        vec![
            ContentBlock::ToolUse {
                id: "t1".into(),
                name: "Bash".into(),
                input: json!("{\"command\": "),
            },
            ContentBlock::ToolUse {
                id: "t2".into(),
                name: "LS".into(),
                input: json!({}),
            },
        ]
    );
    // No message_delta: the stop reason follows from the content.
    assert_eq!(response.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn skipped_blocks_do_not_shift_indices() {
    let body = sse(&[
        start(),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "redacted_thinking", "data": "xyz"}}),
        json!({"type": "content_block_start", "index": 1,
               "content_block": {"type": "text", "text": "Hi"}}),
        json!({"type": "content_block_delta", "index": 1,
               "delta": {"type": "text_delta", "text": "!"}}),
        json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"},
               "usage": {"output_tokens": 2}}),
        json!({"type": "message_stop"}),
    ]);
    let events = run(&body, usize::MAX).await;
    assert_eq!(
        events[0].as_ref().ok(),
        Some(&ModelEvent::TextDelta {
            index: 0,
            text: "Hi".into()
        })
    );
    let response = completed(&events);
    assert_eq!(
        response.content,
        vec![ContentBlock::Text { text: "Hi!".into() }]
    );
    assert_eq!(response.stop_reason, StopReason::MaxTokens);
}

#[tokio::test]
async fn error_event_mid_stream_ends_the_stream() {
    let body = sse(&[
        start(),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": "Hel"}}),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        json!({"type": "message_stop"}),
    ]);
    let events = run(&body, 10).await;
    assert_eq!(events.len(), 2);
    assert!(matches!(events[1], Err(ModelError::Overloaded { .. })));
}

#[tokio::test]
async fn a_cut_stream_is_a_stream_error() {
    let cut = &TOOL_TURN[..TOOL_TURN.len() / 2];
    let events = run(cut, 100).await;
    assert!(matches!(events.last(), Some(Err(ModelError::Stream(_)))));
    assert!(events[..events.len() - 1].iter().all(Result::is_ok));
    assert!(matches!(run("", 1).await[..], [Err(ModelError::Stream(_))]));
}

#[tokio::test]
async fn non_sse_bodies_are_protocol_errors() {
    let events = run("<html><body>502 Bad Gateway</body></html>\n", 8).await;
    assert!(
        matches!(events[..], [Err(ModelError::Protocol(_))]),
        "{events:?}"
    );
    let events = run("{\"id\": \"msg_1\", \"content\": []}", 8).await;
    assert!(
        matches!(events[..], [Err(ModelError::Protocol(_))]),
        "{events:?}"
    );
    let events = run("data: not json\n\n", 8).await;
    assert!(
        matches!(events[..], [Err(ModelError::Protocol(_))]),
        "{events:?}"
    );
    let body = sse(&[json!({"type": "content_block_start", "index": 0,
                            "content_block": {"type": "text", "text": ""}})]);
    let events = run(&body, 8).await;
    assert!(
        matches!(events[..], [Err(ModelError::Protocol(_))]),
        "{events:?}"
    );
}

#[tokio::test]
async fn bytes_after_message_stop_are_ignored() {
    let body = format!("{TOOL_TURN}data: garbage\n\n");
    let events = run(&body, 3).await;
    completed(&events);
}

/// Deltas are read without a JSON tree when the `event:` line names them;
/// without that line they go through the tree. Both readings agree, escapes
/// and a delta of the wrong shape included.
#[tokio::test]
async fn deltas_read_the_same_with_or_without_the_event_line() {
    let with_lines = TOOL_TURN.replace(
        r#""text":"files 🌍."}"#,
        r#""text":"files \"🌍\"\n\u00e9."}"#,
    );
    let without: String = with_lines
        .lines()
        .filter(|line| !line.starts_with("event: content_block_delta"))
        .map(|line| format!("{line}\n"))
        .collect();
    let fast = completed(&run(&with_lines, 64).await);
    let tree = completed(&run(&without, 64).await);
    assert_eq!(fast, tree);
    assert!(matches!(
        &fast.content[1],
        ContentBlock::Text { text } if text == "Listing files \"🌍\"\né."
    ));

    // A text piece that is not a string is read as empty by both.
    let odd = with_lines.replace(r#""text":"Listing "}"#, r#""text":5}"#);
    let odd_without = without.replace(r#""text":"Listing "}"#, r#""text":5}"#);
    assert_eq!(
        completed(&run(&odd, 64).await),
        completed(&run(&odd_without, 64).await)
    );
}

/// A `content_block_stop` or `ping` is skipped unparsed only when its data
/// says so; data of another type, or not JSON, goes the general way.
#[tokio::test]
async fn stop_and_ping_lines_are_trusted_only_when_their_data_agrees() {
    // The data's type is authoritative: a stop line carrying `message_stop` ends the message.
    let ended = TOOL_TURN.replace(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}",
        "event: content_block_stop\ndata: {\"type\":\"message_stop\"}",
    );
    assert_ne!(ended, TOOL_TURN);
    let response = completed(&run(&ended, 64).await);
    assert_eq!(response.content.len(), 2, "{response:?}");

    let broken = TOOL_TURN.replace(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\"",
    );
    assert_ne!(broken, TOOL_TURN);
    let events = run(&broken, 64).await;
    assert!(
        events.iter().any(
            |e| matches!(e, Err(ModelError::Protocol(message)) if message.contains("not JSON"))
        ),
        "{events:?}"
    );
}
