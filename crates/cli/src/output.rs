//! How `agentd run` shows a turn: text, one JSON object, or JSON lines.

use std::collections::HashMap;
use std::io::Write;

use agentd_protocol::{DeltaKind, Event, EventEnvelope, TurnFinished, TurnStatus};
use serde_json::{Value, json};

use crate::OutputFormat;

pub struct Printer {
    format: OutputFormat,
    text: AnswerTextStream,
    /// Whether stdout's last byte was a newline, so output ends tidily.
    at_line_start: bool,
}

impl Printer {
    pub fn new(format: OutputFormat) -> Self {
        Self {
            format,
            text: AnswerTextStream::default(),
            at_line_start: true,
        }
    }

    pub fn event(&mut self, envelope: &EventEnvelope) {
        match self.format {
            OutputFormat::StreamJson => {
                if let Ok(line) = serde_json::to_string(envelope) {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{line}");
                    let _ = out.flush();
                }
            }
            OutputFormat::Text => self.text_event(&envelope.event),
            OutputFormat::Json => {}
        }
    }

    fn text_event(&mut self, event: &Event) {
        match self.text.piece(event) {
            Some(AnswerText::Delta(text)) => return self.stdout(&text),
            Some(AnswerText::Completed(rest)) => {
                self.stdout(&rest);
                return self.end_line();
            }
            None => {}
        }
        match event {
            Event::ToolStarted {
                name,
                input,
                parent_call_id,
                ..
            } => {
                self.end_line();
                let indent = if parent_call_id.is_some() {
                    "  ↳ "
                } else {
                    ""
                };
                eprintln!("{indent}● {name}({})", summarize_input(input));
            }
            Event::TodoUpdated { todos, .. } => {
                self.end_line();
                for todo in todos {
                    let mark = match todo.status {
                        agentd_protocol::TodoStatus::Completed => "☒",
                        agentd_protocol::TodoStatus::InProgress => "▶",
                        agentd_protocol::TodoStatus::Pending => "☐",
                    };
                    eprintln!("  {mark} {}", todo.content);
                }
            }
            Event::ToolFinished {
                is_error,
                output,
                duration_ms,
                ..
            } => {
                let first = first_line(output, 120);
                let mark = if *is_error { "error: " } else { "" };
                eprintln!("  ⎿ {mark}{first} ({duration_ms} ms)");
            }
            _ => {}
        }
    }

    fn stdout(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
        self.at_line_start = text.ends_with('\n');
    }

    fn end_line(&mut self) {
        if !self.at_line_start {
            self.stdout("\n");
        }
    }

    /// Print the outcome: the JSON object, or a status line when not completed.
    pub fn finish(mut self, session_id: &str, finished: &TurnFinished) {
        match self.format {
            OutputFormat::Json => {
                println!("{}", result_json(session_id, finished));
            }
            OutputFormat::Text => {
                self.end_line();
                if finished.status != TurnStatus::Completed {
                    let detail = finished
                        .error
                        .as_ref()
                        .map(|e| e.message.as_str())
                        .unwrap_or("");
                    eprintln!("agentd: turn {}: {detail}", finished.status.as_str());
                }
                eprintln!("agentd: session {session_id} (resume with --resume {session_id})");
            }
            OutputFormat::StreamJson => {}
        }
    }
}

/// The main agent's text in a turn's events (a subagent's text is its
/// report to the main agent, not the answer).
#[derive(Default)]
pub struct AnswerTextStream {
    /// Bytes of text streamed per content block of the current message (the
    /// turn's stream limit may stop deltas part way).
    streamed: HashMap<u32, usize>,
}

pub enum AnswerText {
    /// Streamed text, to show as it comes.
    Delta(String),
    /// A message ended: what of its text did not stream (providers that do
    /// not stream, text past the stream limit); the line ends after it.
    Completed(String),
}

impl AnswerTextStream {
    /// The answer's text `event` brings, if it brings any.
    pub fn piece(&mut self, event: &Event) -> Option<AnswerText> {
        match event {
            Event::MessageDelta {
                parent_call_id: None,
                index,
                kind: DeltaKind::Text,
                text,
                ..
            } => {
                *self.streamed.entry(*index).or_default() += text.len();
                Some(AnswerText::Delta(text.clone()))
            }
            Event::MessageCompleted {
                parent_call_id: None,
                message,
                ..
            } => {
                let rest = message
                    .content
                    .iter()
                    .enumerate()
                    .filter_map(|(i, block)| match block {
                        agentd_protocol::ContentBlock::Text { text } => {
                            let shown = self.streamed.get(&(i as u32)).copied().unwrap_or(0);
                            text.get(shown..)
                        }
                        _ => None,
                    })
                    .collect();
                self.streamed.clear();
                Some(AnswerText::Completed(rest))
            }
            _ => None,
        }
    }
}

/// The `--output-format json` object.
pub fn result_json(session_id: &str, finished: &TurnFinished) -> Value {
    json!({
        "session_id": session_id,
        "turn_id": finished.turn_id,
        "status": finished.status,
        "result": finished.result,
        "usage": finished.usage,
        "cost_usd": finished.cost_usd,
        "duration_ms": finished.duration_ms,
        "num_model_calls": finished.num_model_calls,
        "error": finished.error,
    })
}

/// The first line of `text`, at most `max` characters of it.
pub fn first_line(text: &str, max: usize) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(max)
        .collect()
}

/// A one-line view of a tool's input for the terminal.
pub fn summarize_input(input: &Value) -> String {
    let main = ["command", "file_path", "pattern", "path", "url"]
        .iter()
        .find_map(|key| input.get(key).and_then(Value::as_str));
    let text = match main {
        Some(text) => text.to_string(),
        None => input.to_string(),
    };
    let line = first_line(&text, 100);
    if line.len() < text.len() {
        format!("{line}…")
    } else {
        line
    }
}
