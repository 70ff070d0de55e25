//! Asking the person at the terminal whether a tool call may run.

use std::io::{BufRead, IsTerminal, Write};

use agentd_engine::{Answer, ApprovalRequest, Decision};
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
}
