//! Deterministic scripted replies: the format shared by the in-process
//! [`ScriptedClient`] (the offline `demo` model) and the testkit model server.
//!
//! A [`Script`] is an ordered list of replies. For each request the first unused
//! reply whose `when` matches is chosen (no `when` matches anything) and used up,
//! unless it says `repeat`. Example:
//!
//! ```json
//! {"replies": [
//!   {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}]},
//!   {"fault": {"kind": "http", "status": 429, "retry_after_s": 1}},
//!   {"when": {"last_tool_result_contains": "README"},
//!    "content": [{"type": "text", "text": "There is a README."}]}
//! ]}
//! ```

use agentd_protocol::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::StopReason;

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
