use super::*;
use crate::{ModelClient, ModelError, ModelEvent, ModelRequest, ModelResponse, StopReason};
use agentd_protocol::{ContentBlock, Message, Role};
use futures::StreamExt;
use serde_json::json;

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        model: "demo".to_string(),
        system: Some("You are a test.".to_string()),
        messages: std::sync::Arc::new(messages),
        tools: Default::default(),
        max_tokens: 1000,
        thinking_budget: None,
        wire_cache: None,
    }
}

fn text_reply(when: Option<Matcher>, text: &str) -> ScriptReply {
    ScriptReply {
        when,
        content: vec![ScriptBlock::Text {
            text: text.to_string(),
        }],
        ..ScriptReply::default()
    }
}

async fn collect(
    client: &ScriptedClient,
    req: ModelRequest,
) -> Vec<Result<ModelEvent, ModelError>> {
    client.stream(req).await.unwrap().collect().await
}

fn completed(events: &[Result<ModelEvent, ModelError>]) -> ModelResponse {
    match events.last() {
        Some(Ok(ModelEvent::Completed(r))) => r.clone(),
        other => panic!("expected Completed last, got {other:?}"),
    }
}

fn tool_turn(id: &str, name: &str, result: &str) -> Vec<Message> {
    vec![
        Message::user_text("hi"),
        Message::assistant(vec![ContentBlock::ToolUse {
            id: id.to_string(),
            name: name.to_string(),
            input: json!({}),
        }]),
        Message {
            role: Role::User,
            content: vec![ContentBlock::tool_result(
                id.to_string(),
                result.to_string(),
                false,
            )],
        },
    ]
}

#[test]
fn view_of_user_text_and_tool_results() {
    let view = request_view(&request(vec![Message::user_text("hello there")]));
    assert_eq!(view.last_user_text.as_deref(), Some("hello there"));
    assert_eq!(view.last_tool_result, None);
    assert!(view.all_text.contains("You are a test."));

    let view = request_view(&request(tool_turn("t1", "Read", "file body")));
    assert_eq!(view.last_user_text, None);
    assert_eq!(view.last_tool_result.as_deref(), Some("file body"));
    assert_eq!(view.last_tool_names, vec!["Read".to_string()]);
    assert!(view.all_text.contains("hi") && view.all_text.contains("file body"));
}

#[test]
fn chunks_split_and_reassemble() {
    let text = "one two three four five six seven";
    let chunks = text_chunks(text);
    assert!(chunks.len() >= 3);
    assert_eq!(chunks.concat(), text);
    assert_eq!(text_chunks("word").len(), 2);
    assert_eq!(text_chunks("word").concat(), "word");
    assert!(text_chunks("").is_empty());
    let json = r#"{"command":"ls -la","é":"ü"}"#;
    let pieces = json_chunks(json);
    assert!(pieces.len() >= 2);
    assert_eq!(pieces.concat(), json);
}

#[tokio::test]
async fn streams_text_in_chunks_then_completes() {
    let client = ScriptedClient::new(Script {
        replies: vec![text_reply(None, "Hello from the scripted model, friend.")],
    });
    let events = collect(&client, request(vec![Message::user_text("hi")])).await;
    let deltas: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Ok(ModelEvent::TextDelta { index: 0, text }) => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert!(deltas.len() > 1, "{deltas:?}");
    assert_eq!(deltas.concat(), "Hello from the scripted model, friend.");
    let response = completed(&events);
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert!(response.usage.input_tokens > 0 && response.usage.output_tokens > 0);
}

#[tokio::test]
async fn tool_use_ids_raw_input_and_scripted_usage() {
    let usage = Usage {
        input_tokens: 7,
        output_tokens: 3,
        ..Usage::default()
    };
    let client = ScriptedClient::new(Script {
        replies: vec![ScriptReply {
            content: vec![
                ScriptBlock::Thinking {
                    thinking: "let me think".to_string(),
                },
                ScriptBlock::ToolUse {
                    id: None,
                    name: "Bash".to_string(),
                    input: json!({"command": "ls"}),
                },
                ScriptBlock::RawToolUse {
                    id: None,
                    name: "Write".to_string(),
                    raw_input: "{not json".to_string(),
                },
                ScriptBlock::ToolUse {
                    id: Some("mine".to_string()),
                    name: "LS".to_string(),
                    input: json!({}),
                },
            ],
            usage: Some(usage),
            ..ScriptReply::default()
        }],
    });
    // One tool call already in history, so new ids continue from 2.
    let events = collect(&client, request(tool_turn("toolu_1", "Read", "x"))).await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Ok(ModelEvent::ThinkingDelta { index: 0, .. })))
    );
    let response = completed(&events);
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.usage, usage);
    let ids: Vec<(&str, &Value)> = response
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolUse { id, input, .. } => Some((id.as_str(), input)),
            _ => None,
        })
        .collect();
    assert_eq!(ids[0], ("toolu_2", &json!({"command": "ls"})));
    assert_eq!(ids[1], ("toolu_3", &Value::String("{not json".to_string())));
    assert_eq!(ids[2].0, "mine");
}

#[tokio::test]
async fn matchers_pick_replies_and_script_runs_out() {
    let client = ScriptedClient::new(Script {
        replies: vec![
            text_reply(
                Some(Matcher {
                    last_tool_result_contains: Some("README".to_string()),
                    ..Matcher::default()
                }),
                "There is a README.",
            ),
            text_reply(
                Some(Matcher {
                    last_user_contains: Some("hello".to_string()),
                    ..Matcher::default()
                }),
                "Hi!",
            ),
        ],
    });
    let events = collect(&client, request(tool_turn("a", "LS", "README.md src"))).await;
    assert_eq!(
        completed(&events).content,
        vec![ContentBlock::Text {
            text: "There is a README.".to_string()
        }]
    );
    // The README reply is used up; a user message picks the second one.
    let events = collect(&client, request(vec![Message::user_text("hello")])).await;
    assert_eq!(
        completed(&events).content,
        vec![ContentBlock::Text {
            text: "Hi!".to_string()
        }]
    );
    match client
        .stream(request(vec![Message::user_text("hello")]))
        .await
    {
        Err(ModelError::Protocol(m)) => assert!(m.contains("no reply")),
        Err(other) => panic!("unexpected error {other:?}"),
        Ok(_) => panic!("expected the script to be exhausted"),
    }
}

#[tokio::test]
async fn http_faults_map_to_errors() {
    let cases: [(u16, &str); 7] = [
        (429, "model_rate_limited"),
        (529, "model_overloaded"),
        (503, "model_overloaded"),
        (500, "model_server_error"),
        (401, "model_auth"),
        (403, "model_auth"),
        (400, "model_bad_request"),
    ];
    for (status, code) in cases {
        let client = ScriptedClient::new(Script {
            replies: vec![ScriptReply {
                fault: Some(Fault::Http {
                    status,
                    retry_after_s: Some(2),
                    message: None,
                }),
                ..ScriptReply::default()
            }],
        });
        let Err(err) = client.stream(request(vec![Message::user_text("x")])).await else {
            panic!("expected an error for {status}");
        };
        assert_eq!(err.code().to_string(), code, "status {status}");
        if status == 429 {
            assert_eq!(err.retry_after(), Some(Duration::from_secs(2)));
        }
    }
}

#[tokio::test]
async fn cut_stream_ends_with_stream_error() {
    let client = ScriptedClient::new(Script {
        replies: vec![ScriptReply {
            fault: Some(Fault::CutStream { after_chunks: 2 }),
            ..text_reply(None, "a b c d e f g h i j k l")
        }],
    });
    let events = collect(&client, request(vec![Message::user_text("x")])).await;
    assert_eq!(events.len(), 3);
    assert!(matches!(events[0], Ok(ModelEvent::TextDelta { .. })));
    assert!(matches!(events[1], Ok(ModelEvent::TextDelta { .. })));
    assert!(matches!(events[2], Err(ModelError::Stream(_))));
}

#[tokio::test]
async fn demo_script_looks_around_then_explains_and_repeats() {
    let client = ScriptedClient::demo();
    for _turn in 0..2 {
        let mut messages = vec![Message::user_text("what is here?")];
        let first = completed(&collect(&client, request(messages.clone())).await);
        let Some(ContentBlock::ToolUse { id, name, input }) = first.content.last().cloned() else {
            panic!("expected a tool call, got {first:?}");
        };
        assert_eq!(name, "LS");
        assert_eq!(input, json!({"path": "."}));
        messages.push(Message::assistant(first.content.clone()));
        messages.push(Message {
            role: Role::User,
            content: vec![ContentBlock::tool_result(
                id,
                "Cargo.toml\nsrc/".to_string(),
                false,
            )],
        });

        let second = completed(&collect(&client, request(messages.clone())).await);
        let Some(ContentBlock::ToolUse { id, name, input }) = second.content.last().cloned() else {
            panic!("expected a tool call, got {second:?}");
        };
        assert_eq!(name, "Bash");
        assert_eq!(id, "toolu_2");
        assert!(input["command"].as_str().unwrap().starts_with("ls -la"));
        messages.push(Message::assistant(second.content.clone()));
        messages.push(Message {
            role: Role::User,
            content: vec![ContentBlock::tool_result(id, "total 0".to_string(), true)],
        });

        let last = completed(&collect(&client, request(messages)).await);
        assert_eq!(last.stop_reason, StopReason::EndTurn);
        let ContentBlock::Text { text } = &last.content[0] else {
            panic!("expected text");
        };
        assert!(text.contains("offline demo model"));
        assert!(text.contains("ANTHROPIC_API_KEY") && text.contains("OPENAI_API_KEY"));
        assert!(text.contains("[models]"));
    }
}

#[test]
fn script_json_round_trips() {
    let script: Script = serde_json::from_value(json!({"replies": [
        {"when": {"last_tool_name": "LS", "any_contains": "x"}, "repeat": true,
         "content": [{"type": "raw_tool_use", "name": "Bash", "raw_input": "{"}]},
        {"fault": {"kind": "cut_stream", "after_chunks": 3}, "delay_ms": 5}
    ]}))
    .unwrap();
    assert_eq!(script.replies.len(), 2);
    let again: Script = serde_json::from_value(serde_json::to_value(&script).unwrap()).unwrap();
    assert_eq!(again, script);
    let demo = serde_json::to_value(demo_script()).unwrap();
    assert_eq!(
        serde_json::from_value::<Script>(demo).unwrap(),
        demo_script()
    );
}
