//! The agent's requests that wait for the person: a permission (one key:
//! y, a or n) or questions (a line each, typed while the turn's key watch
//! reads keys, so the event stream is read all the while and an answer from
//! elsewhere takes the prompt down).

use crossterm::style::Stylize;
use serde_json::{Map, Value, json};

use super::Conversation;
use super::render::card_head;
use super::term::Key;
use crate::approve::Question;

/// A request seen in the event stream, not answered yet.
pub enum Ask {
    Permission {
        request_id: String,
        head: String,
        reason: String,
    },
    Question {
        request_id: String,
        questions: Vec<Question>,
    },
}

impl Ask {
    pub fn permission(request_id: String, tool: &str, input: &Value, reason: String) -> Self {
        Ask::Permission {
            request_id,
            head: card_head(tool, input),
            reason,
        }
    }

    pub fn question(request_id: String, questions: &Value) -> Self {
        let questions = questions
            .as_array()
            .map(|qs| qs.iter().filter_map(Question::parse).collect())
            .unwrap_or_default();
        Ask::Question {
            request_id,
            questions,
        }
    }

    pub fn id(&self) -> &str {
        match self {
            Ask::Permission { request_id, .. } | Ask::Question { request_id, .. } => request_id,
        }
    }
}

/// The request on screen, and what has been typed for it so far.
pub struct Asking {
    pub ask: Ask,
    /// The question being answered, its line, and the answers before it.
    question: usize,
    line: String,
    answers: Map<String, Value>,
}

impl Conversation {
    /// Put `ask` on screen; `None` when there was nothing to ask (a
    /// question request without a question is answered at once).
    pub async fn show(&mut self, ask: Ask) -> Option<Asking> {
        match &ask {
            Ask::Permission { head, reason, .. } => {
                self.term.line(format!(
                    "{} {} {}",
                    "?".yellow().bold(),
                    head.clone().bold(),
                    format!("({reason})").dim()
                ));
                self.term.text("  allow? [y] once  [a] always  [n] deny: ");
            }
            Ask::Question { questions, .. } => {
                let Some(first) = questions.first() else {
                    self.post_answer(&ask, json!({"answers": {}})).await;
                    return None;
                };
                let prompt = first.prompt();
                self.prompt_question(&prompt);
            }
        }
        Some(Asking {
            ask,
            question: 0,
            line: String::new(),
            answers: Map::new(),
        })
    }

    /// The question's lines, its last one left open for the answer.
    fn prompt_question(&mut self, prompt: &str) {
        let (lines, last) = prompt
            .trim_start()
            .rsplit_once('\n')
            .unwrap_or(("", prompt));
        for line in lines.lines() {
            self.term.line(line);
        }
        self.term.text(last);
    }

    /// A key pressed while `asking` is on screen (not Esc or Ctrl-C); what
    /// is still asked after it.
    pub async fn answer_key(&mut self, mut asking: Asking, key: Key) -> Option<Asking> {
        let questions = match &asking.ask {
            Ask::Permission { .. } => {
                let (body, said) = match key {
                    Key::Char('y' | 'Y') => (json!({"decision": "allow"}), "once"),
                    Key::Char('a' | 'A') => (
                        json!({"decision": "allow", "remember": "session"}),
                        "always",
                    ),
                    Key::Char('n' | 'N') => (json!({"decision": "deny"}), "deny"),
                    _ => return Some(asking),
                };
                self.term.text(&format!("{said}\n"));
                self.post_answer(&asking.ask, body).await;
                return None;
            }
            Ask::Question { questions, .. } => questions,
        };
        match key {
            Key::Char(c) => {
                asking.line.push(c);
                self.term.text(&c.to_string());
            }
            Key::Backspace => {
                if asking.line.pop().is_some() {
                    self.term.backspace();
                }
            }
            Key::Enter => {
                self.term.text("\n");
                let question = &questions[asking.question];
                let line = std::mem::take(&mut asking.line);
                asking
                    .answers
                    .insert(question.text.clone(), question.answer(line.trim()));
                asking.question += 1;
                match questions.get(asking.question) {
                    Some(next) => {
                        let prompt = next.prompt();
                        self.prompt_question(&prompt);
                    }
                    None => {
                        let answers = std::mem::take(&mut asking.answers);
                        self.post_answer(&asking.ask, json!({"answers": answers}))
                            .await;
                        return None;
                    }
                }
            }
            Key::Interrupt => {}
        }
        Some(asking)
    }

    /// Answer `ask` through the approvals API. One answered elsewhere just
    /// before is said so, not shown as an error.
    async fn post_answer(&mut self, ask: &Ask, body: Value) {
        let kind = match ask {
            Ask::Permission { .. } => "permissions",
            Ask::Question { .. } => "questions",
        };
        let path = format!("/v1/sessions/{}/{kind}/{}", self.session, ask.id());
        match self.api.post(&path, body).await {
            Err(err) if err.status == Some(reqwest::StatusCode::CONFLICT) => self
                .term
                .line(format!("(not taken: {})", err.message).dim()),
            outcome => self.report(outcome),
        }
    }
}
