use agentd_model::{ModelError, ModelEvent, ModelResponse, StopReason};
use agentd_protocol::{ContentBlock, Usage};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::*;

/// The events of frames, as `(name, data)`.
fn parse(frames: &[Bytes]) -> Vec<(String, Value)> {
    frames
        .iter()
        .map(|frame| {
            let text = std::str::from_utf8(frame).unwrap();
            let mut lines = text.lines();
            let name = lines
                .next()
                .unwrap()
                .strip_prefix("event: ")
                .unwrap()
                .to_string();
            let data = lines.next().unwrap().strip_prefix("data: ").unwrap();
            (name, serde_json::from_str(data).unwrap())
        })
        .collect()
}

fn text(index: u32, text: &str) -> ModelEvent {
    ModelEvent::TextDelta {
        index,
        text: text.into(),
    }
}

fn usage() -> Usage {
    Usage {
        input_tokens: 10,
        output_tokens: 4,
        cache_read_tokens: 3,
        cache_write_tokens: 2,
    }
}

#[test]
fn text_streams_live_and_a_tool_call_follows_whole() {
    let mut encoder = Encoder::default();
    let mut frames = encoder.delta(&text(0, "Hel"));
    frames.extend(encoder.delta(&text(0, "lo")));
    let reply = ModelResponse {
        content: vec![
            ContentBlock::Text {
                text: "Hello".into(),
            },
            ContentBlock::ToolUse {
                id: "call_1".into(),
                name: "Bash".into(),
                input: json!({"command": "ls"}),
            },
        ],
        stop_reason: StopReason::ToolUse,
        usage: usage(),
    };
    frames.extend(encoder.complete(&reply));
    let events = parse(&frames);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    assert_eq!(
        events[1].1["delta"],
        json!({"type": "text_delta", "text": "Hel"})
    );
    assert_eq!(events[4].1["index"], 1);
    assert_eq!(events[4].1["content_block"]["id"], "call_1");
    assert_eq!(events[5].1["delta"]["type"], "input_json_delta");
    let input: Value =
        serde_json::from_str(events[5].1["delta"]["partial_json"].as_str().unwrap()).unwrap();
    assert_eq!(input, json!({"command": "ls"}));
    assert_eq!(events[7].1["delta"]["stop_reason"], "tool_use");
    assert_eq!(events[7].1["usage"]["input_tokens"], 10);
    assert_eq!(events[7].1["usage"]["cache_read_input_tokens"], 3);
}

#[test]
fn a_thinking_block_gets_its_signature_before_it_stops() {
    let mut encoder = Encoder::new(true);
    let mut frames = encoder.delta(&ModelEvent::ThinkingDelta {
        index: 0,
        text: "hmm".into(),
    });
    // The text after it waits for the end: the thinking cannot stop yet.
    frames.extend(encoder.delta(&text(1, "Ans")));
    let reply = ModelResponse {
        content: vec![
            ContentBlock::Thinking {
                thinking: "hmm".into(),
                signature: Some("sig".into()),
            },
            ContentBlock::Text {
                text: "Answer".into(),
            },
        ],
        stop_reason: StopReason::MaxTokens,
        usage: usage(),
    };
    frames.extend(encoder.complete(&reply));
    let events = parse(&frames);
    let deltas: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, d)| &d["delta"])
        .collect();
    assert_eq!(
        deltas,
        [
            &json!({"type": "thinking_delta", "thinking": "hmm"}),
            &json!({"type": "signature_delta", "signature": "sig"}),
            &json!({"type": "text_delta", "text": "Answer"}),
        ]
    );
    let stops: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "content_block_stop")
        .map(|(_, d)| &d["index"])
        .collect();
    assert_eq!(stops, [&json!(0), &json!(1)]);
    let end = events.iter().find(|(n, _)| n == "message_delta").unwrap();
    assert_eq!(end.1["delta"]["stop_reason"], "max_tokens");
}

#[test]
fn unsigned_thinking_stops_at_once_and_the_text_after_it_streams_live() {
    let mut encoder = Encoder::new(false);
    let mut frames = encoder.delta(&ModelEvent::ThinkingDelta {
        index: 0,
        text: "hmm".into(),
    });
    let live = encoder.delta(&text(1, "Ans"));
    let live_events = parse(&live);
    assert_eq!(
        live_events
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        [
            "content_block_stop",
            "content_block_start",
            "content_block_delta"
        ]
    );
    assert_eq!(live_events[2].1["delta"]["text"], "Ans");
    frames.extend(live);
    frames.extend(encoder.delta(&text(1, "wer")));
    let reply = ModelResponse {
        content: vec![
            ContentBlock::Thinking {
                thinking: "hmm".into(),
                signature: None,
            },
            ContentBlock::Text {
                text: "Answer".into(),
            },
            ContentBlock::ToolUse {
                id: "c".into(),
                name: "Bash".into(),
                // Invalid JSON from the model: the client gets `{}`.
                input: json!("{\"command\": "),
            },
        ],
        stop_reason: StopReason::ToolUse,
        usage: usage(),
    };
    frames.extend(encoder.complete(&reply));
    let events = parse(&frames);
    let stops: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "content_block_stop")
        .map(|(_, d)| &d["index"])
        .collect();
    assert_eq!(stops, [&json!(0), &json!(1), &json!(2)]);
    let input = events
        .iter()
        .find(|(_, d)| d["delta"]["type"] == "input_json_delta")
        .unwrap();
    assert_eq!(input.1["delta"]["partial_json"], "{}");
}

#[test]
fn a_call_dropped_before_its_end_reports_an_estimate_once() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let report = |seen: &Arc<std::sync::Mutex<Vec<Usage>>>| -> OnUsage {
        let seen = seen.clone();
        Box::new(move |usage| seen.lock().unwrap().push(usage))
    };
    let mut spend = Spend::new(report(&seen), 100);
    spend.saw(&text(0, "12345678"));
    drop(spend);
    let mut completed = Spend::new(report(&seen), 100);
    completed.saw(&ModelEvent::Completed(ModelResponse {
        content: Vec::new(),
        stop_reason: StopReason::EndTurn,
        usage: usage(),
    }));
    drop(completed);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!((seen[0].input_tokens, seen[0].output_tokens), (100, 2));
    assert_eq!(seen[1], usage());
}

#[test]
fn model_errors_keep_anthropics_statuses() {
    let status = |err: ModelError| AnthropicError::from(err).status;
    assert_eq!(
        status(ModelError::RateLimited {
            message: "x".into(),
            retry_after: None
        }),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        status(ModelError::Overloaded {
            message: "x".into(),
            retry_after: None
        })
        .as_u16(),
        529
    );
    assert_eq!(
        status(ModelError::BadRequest {
            status: 400,
            message: "x".into()
        }),
        StatusCode::BAD_REQUEST
    );
    // agentd's own key refused upstream is not the client's key being wrong.
    assert_eq!(
        status(ModelError::Auth {
            status: 401,
            message: "x".into()
        }),
        StatusCode::BAD_GATEWAY
    );
    // What the provider said of agentd's key, or its address, stays in the log.
    let leaky = AnthropicError::from(ModelError::Auth {
        status: 401,
        message: "invalid x-api-key sk-ant-123 at http://10.1.2.3:8080".into(),
    });
    assert!(!leaky.message.contains("sk-ant"), "{}", leaky.message);
    let unreachable = AnthropicError::from(ModelError::Transport(
        "error sending request for url (http://10.1.2.3:8080/v1/chat/completions)".into(),
    ));
    assert!(
        !unreachable.message.contains("10.1.2.3"),
        "{}",
        unreachable.message
    );
    let overflow = AnthropicError::from(ModelError::ContextOverflow {
        message: "too long".into(),
    });
    assert!(
        overflow.message.starts_with("prompt is too long"),
        "{}",
        overflow.message
    );
}
