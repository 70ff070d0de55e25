//! [`ScriptedClient`]: a script played in process, as a [`ModelClient`]
//! (the offline `demo` model, and engine tests), and the demo's own script.

use std::sync::Mutex;
use std::time::Duration;

use agentd_protocol::{ContentBlock, Message};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};

use super::{
    Fault, Matcher, RequestView, Script, ScriptBlock, ScriptReply, ScriptState, http_fault_error,
    request_view, text_chunks,
};
use crate::{ModelClient, ModelError, ModelEvent, ModelRequest, ModelResponse, ModelStream};

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
