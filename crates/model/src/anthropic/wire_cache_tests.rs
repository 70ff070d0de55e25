//! A request body made with a [`WireCache`] is byte for byte the one made
//! without it, call after call of a growing transcript.

use std::sync::Arc;

use agentd_protocol::{ContentBlock, Message, Role};
use bytes::Bytes;
use serde_json::json;

use super::request::body_bytes;
use crate::{ModelRequest, ToolSpec, WireCache};

fn request(messages: &[Message], cache: Option<Arc<WireCache>>) -> ModelRequest {
    ModelRequest {
        model: "claude-sonnet-4-5".into(),
        system: Some("be brief".into()),
        messages: Arc::new(messages.to_vec()),
        tools: Arc::new(vec![ToolSpec {
            name: "Bash".into(),
            description: "run a command".into(),
            input_schema: json!({"type": "object"}),
        }]),
        max_tokens: 1024,
        thinking_budget: None,
        wire_cache: cache,
    }
}

fn sent(messages: &[Message], cache: &Arc<WireCache>, caching: bool) -> Bytes {
    body_bytes(&request(messages, Some(cache.clone())), caching).unwrap()
}

fn whole(messages: &[Message], caching: bool) -> Bytes {
    body_bytes(&request(messages, None), caching).unwrap()
}

fn call(id: &str) -> ContentBlock {
    ContentBlock::ToolUse {
        id: id.into(),
        name: "Bash".into(),
        input: json!({"command": "ls \"a b\"\n"}),
    }
}

/// What a turn's transcript goes through: appends, a message that sends
/// nothing (unsigned thinking only), one that ends in an empty text, and a
/// user message merged into the last one.
fn growth() -> Vec<Vec<Message>> {
    let mut transcript = vec![Message::user_text("list the files")];
    let mut steps = vec![transcript.clone()];
    let mut push = |transcript: &mut Vec<Message>, message: Message| {
        transcript.push(message);
        steps.push(transcript.clone());
    };
    push(
        &mut transcript,
        Message::assistant(vec![
            ContentBlock::Text {
                text: "looking ✓".into(),
            },
            call("toolu_1"),
        ]),
    );
    push(
        &mut transcript,
        Message {
            role: Role::User,
            content: vec![ContentBlock::tool_result("toolu_1", "README.md\n", false)],
        },
    );
    push(
        &mut transcript,
        Message::assistant(vec![ContentBlock::Thinking {
            thinking: "unsigned".into(),
            signature: None,
        }]),
    );
    push(&mut transcript, Message::user_text("go on"));
    // The engine merges a message of the same role into the last one.
    transcript
        .last_mut()
        .unwrap()
        .content
        .push(ContentBlock::Text {
            text: "and be quick".into(),
        });
    push(&mut transcript, Message::assistant(vec![call("toolu_3")]));
    push(
        &mut transcript,
        Message::assistant(vec![
            call("toolu_2"),
            ContentBlock::Text { text: "".into() },
        ]),
    );
    push(
        &mut transcript,
        Message {
            role: Role::User,
            content: vec![ContentBlock::tool_result("toolu_2", "done", true)],
        },
    );
    steps
}

#[test]
fn each_call_sends_what_a_whole_serialisation_sends() {
    for caching in [true, false] {
        let cache = Arc::new(WireCache::default());
        for step in growth() {
            assert_eq!(sent(&step, &cache, caching), whole(&step, caching));
        }
    }
}

#[test]
fn a_rewritten_transcript_is_sent_as_it_is_once_the_cache_is_cleared() {
    let cache = Arc::new(WireCache::default());
    let steps = growth();
    let before = steps.last().unwrap();
    sent(before, &cache, true);
    // Same roles and shapes, other words: what a compaction can leave.
    let rewritten: Vec<Message> = before
        .iter()
        .map(|message| Message {
            role: message.role,
            content: message
                .content
                .iter()
                .map(|_| ContentBlock::Text {
                    text: "summary".into(),
                })
                .collect(),
        })
        .collect();
    cache.clear();
    let body = sent(&rewritten, &cache, true);
    assert_eq!(body, whole(&rewritten, true));
    assert!(!String::from_utf8_lossy(&body).contains("README"));
}

#[test]
fn a_kept_message_that_grew_is_made_again() {
    let cache = Arc::new(WireCache::default());
    let mut transcript = vec![
        Message::user_text("one"),
        Message::assistant(vec![ContentBlock::Text { text: "two".into() }]),
        Message::user_text("three"),
    ];
    sent(&transcript, &cache, true);
    // The second message, kept by that call, now has another block.
    transcript[1].content.push(call("toolu_9"));
    let body = sent(&transcript, &cache, true);
    assert_eq!(body, whole(&transcript, true));
    assert!(String::from_utf8_lossy(&body).contains("toolu_9"));
}

/// A cache kept across a session's turns meets transcripts it did not see
/// grow: one rewound and continued, or changed by a turn run elsewhere.
/// Messages of the same roles and shapes but other words are made again
/// without being told.
#[test]
fn a_transcript_rewritten_behind_the_caches_back_is_sent_as_it_is() {
    let cache = Arc::new(WireCache::default());
    let mut transcript = vec![
        Message::user_text("list the files"),
        Message::assistant(vec![ContentBlock::Text {
            text: "README.md".into(),
        }]),
        Message::user_text("and now?"),
    ];
    sent(&transcript, &cache, true);
    transcript[1] = Message::assistant(vec![ContentBlock::Text {
        text: "Cargo.toml".into(),
    }]);
    let body = sent(&transcript, &cache, true);
    assert_eq!(body, whole(&transcript, true));
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("Cargo.toml") && !text.contains("README"));
}
