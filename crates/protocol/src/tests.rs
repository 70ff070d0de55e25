use chrono::TimeZone;
use serde_json::{Value, json};

use super::*;

fn round_trip<T>(value: &T) -> Value
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let text = serde_json::to_string(value).unwrap();
    let back: T = serde_json::from_str(&text).unwrap();
    assert_eq!(&back, value);
    serde_json::from_str(&text).unwrap()
}

#[test]
fn message_with_every_block_kind_round_trips() {
    let message = Message {
        role: Role::Assistant,
        content: vec![
            ContentBlock::Thinking {
                thinking: "hmm".into(),
                signature: Some("sig".into()),
            },
            ContentBlock::Text {
                text: "héllo ✓".into(),
            },
            ContentBlock::ToolUse {
                id: "toolu_1".into(),
                name: "Bash".into(),
                input: json!({"command": "ls"}),
            },
            ContentBlock::tool_result("toolu_1", "a\nb", true),
            ContentBlock::Image {
                source: json!({"type": "base64", "media_type": "image/png", "data": "AA=="}),
            },
        ],
    };
    let json = round_trip(&message);
    assert_eq!(json["role"], "assistant");
    assert_eq!(json["content"][2]["type"], "tool_use");
    assert_eq!(json["content"][3]["is_error"], true);
}

#[test]
fn envelope_is_flat_with_type_tag() {
    let envelope = EventEnvelope {
        seq: 7,
        session_id: "s1".into(),
        at: Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
        event: Event::ToolOutput {
            call_id: "c1".into(),
            stream: OutputStream::Stderr,
            text: "oops".into(),
        },
    };
    let json = round_trip(&envelope);
    assert_eq!(
        json,
        json!({"seq": 7, "session_id": "s1", "at": "2026-01-02T03:04:05Z",
               "type": "tool.output", "call_id": "c1", "stream": "stderr", "text": "oops"})
    );
}

use chrono::Utc;

#[test]
fn every_event_type_round_trips_with_its_wire_name() {
    let usage = Usage {
        input_tokens: 10,
        output_tokens: 5,
        cache_read_tokens: 2,
        cache_write_tokens: 1,
    };
    let events = vec![
        Event::TurnStarted {
            turn_id: "t".into(),
            message: Message::user_text("hi"),
        },
        Event::MessageDelta {
            parent_call_id: None,
            turn_id: "t".into(),
            index: 0,
            kind: DeltaKind::Thinking,
            text: "x".into(),
        },
        Event::MessageCompleted {
            parent_call_id: None,
            turn_id: "t".into(),
            message: Message::assistant(vec![]),
        },
        Event::ToolStarted {
            parent_call_id: None,
            turn_id: "t".into(),
            call_id: "c".into(),
            name: "Read".into(),
            input: json!({"file_path": "a"}),
        },
        Event::ToolFinished {
            call_id: "c".into(),
            is_error: false,
            output: "ok".into(),
            duration_ms: 3,
        },
        Event::PermissionRequested {
            parent_call_id: None,
            request_id: "r".into(),
            call_id: "c".into(),
            tool: "Bash".into(),
            input: json!({}),
            reason: "ask".into(),
        },
        Event::PermissionResolved {
            request_id: "r".into(),
            decision: "allow".into(),
            by: "user".into(),
        },
        Event::QuestionAsked {
            request_id: "q".into(),
            call_id: "c".into(),
            questions: json!([]),
            parent_call_id: Some("task".into()),
        },
        Event::QuestionAnswered {
            by: "user:u".into(),
            request_id: "q".into(),
            answers: json!({}),
        },
        Event::Usage {
            parent_call_id: None,
            usage,
            cost_usd: 0.5,
            context_tokens: 13,
        },
        Event::Compaction {
            trigger: CompactionTrigger::Auto,
            tokens_before: 100,
            tokens_after: 10,
            summary: Some("we talked".into()),
        },
        Event::CheckpointCreated {
            checkpoint_id: "k".into(),
            files: vec!["a.txt".into()],
        },
        Event::TurnFinished(TurnFinished {
            agent_status: None,
            turn_id: "t".into(),
            status: TurnStatus::BudgetExceeded,
            result: Some("done".into()),
            usage,
            cost_usd: 1.25,
            num_model_calls: 2,
            duration_ms: 9,
            error: None,
        }),
        Event::SessionUpdated {
            title: Some("T".into()),
            status: "idle".into(),
        },
        Event::Error(ErrorInfo {
            code: "model_overloaded".into(),
            message: "try later".into(),
            retryable: true,
        }),
    ];
    for event in events {
        let json = round_trip(&event);
        assert_eq!(json["type"], event.type_name());
    }
}

#[test]
fn usage_event_fields_are_flat() {
    let event = Event::Usage {
        parent_call_id: None,
        usage: Usage {
            input_tokens: 1,
            output_tokens: 2,
            cache_read_tokens: 3,
            cache_write_tokens: 4,
        },
        cost_usd: 0.0,
        context_tokens: 8,
    };
    let json = serde_json::to_value(&event).unwrap();
    assert_eq!(json["cache_write_tokens"], 4);
    assert_eq!(json["context_tokens"], 8);
}

#[test]
fn turn_status_strings_match_serde() {
    for status in [
        TurnStatus::Completed,
        TurnStatus::Interrupted,
        TurnStatus::Failed,
        TurnStatus::MaxTurns,
        TurnStatus::Timeout,
        TurnStatus::BudgetExceeded,
        TurnStatus::CircuitBreaker,
    ] {
        assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        assert_eq!(TurnStatus::parse(status.as_str()), Some(status));
    }
}

#[test]
fn every_known_wire_string_parses_to_itself() {
    for (wire, _) in ErrorCode::KNOWN {
        let code = ErrorCode::parse(wire);
        assert!(!matches!(code, ErrorCode::Other(_)), "{wire}");
        assert_eq!(serde_json::to_value(&code).unwrap(), *wire);
    }
    for (wire, _) in Resolver::KNOWN {
        let by = Resolver::parse(wire);
        assert!(!matches!(by, Resolver::Other(_)), "{wire}");
        assert_eq!(by.to_string(), *wire);
    }
    for (wire, _) in Decision::KNOWN {
        assert_eq!(Decision::parse(wire).as_str(), *wire);
    }
    for (wire, _) in PendingKind::KNOWN {
        assert_eq!(PendingKind::parse(wire).as_str(), *wire);
    }
    assert_eq!(Decision::AllowSession.as_str(), "allow_session");
    assert_eq!(PendingKind::Question.as_str(), "question");
}

#[test]
fn strings_that_carry_a_value_keep_it() {
    let user = Resolver::User("ann".into());
    assert_eq!(serde_json::to_value(&user).unwrap(), "user:ann");
    assert_eq!(
        serde_json::from_value::<Resolver>(json!("user:ann")).unwrap(),
        user
    );
    assert_eq!(Resolver::parse("user"), Resolver::Terminal);
    let result = ErrorCode::ClaudeCodeResult("error_max_turns".into());
    assert_eq!(result.to_string(), "claude_code_error_max_turns");
    assert_eq!(ErrorCode::parse("claude_code_error_max_turns"), result);
    assert_eq!(
        ErrorCode::parse("claude_code_crashed"),
        ErrorCode::ClaudeCodeCrashed
    );
}

/// A newer server's values must not make an event unreadable, and go back
/// out as they came.
#[test]
fn unknown_wire_strings_are_kept_as_other() {
    let resolved = json!({"type": "permission.resolved", "request_id": "r",
        "decision": "ask_later", "by": "robot"});
    let event: Event = serde_json::from_value(resolved.clone()).unwrap();
    assert_eq!(
        event,
        Event::PermissionResolved {
            request_id: "r".into(),
            decision: Decision::Other("ask_later".into()),
            by: Resolver::Other("robot".into()),
        }
    );
    assert_eq!(serde_json::to_value(&event).unwrap(), resolved);
    let error = json!({"type": "error", "code": "brand_new", "message": "m", "retryable": false});
    let event: Event = serde_json::from_value(error.clone()).unwrap();
    let Event::Error(info) = &event else {
        panic!("not an error: {event:?}")
    };
    assert_eq!(info.code, ErrorCode::Other("brand_new".into()));
    assert_eq!(serde_json::to_value(&event).unwrap(), error);
    let answered = json!({"type": "question.answered", "request_id": "q", "answers": null});
    let event: Event = serde_json::from_value(answered).unwrap();
    assert!(
        matches!(event, Event::QuestionAnswered { by: Resolver::Other(ref s), .. } if s.is_empty())
    );
}

#[test]
fn each_vocabulary_lists_a_value_once_with_its_meaning() {
    for (name, listed) in [
        ("ErrorCode", [ErrorCode::KNOWN, ErrorCode::FORMS].concat()),
        ("Resolver", [Resolver::KNOWN, Resolver::FORMS].concat()),
        ("Decision", Decision::KNOWN.to_vec()),
        ("PendingKind", PendingKind::KNOWN.to_vec()),
    ] {
        let mut wires: Vec<&str> = listed.iter().map(|(wire, _)| *wire).collect();
        wires.sort();
        wires.dedup();
        assert_eq!(wires.len(), listed.len(), "{name} lists a value twice");
        for (wire, meaning) in &listed {
            assert!(
                meaning.ends_with('.'),
                "{name}: {wire} needs a one-line meaning"
            );
        }
    }
}
