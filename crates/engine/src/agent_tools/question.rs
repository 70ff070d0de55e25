//! `AskUserQuestion`: the turn pauses with `question.asked` until the user
//! answers (API, UI or terminal) or the approver gives up.

use agentd_protocol::{Event, Resolver};
use agentd_tools::ToolResult;
use serde::Deserialize;
use serde_json::{Value, json};

use super::string;
use crate::approval::QuestionRequest;
use crate::context::TurnContext;
use crate::sink::SinkError;

pub(super) const DESCRIPTION: &str = "Ask the user one to four multiple-choice questions when \
you need a decision or a preference to go on (which approach, which library, what to name \
something). The turn waits for the answer. Users can always answer with their own text \
instead of an option. Do not use it to ask for permission to run tools.";

pub(super) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "questions": {
                "type": "array",
                "minItems": 1,
                "maxItems": 4,
                "items": {
                    "type": "object",
                    "properties": {
                        "question": string("The complete question, ending with a question mark"),
                        "header": string("A very short label for the question (at most 12 characters)"),
                        "options": {
                            "type": "array",
                            "minItems": 2,
                            "maxItems": 4,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "label": string("The option as shown (1-5 words)"),
                                    "description": string("What choosing it means")
                                },
                                "required": ["label", "description"]
                            }
                        },
                        "multiSelect": {"type": "boolean", "description": "Allow choosing several options"}
                    },
                    "required": ["question", "header", "options", "multiSelect"]
                }
            }
        },
        "required": ["questions"],
        "additionalProperties": false
    })
}

#[derive(Deserialize)]
struct Input {
    questions: Vec<Question>,
}

#[derive(Deserialize)]
struct Question {
    question: String,
    #[serde(default)]
    options: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    label: String,
}

/// The question texts, or an error for the model naming what is wrong.
fn parse(input: &Value) -> Result<Vec<String>, String> {
    let Input { questions } = serde_json::from_value(input.clone())
        .map_err(|err| format!("Invalid AskUserQuestion input: {err}"))?;
    if questions.is_empty() || questions.len() > 4 {
        return Err("Invalid AskUserQuestion input: ask one to four questions".into());
    }
    let mut texts = Vec::with_capacity(questions.len());
    for (n, q) in questions.into_iter().enumerate() {
        if q.question.trim().is_empty() {
            return Err(format!(
                "Invalid AskUserQuestion input: questions[{n}].question is empty"
            ));
        }
        if q.options.iter().any(|o| o.label.trim().is_empty()) {
            return Err(format!(
                "Invalid AskUserQuestion input: questions[{n}] has an empty option label"
            ));
        }
        if texts.contains(&q.question) {
            return Err(format!(
                "Invalid AskUserQuestion input: question {:?} is asked twice",
                q.question
            ));
        }
        texts.push(q.question);
    }
    Ok(texts)
}

/// Checks answers a client sent for `questions` (the `questions` array of a
/// `question.asked` event): an object from question text to a string or an
/// array of strings, naming only questions that were asked.
pub fn validate_answers(questions: &Value, answers: &Value) -> Result<(), String> {
    let asked: Vec<&str> = questions
        .as_array()
        .map(|qs| {
            qs.iter()
                .filter_map(|q| q.get("question")?.as_str())
                .collect()
        })
        .unwrap_or_default();
    let Some(answers) = answers.as_object() else {
        return Err("`answers` must be an object mapping each question to its answer".into());
    };
    if answers.is_empty() {
        return Err("`answers` is empty".into());
    }
    for (question, answer) in answers {
        if !asked.contains(&question.as_str()) {
            return Err(format!(
                "{question:?} is not one of the questions asked: {asked:?}"
            ));
        }
        let strings = answer
            .as_array()
            .is_some_and(|items| items.iter().all(Value::is_string));
        if !answer.is_string() && !strings {
            return Err(format!(
                "the answer to {question:?} must be a string or an array of strings"
            ));
        }
    }
    Ok(())
}

/// What the model reads: Claude Code's wording, so models trained on it follow.
fn answered(answers: &Value) -> String {
    let pairs: Vec<String> = answers
        .as_object()
        .map(|map| {
            map.iter()
                .map(|(question, answer)| {
                    let answer = match answer {
                        Value::String(text) => text.clone(),
                        Value::Array(items) => items
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", "),
                        other => other.to_string(),
                    };
                    format!("{question:?}={answer:?}")
                })
                .collect()
        })
        .unwrap_or_default();
    format!(
        "User has answered your questions: {}. You can now continue with the user's answers in mind.",
        pairs.join(", ")
    )
}

impl TurnContext<'_> {
    pub(crate) async fn ask_user_question(
        &self,
        call_id: &str,
        input: &Value,
    ) -> Result<ToolResult, SinkError> {
        if let Err(message) = parse(input) {
            return Ok(ToolResult::error(message));
        }
        let request = QuestionRequest {
            request_id: uuid::Uuid::now_v7().to_string(),
            turn_id: self.turn_id.to_string(),
            call_id: call_id.to_string(),
            questions: input.get("questions").cloned().unwrap_or(Value::Null),
        };
        let approver = &self.agent.approver;
        approver.prepare_question(&request).await;
        self.sink
            .emit(Event::QuestionAsked {
                request_id: request.request_id.clone(),
                call_id: request.call_id.clone(),
                questions: request.questions.clone(),
                parent_call_id: None,
            })
            .await?;
        // Whoever answers must be able to see the question first.
        self.sink.flush().await?;
        let answer = approver.answer_question(&request, self.cancel).await;
        let interrupted = self.cancel.is_cancelled();
        let (answers, by) = match answer.answers {
            Some(answers) if !interrupted => (Some(answers), answer.by),
            _ if interrupted => (None, Resolver::Interrupted),
            _ => (None, answer.by),
        };
        self.sink
            .emit(Event::QuestionAnswered {
                request_id: request.request_id.clone(),
                answers: answers.clone().unwrap_or(Value::Null),
                by: by.clone(),
            })
            .await?;
        Ok(match answers {
            _ if interrupted => ToolResult::error(crate::history::NOT_RUN),
            Some(answers) => ToolResult::ok(answered(&answers)),
            None => ToolResult::error(format!(
                "The user did not answer ({by}). Go on with your best judgement and say which \
                 assumption you made, or stop and explain what you need to know."
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn questions() -> Value {
        json!([{"question": "Which DB?", "header": "DB", "multiSelect": false,
                "options": [{"label": "SQLite", "description": "embedded"},
                            {"label": "Postgres", "description": "server"}]}])
    }

    #[test]
    fn parses_and_rejects() {
        assert_eq!(
            parse(&json!({"questions": questions()})).unwrap(),
            ["Which DB?"]
        );
        assert!(parse(&json!({"questions": []})).is_err());
        assert!(parse(&json!({"questions": [{"question": " "}]})).is_err());
        assert!(parse(&json!({})).is_err());
    }

    #[test]
    fn answers_are_checked_against_the_questions() {
        let qs = questions();
        validate_answers(&qs, &json!({"Which DB?": "SQLite"})).unwrap();
        validate_answers(&qs, &json!({"Which DB?": ["SQLite", "Postgres"]})).unwrap();
        assert!(validate_answers(&qs, &json!({"Other?": "x"})).is_err());
        assert!(validate_answers(&qs, &json!({"Which DB?": 3})).is_err());
        assert!(validate_answers(&qs, &json!({})).is_err());
        assert!(validate_answers(&qs, &json!("SQLite")).is_err());
    }

    #[test]
    fn the_model_reads_claude_codes_wording() {
        let text = answered(&json!({"Which DB?": "SQLite"}));
        assert_eq!(
            text,
            "User has answered your questions: \"Which DB?\"=\"SQLite\". You can now continue with the user's answers in mind."
        );
    }
}
