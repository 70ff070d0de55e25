//! Asking the person at the terminal whether a tool call may run, and the
//! agent's questions.
//!
//! One thread reads stdin for the whole process and prompts take turns
//! (parallel subagents may ask at the same time): each prompt holds the
//! terminal until it has its line, and lines typed while no prompt was
//! showing are dropped, so an answer always goes to the question on screen.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::OnceLock;

use agentd_engine::{Answer, ApprovalRequest, Decision, QuestionAnswer, QuestionRequest};
use agentd_protocol::Resolver;
use agentd_server::approvals::AnswerSource;
use agentd_server::config::NoAnswer;
use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::{Mutex, mpsc};

/// Prompts on stderr and reads the answer from stdin when it may; otherwise
/// answers at once with the profile's `on_no_answer`.
pub struct TerminalAnswers {
    on_no_answer: NoAnswer,
    /// Stdin is a terminal and nothing else reads it.
    may_ask: bool,
}

impl TerminalAnswers {
    /// Answers for a run whose stdin `holds_messages` (`--input-format
    /// stream-json`): then its messages' reader owns stdin, and a second
    /// reader here would take their lines, so nobody is asked, as without a
    /// terminal.
    pub fn new(on_no_answer: NoAnswer, holds_messages: bool) -> Self {
        Self {
            on_no_answer,
            may_ask: !holds_messages && std::io::stdin().is_terminal(),
        }
    }
}

/// Lines of stdin, read by one thread started on first use.
fn stdin_lines() -> &'static Mutex<mpsc::UnboundedReceiver<String>> {
    static LINES: OnceLock<Mutex<mpsc::UnboundedReceiver<String>>> = OnceLock::new();
    LINES.get_or_init(|| {
        let (sender, receiver) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Mutex::new(receiver)
    })
}

/// Shows `prompts` one after another and returns a line for each; `None` when
/// stdin closed. Holds the terminal throughout.
async fn ask_lines(prompts: Vec<String>) -> Option<Vec<String>> {
    let mut lines = stdin_lines().lock().await;
    while lines.try_recv().is_ok() {}
    let mut answers = Vec::with_capacity(prompts.len());
    for prompt in prompts {
        {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(prompt.as_bytes());
            let _ = err.flush();
        }
        answers.push(lines.recv().await?);
    }
    Some(answers)
}

#[async_trait]
impl AnswerSource for TerminalAnswers {
    async fn ask(&self, request: &ApprovalRequest) -> Option<Answer> {
        if !self.may_ask {
            let decision = match self.on_no_answer {
                NoAnswer::Deny => Decision::Deny,
                NoAnswer::Allow => Decision::Allow,
            };
            return Some(Answer::new(decision, Resolver::NoTerminal));
        }
        let prompt = format!(
            "\nagentd: {} wants to run: {}\n  ({})\n  allow? [y]es / [a]lways in this session / [n]o: ",
            request.tool,
            crate::output::summarize_input(&request.input),
            request.reason
        );
        let line = ask_lines(vec![prompt]).await?.pop()?;
        let decision = match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => Decision::Allow,
            "a" | "always" => Decision::AllowSession,
            _ => Decision::Deny,
        };
        Some(Answer::new(decision, Resolver::Terminal))
    }

    async fn ask_question(&self, request: &QuestionRequest) -> Option<QuestionAnswer> {
        if !self.may_ask {
            return Some(QuestionAnswer::unanswered(Resolver::NoTerminal));
        }
        let questions: Vec<Question> = request
            .questions
            .as_array()
            .map(|qs| qs.iter().filter_map(Question::parse).collect())
            .unwrap_or_default();
        let lines = ask_lines(questions.iter().map(Question::prompt).collect()).await?;
        let answers = questions
            .iter()
            .zip(lines)
            .map(|(question, line)| (question.text.clone(), question.answer(line.trim())))
            .collect();
        Some(QuestionAnswer {
            answers: Some(Value::Object(answers)),
            by: Resolver::Terminal,
        })
    }
}

/// One of the agent's questions (`AskUserQuestion`), asked at a terminal;
/// `agentd chat` asks them too.
pub struct Question {
    pub text: String,
    labels: Vec<String>,
    multi: bool,
}

impl Question {
    pub fn parse(q: &Value) -> Option<Self> {
        let labels = q
            .get("options")
            .and_then(Value::as_array)
            .map(|options| {
                options
                    .iter()
                    .filter_map(|o| o.get("label")?.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        Some(Self {
            text: q.get("question")?.as_str()?.to_string(),
            labels,
            multi: q.get("multiSelect").and_then(Value::as_bool) == Some(true),
        })
    }

    pub fn prompt(&self) -> String {
        let mut prompt = format!("\nagentd asks: {}\n", self.text);
        for (n, label) in self.labels.iter().enumerate() {
            prompt.push_str(&format!("  {}. {label}\n", n + 1));
        }
        let hint = if self.multi {
            "numbers, comma-separated,"
        } else {
            "a number"
        };
        prompt.push_str(&format!("  answer ({hint} or your own words): "));
        prompt
    }

    /// A number (several, comma-separated, for multi-select) picks options;
    /// anything else is the user's own answer.
    pub fn answer(&self, line: &str) -> Value {
        let picked: Option<Vec<String>> = line
            .split(',')
            .map(|part| {
                let n: usize = part.trim().parse().ok()?;
                self.labels.get(n.checked_sub(1)?).cloned()
            })
            .collect();
        match picked {
            Some(picked) if self.multi => Value::from(picked),
            Some(mut picked) if picked.len() == 1 => Value::from(picked.remove(0)),
            _ => Value::from(line),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_pick_options_and_anything_else_is_free_text() {
        let single = Question::parse(&json!({"question": "Q?", "options": [
            {"label": "A"}, {"label": "B"}]}))
        .unwrap();
        assert_eq!(single.answer("2"), json!("B"));
        assert_eq!(single.answer("something else"), json!("something else"));
        assert_eq!(single.answer("3"), json!("3"));
        let multi = Question::parse(&json!({"question": "Q?", "multiSelect": true, "options": [
            {"label": "A"}, {"label": "B"}]}))
        .unwrap();
        assert_eq!(multi.answer("1, 2"), json!(["A", "B"]));
        assert!(multi.prompt().contains("2. B"));
    }
}
