//! One turn, watched live: its events rendered as they come, permission
//! requests and questions answered inline through the approvals API, and
//! Esc or Ctrl-C interrupting it.

use agentd_protocol::{Event, EventEnvelope};
use crossterm::style::Stylize;
use futures::StreamExt;
use serde_json::{Value, json};

use super::Conversation;
use super::api::ApiResult;
use super::render::{Renderer, card_head};
use super::term::{Input, Key, KeyWatch};
use crate::approve::Question;

/// What starts the turn.
pub enum Start {
    Message(String),
    Compact,
}

impl Conversation {
    /// Run a turn to its end (or until the event stream breaks).
    pub async fn turn(&mut self, start: Start) -> ApiResult<()> {
        let id = self.session.clone();
        // Opened first, from the last event seen: nothing of the turn is missed.
        let mut events = self.api.events(&id, self.last_seq).await?;
        let accepted = match start {
            Start::Message(content) => {
                let path = format!("/v1/sessions/{id}/messages");
                self.api.post(&path, json!({"content": content})).await?
            }
            Start::Compact => {
                let path = format!("/v1/sessions/{id}/compact");
                self.api.post(&path, json!({})).await?
            }
        };
        let turn_id = accepted["turn_id"].as_str().unwrap_or_default().to_string();
        let mut renderer = Renderer::default();
        let mut keys = KeyWatch::start();
        let outcome = loop {
            tokio::select! {
                envelope = events.next() => match envelope {
                    Some(Ok(envelope)) => {
                        self.last_seq = envelope.seq;
                        match self.on_event(&mut renderer, &mut keys, envelope).await {
                            Ok(done) if done == turn_id => break Ok(()),
                            Ok(_) => {}
                            Err(err) => break Err(err),
                        }
                    }
                    Some(Err(err)) => break Err(err),
                    None => break Err(super::api::ApiError {
                        status: None,
                        message: "the server ended the event stream".into(),
                    }),
                },
                Some(key) = keys.keys.recv() => {
                    if key == Key::Interrupt {
                        self.interrupt().await;
                    }
                }
            }
        };
        keys.pause().await;
        outcome
    }

    /// Show one event and answer what asks; the id of the turn it finished,
    /// if it did.
    async fn on_event(
        &mut self,
        renderer: &mut Renderer,
        keys: &mut KeyWatch,
        envelope: EventEnvelope,
    ) -> ApiResult<String> {
        match envelope.event {
            Event::PermissionRequested {
                request_id,
                tool,
                input,
                reason,
                ..
            } => {
                self.term.line(format!(
                    "{} {} {}",
                    "?".yellow().bold(),
                    card_head(&tool, &input).bold(),
                    format!("({reason})").dim()
                ));
                self.term.text("  allow? [y] once  [a] always  [n] deny: ");
                let answer = loop {
                    match keys.keys.recv().await {
                        Some(Key::Char('y')) => break json!({"decision": "allow"}),
                        Some(Key::Char('a')) => {
                            break json!({"decision": "allow", "remember": "session"});
                        }
                        Some(Key::Char('n')) => break json!({"decision": "deny"}),
                        Some(Key::Interrupt) | None => {
                            self.term.text("deny\n");
                            self.interrupt().await;
                            return Ok(String::new());
                        }
                        Some(Key::Char(_)) => {}
                    }
                };
                let said = match (&answer["decision"], &answer["remember"]) {
                    (_, Value::String(_)) => "always",
                    (Value::String(d), _) if d == "allow" => "once",
                    _ => "deny",
                };
                self.term.text(&format!("{said}\n"));
                let path = format!("/v1/sessions/{}/permissions/{request_id}", self.session);
                self.report(self.api.post(&path, answer).await);
            }
            Event::QuestionAsked {
                request_id,
                questions,
                ..
            } => {
                // The editor reads the answers: the key watch lets go.
                keys.pause().await;
                let answered = self.ask(&questions);
                keys.resume();
                match answered {
                    Some(answers) => {
                        let path = format!("/v1/sessions/{}/questions/{request_id}", self.session);
                        let body = json!({"answers": answers});
                        self.report(self.api.post(&path, body).await);
                    }
                    None => self.interrupt().await,
                }
            }
            Event::TurnFinished(finished) => {
                let done = finished.turn_id.clone();
                renderer.event(&mut self.term, &Event::TurnFinished(finished));
                return Ok(done);
            }
            event => renderer.event(&mut self.term, &event),
        }
        Ok(String::new())
    }

    /// The answers to the agent's questions; `None` when the person pressed
    /// Ctrl-C (the turn is interrupted).
    fn ask(&mut self, questions: &Value) -> Option<Value> {
        let questions: Vec<Question> = questions
            .as_array()
            .map(|qs| qs.iter().filter_map(Question::parse).collect())
            .unwrap_or_default();
        let mut answers = serde_json::Map::new();
        for question in &questions {
            let prompt = question.prompt();
            let (lines, last) = prompt
                .trim_start()
                .rsplit_once('\n')
                .unwrap_or(("", &prompt));
            for line in lines.lines() {
                self.term.line(line);
            }
            match self.term.read(last) {
                Input::Line(line) => {
                    answers.insert(question.text.clone(), question.answer(line.trim()));
                }
                Input::CtrlC | Input::End => return None,
            }
        }
        Some(Value::Object(answers))
    }

    /// Ask the server to stop the running turn; `turn.finished` follows.
    pub async fn interrupt(&mut self) {
        self.term.line("(interrupting…)".yellow());
        let path = format!("/v1/sessions/{}/interrupt", self.session);
        if let Err(err) = self.api.post(&path, json!({})).await
            && err.status != Some(reqwest::StatusCode::CONFLICT)
        {
            self.term.line(format!("error: {err}").red());
        }
    }

    /// Show a failed call; the conversation goes on.
    pub fn report<T>(&mut self, outcome: ApiResult<T>) {
        if let Err(err) = outcome {
            self.term.line(format!("error: {err}").red());
        }
    }
}
