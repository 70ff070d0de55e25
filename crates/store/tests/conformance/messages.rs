use agentd_protocol::{ContentBlock, Message, Role};
use agentd_store::StoreError;
use agentd_store::prelude::*;
use serde_json::json;

use crate::{session, store};

fn every_block_kind() -> Message {
    Message {
        role: Role::Assistant,
        content: vec![
            ContentBlock::Thinking {
                thinking: "let me think… 🤔".into(),
                signature: Some("sig==".into()),
            },
            ContentBlock::Thinking {
                thinking: "unsigned".into(),
                signature: None,
            },
            ContentBlock::Text {
                text: "héllo\n\t\"quoted\" \u{0} nul".into(),
            },
            ContentBlock::ToolUse {
                id: "toolu_1".into(),
                name: "Bash".into(),
                input: json!({"command": "ls", "n": 1.5e300, "deep": {"a": [1, null, true]}}),
            },
            ContentBlock::ToolUse {
                id: "toolu_2".into(),
                name: "Edit".into(),
                // Invalid JSON from the model is kept as a string.
                input: json!("{not json"),
            },
            ContentBlock::tool_result("toolu_1", "a\nb", true),
            ContentBlock::Image {
                source: json!({"type": "base64", "media_type": "image/png", "data": "AA=="}),
            },
        ],
    }
}

#[tokio::test]
async fn transcript_round_trips_losslessly_in_order() {
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    let sent = [
        Message::user_text("first"),
        every_block_kind(),
        Message::user_text("third"),
    ];
    let mut stored = Vec::new();
    for (i, m) in sent.iter().enumerate() {
        let turn = (i != 2).then_some("turn-1");
        stored.push(store.append_message(&s.id, turn, m).await.unwrap());
    }
    let positions: Vec<_> = stored.iter().map(|m| m.position).collect();
    assert_eq!(positions, [1, 2, 3]);
    assert_eq!(stored[0].turn_id.as_deref(), Some("turn-1"));
    assert_eq!(stored[2].turn_id, None);

    let read = store.messages(&s.id).await.unwrap();
    assert_eq!(read, stored);
    assert_eq!(read[1].message, sent[1]);

    let session = store.get_session(&s.id).await.unwrap().unwrap();
    assert!(session.updated_at >= stored[2].created_at);
}

#[tokio::test]
async fn messages_from_a_position_are_the_tail_in_order() {
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    let other = session(&store, "alice").await;
    for text in ["one", "two", "three", "four"] {
        store
            .append_message(&s.id, None, &Message::user_text(text))
            .await
            .unwrap();
    }
    store
        .append_message(&other.id, None, &Message::user_text("elsewhere"))
        .await
        .unwrap();
    let all = store.messages(&s.id).await.unwrap();
    let tail = store.messages_from(&s.id, 3).await.unwrap();
    assert_eq!(tail, all[2..]);
    assert_eq!(store.messages_from(&s.id, 1).await.unwrap(), all);
    assert!(store.messages_from(&s.id, 5).await.unwrap().is_empty());
    assert!(store.messages_from("nope", 1).await.unwrap().is_empty());
}

/// Events and messages appended as one log land where each kind's own
/// append would put them.
#[tokio::test]
async fn a_log_of_events_and_messages_appends_in_order() {
    use agentd_protocol::{ErrorInfo, Event};
    use agentd_store::{LogEntry, Logged};
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    store
        .append_message(&s.id, Some("t0"), &Message::user_text("first"))
        .await
        .unwrap();
    let event = |code: &str| {
        Event::Error(ErrorInfo {
            code: code.into(),
            message: String::new(),
            retryable: false,
        })
    };
    let (e1, e2) = (event("one"), event("two"));
    let (m1, m2) = (Message::user_text("second"), every_block_kind());
    let appended = store
        .append_log(
            &s.id,
            &[
                LogEntry::Event(&e1),
                LogEntry::Message {
                    turn_id: Some("t1"),
                    message: &m1,
                },
                LogEntry::Message {
                    turn_id: None,
                    message: &m2,
                },
                LogEntry::Event(&e2),
            ],
        )
        .await;
    assert!(appended.error.is_none(), "{:?}", appended.error);
    let stored_messages: Vec<_> = appended
        .stored
        .iter()
        .filter_map(|l| match l {
            Logged::Message(m) => Some(m.clone()),
            Logged::Event(_) => None,
        })
        .collect();
    let read = store.messages(&s.id).await.unwrap();
    assert_eq!(read[1..], stored_messages);
    assert_eq!(read[1].position, 2);
    assert_eq!(read[1].turn_id.as_deref(), Some("t1"));
    assert_eq!(read[2].message, m2);
    let events = store.events_after(&s.id, 0, 10).await.unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!((events[0].event.clone(), events[1].event.clone()), (e1, e2));
    assert!(matches!(&appended.stored[3], Logged::Event(e) if *e == events[1]));
    let missing = store
        .append_log("nope", &[LogEntry::Event(&events[0].event)])
        .await;
    assert!(missing.stored.is_empty());
    assert!(matches!(missing.error, Some(StoreError::NotFound(_))));
}

#[tokio::test]
async fn transcripts_are_per_session() {
    let (_dir, store) = store().await;
    let a = session(&store, "alice").await;
    let b = session(&store, "alice").await;
    store
        .append_message(&a.id, None, &Message::user_text("a1"))
        .await
        .unwrap();
    let b1 = store
        .append_message(&b.id, None, &Message::user_text("b1"))
        .await
        .unwrap();
    assert_eq!(b1.position, 1);
    assert_eq!(store.messages(&a.id).await.unwrap().len(), 1);
    assert!(store.messages("unknown").await.unwrap().is_empty());
}

#[tokio::test]
async fn append_to_unknown_session_is_not_found() {
    let (_dir, store) = store().await;
    let err = store
        .append_message("nope", None, &Message::user_text("x"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_get_distinct_positions() {
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    let mut tasks = Vec::new();
    for t in 0..10 {
        let store = store.clone();
        let id = s.id.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..20 {
                let m = Message::user_text(format!("{t}-{i}"));
                store.append_message(&id, None, &m).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let positions: Vec<_> = store
        .messages(&s.id)
        .await
        .unwrap()
        .iter()
        .map(|m| m.position)
        .collect();
    assert_eq!(positions, (1..=200).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_5_mib_tool_result_round_trips() {
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    let unit = "line of output — ünïcödé 🦀 \"q\" \\ \t\n";
    let output = unit.repeat(5 * 1024 * 1024 / unit.len() + 1);
    assert!(output.len() >= 5 * 1024 * 1024);
    let message = Message {
        role: Role::User,
        content: vec![ContentBlock::tool_result("toolu_big", output, false)],
    };
    let stored = store
        .append_message(&s.id, Some("t1"), &message)
        .await
        .unwrap();
    assert_eq!(store.messages(&s.id).await.unwrap(), vec![stored]);
}
