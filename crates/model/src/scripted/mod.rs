//! Deterministic scripted replies: the format shared by the in-process
//! [`ScriptedClient`] (the offline `demo` model) and the testkit model server.
//!
//! A [`Script`] is an ordered list of replies. For each request the first unused
//! reply whose `when` matches is chosen (no `when` matches anything) and used up,
//! unless it says `repeat`. A `when` may test `last_user_contains`,
//! `last_tool_result_contains`, `last_tool_name` (the tool whose result is last)
//! and `any_contains` (system prompt and all messages). Example:
//!
//! ```json
//! {"replies": [
//!   {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}]},
//!   {"fault": {"kind": "http", "status": 429, "retry_after_s": 1}},
//!   {"when": {"last_tool_result_contains": "README"},
//!    "content": [{"type": "text", "text": "There is a README."}]}
//! ]}
//! ```

use std::time::Duration;

use agentd_protocol::{ContentBlock, Role, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ModelError, ModelRequest, StopReason};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    pub replies: Vec<ScriptReply>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptReply {
    #[serde(default)]
    pub when: Option<Matcher>,
    /// Stay available after being used.
    #[serde(default)]
    pub repeat: bool,
    #[serde(default)]
    pub content: Vec<ScriptBlock>,
    /// Defaults to `tool_use` when the content has a tool call, else `end_turn`.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// Defaults to an estimate from the request and reply sizes.
    #[serde(default)]
    pub usage: Option<Usage>,
    #[serde(default)]
    pub fault: Option<Fault>,
    /// Pause between streamed chunks ("slow tokens").
    #[serde(default)]
    pub delay_ms: u64,
}

/// Conditions on the request's last message; all that are set must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matcher {
    pub last_user_contains: Option<String>,
    pub last_tool_result_contains: Option<String>,
    /// Anywhere in the request's messages or system prompt.
    pub any_contains: Option<String>,
    /// The last message holds a result of a call to the tool with this name.
    #[serde(default)]
    pub last_tool_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ScriptBlock {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
    },
    /// `id` is generated (`toolu_…` / `call_…`) when absent.
    ToolUse {
        #[serde(default)]
        id: Option<String>,
        name: String,
        input: Value,
    },
    /// A tool call whose input is sent verbatim, e.g. invalid JSON.
    RawToolUse {
        #[serde(default)]
        id: Option<String>,
        name: String,
        raw_input: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Answer with this HTTP status (429, 500, 529, 401, …) instead of a reply.
    Http {
        status: u16,
        #[serde(default)]
        retry_after_s: Option<u64>,
        #[serde(default)]
        message: Option<String>,
    },
    /// Start streaming the reply, then drop the connection after this many
    /// streamed chunks (before the message is complete).
    CutStream { after_chunks: usize },
    /// Answer 200 with a body that is not the wire format.
    Garbage,
}

/// The parts of a request a [`Matcher`] looks at, provider-neutral.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestView {
    pub last_user_text: Option<String>,
    pub last_tool_result: Option<String>,
    /// Names of the tools whose results the last message holds.
    pub last_tool_names: Vec<String>,
    pub all_text: String,
}

impl Matcher {
    pub fn matches(&self, view: &RequestView) -> bool {
        fn holds(needle: &Option<String>, hay: Option<&str>) -> bool {
            match needle {
                None => true,
                Some(needle) => hay.is_some_and(|hay| hay.contains(needle.as_str())),
            }
        }
        holds(&self.last_user_contains, view.last_user_text.as_deref())
            && holds(
                &self.last_tool_result_contains,
                view.last_tool_result.as_deref(),
            )
            && holds(&self.any_contains, Some(view.all_text.as_str()))
            && self
                .last_tool_name
                .as_ref()
                .is_none_or(|name| view.last_tool_names.iter().any(|n| n == name))
    }
}

/// A script being played: which replies are used up.
#[derive(Debug, Clone)]
pub struct ScriptState {
    replies: Vec<ScriptReply>,
    used: Vec<bool>,
}

impl ScriptState {
    pub fn new(script: Script) -> Self {
        let used = vec![false; script.replies.len()];
        Self {
            replies: script.replies,
            used,
        }
    }

    /// The reply for a request, or `None` when the script has none left that fits.
    pub fn next_reply(&mut self, view: &RequestView) -> Option<ScriptReply> {
        let index = self.replies.iter().enumerate().position(|(i, reply)| {
            !self.used[i] && reply.when.as_ref().is_none_or(|m| m.matches(view))
        })?;
        let reply = &self.replies[index];
        if !reply.repeat {
            self.used[index] = true;
        }
        Some(reply.clone())
    }
}

impl ScriptReply {
    /// The stop reason to report: the scripted one, else derived from the content.
    pub fn effective_stop_reason(&self) -> StopReason {
        self.stop_reason.unwrap_or_else(|| {
            let calls_tool = self.content.iter().any(|b| {
                matches!(
                    b,
                    ScriptBlock::ToolUse { .. } | ScriptBlock::RawToolUse { .. }
                )
            });
            if calls_tool {
                StopReason::ToolUse
            } else {
                StopReason::EndTurn
            }
        })
    }

    /// The scripted usage, else an estimate from the request's size in characters.
    pub fn effective_usage(&self, request_chars: usize) -> Usage {
        self.usage.unwrap_or_else(|| {
            let reply_chars: usize = self.content.iter().map(ScriptBlock::char_len).sum();
            Usage {
                input_tokens: estimate_tokens(request_chars),
                output_tokens: estimate_tokens(reply_chars),
                ..Usage::default()
            }
        })
    }
}

impl ScriptBlock {
    fn char_len(&self) -> usize {
        match self {
            ScriptBlock::Text { text } => text.len(),
            ScriptBlock::Thinking { thinking } => thinking.len(),
            ScriptBlock::ToolUse { name, input, .. } => name.len() + input.to_string().len(),
            ScriptBlock::RawToolUse {
                name, raw_input, ..
            } => name.len() + raw_input.len(),
        }
    }
}

/// Rough token count: four characters a token, at least one.
pub fn estimate_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4).max(1)
}

/// Splits text into the pieces streamed as deltas: a few words each, so that even
/// short replies arrive in several chunks.
pub fn text_chunks(text: &str) -> Vec<String> {
    const WORDS_PER_CHUNK: usize = 3;
    let words: Vec<&str> = text.split_inclusive(char::is_whitespace).collect();
    if words.len() <= 1 {
        // One word: split it in two so consumers still see more than one delta.
        let mid = text
            .char_indices()
            .map(|(i, _)| i)
            .nth(text.chars().count() / 2);
        return match mid {
            Some(mid) if mid > 0 => vec![text[..mid].to_string(), text[mid..].to_string()],
            _ if text.is_empty() => Vec::new(),
            _ => vec![text.to_string()],
        };
    }
    words.chunks(WORDS_PER_CHUNK).map(|c| c.concat()).collect()
}

/// Splits serialized tool input into several pieces (on char boundaries), as
/// providers stream it.
pub fn json_chunks(json: &str) -> Vec<String> {
    const PIECES: usize = 3;
    let chars: Vec<char> = json.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(PIECES).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// The provider-neutral view of a request that matchers look at.
pub fn request_view(req: &ModelRequest) -> RequestView {
    let mut all_text = req.system.clone().unwrap_or_default();
    let mut tool_names: Vec<(&str, &str)> = Vec::new();
    for message in req.messages.iter() {
        for block in &message.content {
            match block {
                ContentBlock::Text { text } => push_text(&mut all_text, text),
                ContentBlock::ToolResult { content, .. } => push_text(&mut all_text, content),
                ContentBlock::ToolUse { id, name, input } => {
                    push_text(&mut all_text, &input.to_string());
                    tool_names.push((id, name));
                }
                ContentBlock::Thinking { .. }
                | ContentBlock::Image { .. }
                | ContentBlock::Document { .. } => {}
            }
        }
    }
    let mut view = RequestView {
        all_text,
        ..RequestView::default()
    };
    if let Some(last) = req.messages.last().filter(|m| m.role == Role::User) {
        let mut user_text: Option<String> = None;
        let mut results: Option<String> = None;
        for block in &last.content {
            match block {
                ContentBlock::Text { text } => append(&mut user_text, text),
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } => {
                    append(&mut results, content);
                    if let Some((_, name)) =
                        tool_names.iter().rev().find(|(id, _)| id == tool_use_id)
                    {
                        view.last_tool_names.push((*name).to_string());
                    }
                }
                _ => {}
            }
        }
        view.last_user_text = user_text;
        view.last_tool_result = results;
    }
    view
}

fn push_text(all: &mut String, text: &str) {
    if !all.is_empty() {
        all.push('\n');
    }
    all.push_str(text);
}

fn append(slot: &mut Option<String>, text: &str) {
    match slot {
        Some(s) => push_text(s, text),
        None => *slot = Some(text.to_string()),
    }
}

/// Maps a scripted HTTP fault to the error a real provider client would return.
pub fn http_fault_error(
    status: u16,
    retry_after_s: Option<u64>,
    message: Option<&str>,
) -> ModelError {
    let message = message.map_or_else(|| format!("scripted fault: HTTP {status}"), str::to_string);
    let retry_after = retry_after_s.map(Duration::from_secs);
    match status {
        429 => ModelError::RateLimited {
            message,
            retry_after,
        },
        503 | 529 => ModelError::Overloaded {
            message,
            retry_after,
        },
        401 | 403 => ModelError::Auth { status, message },
        500..=599 => ModelError::Server {
            status,
            message,
            retry_after,
        },
        _ => ModelError::BadRequest { status, message },
    }
}

mod client;

pub use client::{DEMO_SUMMARY, ScriptedClient, demo_script};

#[cfg(test)]
mod tests;
