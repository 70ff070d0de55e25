//! Asking the person at the terminal whether a tool call may run, and the
//! agent's questions.

use std::io::{BufRead, IsTerminal, Write};

use agentd_engine::{Answer, ApprovalRequest, Decision, QuestionAnswer, QuestionRequest};
use agentd_server::approvals::AnswerSource;
use agentd_server::config::NoAnswer;
use async_trait::async_trait;

/// Prompts on stderr and reads the answer from stdin when stdin is a terminal;
/// otherwise answers at once with the profile's `on_no_answer`.
pub struct TerminalAnswers {
    pub on_no_answer: NoAnswer,
}

#[async_trait]
impl AnswerSource for TerminalAnswers {
    async fn ask(&self, request: &ApprovalRequest) -> Option<Answer> {
        if !std::io::stdin().is_terminal() {
            let decision = match self.on_no_answer {
                NoAnswer::Deny => Decision::Deny,
                NoAnswer::Allow => Decision::Allow,
            };
            return Some(Answer::new(decision, "no_terminal"));
        }
        let prompt = format!(
            "\nagentd: {} wants to run: {}\n  ({})\n  allow? [y]es / [a]lways in this session / [n]o: ",
            request.tool,
            crate::output::summarize_input(&request.input),
            request.reason
        );
        // A blocking read on its own thread; an interrupt abandons it.
        let line = tokio::task::spawn_blocking(move || {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(prompt.as_bytes());
            let _ = err.flush();
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).map(|_| line)
        })
        .await
        .ok()?
        .ok()?;
        let decision = match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => Decision::Allow,
            "a" | "always" => Decision::AllowSession,
            _ => Decision::Deny,
        };
        Some(Answer::new(decision, "user"))
    }

    async fn ask_question(&self, request: &QuestionRequest) -> Option<QuestionAnswer> {
        if !std::io::stdin().is_terminal() {
            return Some(QuestionAnswer::unanswered("no_terminal"));
        }
        let questions = request.questions.as_array().cloned().unwrap_or_default();
        let answers = tokio::task::spawn_blocking(move || ask_on_terminal(&questions))
            .await
            .ok()??;
        Some(QuestionAnswer {
            answers: Some(answers),
            by: "user".into(),
        })
    }
}

/// One prompt per question: a number (several, comma-separated, for
/// multi-select) picks options; anything else is the user's own answer.
fn ask_on_terminal(questions: &[serde_json::Value]) -> Option<serde_json::Value> {
    let mut answers = serde_json::Map::new();
    let mut err = std::io::stderr().lock();
    for q in questions {
        let text = q.get("question")?.as_str()?.to_string();
        let labels: Vec<String> = q
            .get("options")
            .and_then(|o| o.as_array())
            .map(|options| {
                options
                    .iter()
                    .filter_map(|o| o.get("label")?.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let multi = q.get("multiSelect").and_then(|m| m.as_bool()) == Some(true);
        let _ = writeln!(err, "\nagentd asks: {text}");
        for (n, label) in labels.iter().enumerate() {
            let _ = writeln!(err, "  {}. {label}", n + 1);
        }
        let hint = if multi {
            "numbers, comma-separated,"
        } else {
            "a number"
        };
        let _ = write!(err, "  answer ({hint} or your own words): ");
        let _ = err.flush();
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).ok()?;
        let line = line.trim();
        let picked: Option<Vec<String>> = line
            .split(',')
            .map(|part| {
                let n: usize = part.trim().parse().ok()?;
                labels.get(n.checked_sub(1)?).cloned()
            })
            .collect();
        let answer = match picked {
            Some(mut picked) if multi => serde_json::json!(std::mem::take(&mut picked)),
            Some(picked) if picked.len() == 1 => serde_json::json!(picked[0]),
            _ => serde_json::json!(line),
        };
        answers.insert(text, answer);
    }
    Some(serde_json::Value::Object(answers))
}
