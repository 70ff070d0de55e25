//! How a conversation looks in the terminal: the assistant's text as it
//! streams, one line per tool call, and the transcript of a resumed session.

use std::collections::HashMap;

use agentd_protocol::{ContentBlock, Event, Message, Role};
use crossterm::style::Stylize;
use serde_json::Value;

use super::term::Terminal;
use crate::output::{AnswerText, AnswerTextStream, first_line, summarize_input};

/// The live view of one session's events.
#[derive(Default)]
pub struct Renderer {
    text: AnswerTextStream,
    /// Tool calls started and not finished: their card's head.
    running: HashMap<String, String>,
}

impl Renderer {
    /// An event from before the chat looked (its text is in the
    /// transcript): only which tool calls still run is kept.
    pub fn replayed(&mut self, event: &Event) {
        match event {
            Event::ToolStarted {
                call_id,
                name,
                input,
                ..
            } => {
                self.running
                    .insert(call_id.clone(), format!("● {}", card_head(name, input)));
            }
            Event::ToolFinished { call_id, .. } => {
                self.running.remove(call_id);
            }
            _ => {}
        }
    }

    pub fn event(&mut self, term: &mut Terminal, event: &Event) {
        match self.text.piece(event) {
            Some(AnswerText::Delta(text)) => return term.text(&text),
            Some(AnswerText::Completed(rest)) => {
                term.text(&rest);
                return term.end_line();
            }
            None => {}
        }
        match event {
            Event::ToolStarted {
                call_id,
                name,
                input,
                parent_call_id,
                ..
            } => {
                let indent = if parent_call_id.is_some() { "  " } else { "" };
                self.running.insert(
                    call_id.clone(),
                    format!("{indent}● {}", card_head(name, input)),
                );
            }
            Event::ToolFinished {
                call_id,
                is_error,
                output,
                duration_ms,
            } => {
                let head = self.running.remove(call_id).unwrap_or_default();
                term.line(tool_card(&head, *is_error, output, Some(*duration_ms)));
            }
            Event::Compaction {
                tokens_before,
                tokens_after,
                ..
            } => term.line(
                format!("(conversation compacted: {tokens_before} → {tokens_after} tokens)").dim(),
            ),
            Event::TurnFinished(finished) => {
                for (_, head) in self.running.drain() {
                    term.line(format!("{head} {}", "(not finished)".dim()));
                }
                term.end_line();
                if finished.status != agentd_protocol::TurnStatus::Completed {
                    let detail = finished
                        .error
                        .as_ref()
                        .map(|e| format!(": {}", e.message))
                        .unwrap_or_default();
                    term.line(format!("(turn {}{detail})", finished.status.as_str()).yellow());
                }
            }
            Event::Error(error) => term.line(format!("error: {}", error.message).red()),
            _ => {}
        }
    }
}

/// `Name(input summary)`.
pub fn card_head(name: &str, input: &Value) -> String {
    format!("{name}({})", summarize_input(input))
}

/// A tool call on one line: its head, then ✓ or ✗ and what to know.
fn tool_card(head: &str, is_error: bool, output: &str, duration_ms: Option<u64>) -> String {
    let status = if is_error {
        format!("{} {}", "✗".red(), first_line(output, 80).red())
    } else {
        "✓".green().to_string()
    };
    let time = duration_ms
        .map(|ms| format!(" {}", format!("{ms} ms").dim()))
        .unwrap_or_default();
    format!("{head} {status}{time}")
}

/// A stored transcript, as it looked live.
pub fn transcript(term: &mut Terminal, messages: &[Message]) {
    let mut calls: HashMap<&str, String> = HashMap::new();
    for message in messages {
        for block in &message.content {
            match (block, message.role) {
                (ContentBlock::Text { text }, Role::User) => {
                    term.line(format!("{} {text}", "›".bold()))
                }
                (ContentBlock::Text { text }, Role::Assistant) => term.line(text),
                (ContentBlock::ToolUse { id, name, input }, _) => {
                    calls.insert(id, format!("● {}", card_head(name, input)));
                }
                (
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                        ..
                    },
                    _,
                ) => {
                    let head = calls.remove(tool_use_id.as_str()).unwrap_or_default();
                    term.line(tool_card(&head, *is_error, content, None));
                }
                _ => {}
            }
        }
    }
}
