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

use std::sync::Mutex;
use std::time::Duration;

use agentd_protocol::{ContentBlock, Message, Role, Usage};
use async_trait::async_trait;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{
    ModelClient, ModelError, ModelEvent, ModelRequest, ModelResponse, ModelStream, StopReason,
};

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
                ContentBlock::Thinking { .. } | ContentBlock::Image { .. } => {}
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

/// A deterministic in-process model that plays a [`Script`]. Shared by
/// concurrent callers: each request takes the next matching reply.
pub struct ScriptedClient {
    state: Mutex<ScriptState>,
    requests: Mutex<Vec<ModelRequest>>,
}

impl ScriptedClient {
    pub fn new(script: Script) -> Self {
        Self {
            state: Mutex::new(ScriptState::new(script)),
            requests: Mutex::new(Vec::new()),
        }
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The offline demo model, see [`demo_script`].
    pub fn demo() -> Self {
        Self::new(demo_script())
    }

    fn next_reply(&self, view: &RequestView) -> Option<ScriptReply> {
        // A poisoned lock only means another caller panicked mid-pick; the state is still usable.
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.next_reply(view)
    }
}

#[async_trait]
impl ModelClient for ScriptedClient {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let view = request_view(&request);
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(request.clone());
        let reply = self.next_reply(&view).ok_or_else(|| {
            ModelError::Protocol("scripted model has no reply for this request".to_string())
        })?;
        let cut_after = match &reply.fault {
            Some(Fault::Http {
                status,
                retry_after_s,
                message,
            }) => {
                return Err(http_fault_error(
                    *status,
                    *retry_after_s,
                    message.as_deref(),
                ));
            }
            Some(Fault::Garbage) => {
                return Err(ModelError::Protocol(
                    "scripted model answered with garbage".to_string(),
                ));
            }
            Some(Fault::CutStream { after_chunks }) => Some(*after_chunks),
            None => None,
        };

        let tools_chars: usize = request
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.input_schema.to_string().len())
            .sum();
        let usage = reply.effective_usage(view.all_text.len() + tools_chars);
        let first_id = count_tool_uses(&request.messages) + 1;
        let (deltas, content) = play(&reply, first_id);

        let mut items: Vec<Result<ModelEvent, ModelError>> = Vec::new();
        match cut_after {
            Some(n) => {
                items.extend(deltas.into_iter().take(n).map(Ok));
                items.push(Err(ModelError::Stream(format!(
                    "scripted stream cut after {n} chunks"
                ))));
            }
            None => {
                items.extend(deltas.into_iter().map(Ok));
                items.push(Ok(ModelEvent::Completed(ModelResponse {
                    content,
                    stop_reason: reply.effective_stop_reason(),
                    usage,
                })));
            }
        }
        let delay = Duration::from_millis(reply.delay_ms);
        let stream = futures::stream::iter(items).then(move |item| async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            item
        });
        Ok(Box::pin(stream))
    }
}

/// Tool calls already in the conversation; numbering new ones after them keeps
/// ids unique within a conversation and independent of the client's lifetime.
fn count_tool_uses(messages: &[Message]) -> usize {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter(|b| matches!(b, ContentBlock::ToolUse { .. }))
        .count()
}

/// The deltas and the final content blocks of a reply.
fn play(reply: &ScriptReply, first_tool_id: usize) -> (Vec<ModelEvent>, Vec<ContentBlock>) {
    let mut deltas = Vec::new();
    let mut content = Vec::new();
    let mut next_id = first_tool_id;
    let mut tool_id = |id: &Option<String>| {
        id.clone().unwrap_or_else(|| {
            let id = format!("toolu_{next_id}");
            next_id += 1;
            id
        })
    };
    for (index, block) in reply.content.iter().enumerate() {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        match block {
            ScriptBlock::Text { text } => {
                deltas.extend(
                    text_chunks(text)
                        .into_iter()
                        .map(|text| ModelEvent::TextDelta { index, text }),
                );
                content.push(ContentBlock::Text { text: text.clone() });
            }
            ScriptBlock::Thinking { thinking } => {
                deltas.extend(
                    text_chunks(thinking)
                        .into_iter()
                        .map(|text| ModelEvent::ThinkingDelta { index, text }),
                );
                content.push(ContentBlock::Thinking {
                    thinking: thinking.clone(),
                    signature: None,
                });
            }
            ScriptBlock::ToolUse { id, name, input } => content.push(ContentBlock::ToolUse {
                id: tool_id(id),
                name: name.clone(),
                input: input.clone(),
            }),
            ScriptBlock::RawToolUse {
                id,
                name,
                raw_input,
            } => content.push(ContentBlock::ToolUse {
                id: tool_id(id),
                name: name.clone(),
                input: Value::String(raw_input.clone()),
            }),
        }
    }
    (deltas, content)
}

/// What the offline demo model says once it has looked around.
pub const DEMO_SUMMARY: &str = "This is agentd's offline demo model: no real language model was \
called, and these replies are scripted. To show how a session works, I looked around the \
workspace: I listed it with the LS tool and ran `ls -la` and `git status` with the Bash tool \
(their output is above). To work with a real model, set ANTHROPIC_API_KEY or OPENAI_API_KEY in \
the environment, or add a [models] section to agentd.toml, and start agentd again.";

/// The built-in `demo` model's script: for any user message it lists the workspace
/// with `LS`, then runs a read-only `Bash` command, then explains that it is a demo
/// and how to switch to a real model. Every reply repeats, so later turns work too.
pub fn demo_script() -> Script {
    let reply = |when: Option<Matcher>, content: Vec<ScriptBlock>| ScriptReply {
        when,
        repeat: true,
        content,
        delay_ms: 8,
        ..ScriptReply::default()
    };
    let after = |tool: &str| {
        Some(Matcher {
            last_tool_name: Some(tool.to_string()),
            ..Matcher::default()
        })
    };
    Script {
        replies: vec![
            reply(
                after("LS"),
                vec![
                    ScriptBlock::Text {
                        text: "Now a quick look with the shell.".to_string(),
                    },
                    ScriptBlock::ToolUse {
                        id: None,
                        name: "Bash".to_string(),
                        input: json!({
                            "command": "ls -la | head -20 && (git status --short 2>/dev/null | head -5 || true)",
                            "description": "Look around the workspace",
                        }),
                    },
                ],
            ),
            reply(
                after("Bash"),
                vec![ScriptBlock::Text {
                    text: DEMO_SUMMARY.to_string(),
                }],
            ),
            // Any other request (a new user message): start looking around.
            reply(
                None,
                vec![
                    ScriptBlock::Thinking {
                        thinking: "I am the offline demo model. I will look around the workspace \
                                   and then explain how to connect a real model."
                            .to_string(),
                    },
                    ScriptBlock::Text {
                        text: "Hello! I'm agentd's offline demo model. Let me look around the workspace."
                            .to_string(),
                    },
                    ScriptBlock::ToolUse {
                        id: None,
                        name: "LS".to_string(),
                        input: json!({"path": "."}),
                    },
                ],
            ),
        ],
    }
}

#[cfg(test)]
mod tests;
