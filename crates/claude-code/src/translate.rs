//! The CLI's stream-json lines as agentd events and transcript messages.
//!
//! Order per model call follows the native engine: `message.delta`s,
//! `usage`, `message.completed`, then `tool.started` per call; the tool's
//! `permission.*`/`tool.output` come from the MCP handler, `tool.finished`
//! from the CLI's tool result line.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use agentd_engine::{Agent, ExternalTurn, SinkError, TurnSink};
use agentd_protocol::{CompactionTrigger, ContentBlock, DeltaKind, Event, Message, Role, Usage};
use serde_json::Value;

use super::mcp::{Announced, TurnScope};

/// Agent's tools appear to the CLI under this prefix.
pub const TOOL_PREFIX: &str = "mcp__agentd__";
const DELTA_BYTES: usize = 1024;
const DELTA_WAIT: Duration = Duration::from_millis(50);

/// The CLI's `result` line.
#[derive(Debug, Clone, Default)]
pub struct CliResult {
    pub subtype: String,
    pub is_error: bool,
    pub result: Option<String>,
    pub usage: Usage,
    pub cost_usd: f64,
    pub errors: Vec<String>,
}

/// What the caller must do about a line.
pub enum Step {
    Continue,
    /// The CLI asks whether it may use a tool: `(request_id, tool, input)`.
    CanUseTool(String, String, Value),
    Finished(CliResult),
}

pub struct Translator<'a> {
    pub turn_id: String,
    sink: &'a dyn TurnSink,
    agent: &'a Agent,
    announced: Announced,
    /// Shared with the turn's tool calls: the turn's stream limit.
    external: ExternalTurn,
    deltas: Vec<((u32, DeltaKind), String)>,
    delta_bytes: usize,
    first_delta: Option<Instant>,
    message_id: Option<String>,
    blocks: Vec<ContentBlock>,
    usage: Usage,
    tools_started: HashMap<String, Instant>,
    pub cli_session_id: Option<String>,
    pub last_text: Option<String>,
    /// The id of the turn's last assistant message: its transcript is
    /// complete once this is in it.
    pub last_message_id: Option<String>,
    pub model_calls: u32,
}

pub fn agentd_name(cli_name: &str) -> String {
    cli_name
        .strip_prefix(TOOL_PREFIX)
        .unwrap_or(cli_name)
        .to_string()
}

fn usage_from(value: &Value) -> Usage {
    let n = |key: &str| value[key].as_u64().unwrap_or(0);
    Usage {
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        cache_read_tokens: n("cache_read_input_tokens"),
        cache_write_tokens: n("cache_creation_input_tokens"),
    }
}

/// A tool result's content: a string, or text blocks.
fn result_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl<'a> Translator<'a> {
    pub fn new(scope: &'a TurnScope, announced: Announced) -> Self {
        Self {
            turn_id: scope.turn_id.clone(),
            sink: scope.sink.as_ref(),
            agent: &scope.agent,
            announced,
            external: scope.external.clone(),
            deltas: Vec::new(),
            delta_bytes: 0,
            first_delta: None,
            message_id: None,
            blocks: Vec::new(),
            usage: Usage::default(),
            tools_started: HashMap::new(),
            cli_session_id: None,
            last_text: None,
            last_message_id: None,
            model_calls: 0,
        }
    }

    pub async fn line(&mut self, line: &Value) -> Result<Step, SinkError> {
        // Subagents of the CLI (its own Task) are not offered; skip their lines.
        if line["parent_tool_use_id"].is_string() {
            return Ok(Step::Continue);
        }
        let kind = line["type"].as_str().unwrap_or_default();
        match kind {
            "system" => self.system(line).await?,
            "stream_event" => self.stream_event(&line["event"]).await?,
            "assistant" => self.assistant(&line["message"]),
            "user" => self.user(&line["message"]).await?,
            "result" => {
                self.finish_message().await?;
                return Ok(Step::Finished(self.result(line)));
            }
            "control_request" => {
                let request = &line["request"];
                if request["subtype"] == "can_use_tool" {
                    return Ok(Step::CanUseTool(
                        line["request_id"].as_str().unwrap_or_default().to_string(),
                        request["tool_name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        request["input"].clone(),
                    ));
                }
                tracing::info!(subtype = %request["subtype"], "claude control request ignored");
            }
            "control_response" => {
                tracing::debug!(response = %line["response"], "claude control response");
            }
            "rate_limit_event" => {
                tracing::info!(info = %line["rate_limit_info"], "claude rate limit event");
            }
            "keep_alive" => {}
            other => tracing::info!(kind = other, "claude line of an unknown type skipped"),
        }
        self.flush_deltas_if_due().await?;
        Ok(Step::Continue)
    }

    async fn system(&mut self, line: &Value) -> Result<(), SinkError> {
        match line["subtype"].as_str().unwrap_or_default() {
            "init" => {
                self.cli_session_id = line["session_id"].as_str().map(str::to_string);
                tracing::debug!(session = ?self.cli_session_id, model = %line["model"], tools = %line["tools"], mcp = %line["mcp_servers"], "claude init");
            }
            "compact_boundary" => {
                let meta = &line["compact_metadata"];
                let trigger = if meta["trigger"] == "manual" {
                    CompactionTrigger::Manual
                } else {
                    CompactionTrigger::Auto
                };
                self.sink
                    .emit(Event::Compaction {
                        trigger,
                        tokens_before: meta["pre_tokens"].as_u64().unwrap_or(0),
                        tokens_after: 0,
                        summary: None,
                    })
                    .await?;
            }
            "api_retry" => {
                tracing::info!(attempt = %line["attempt"], error = %line["error"], "claude retries a model call")
            }
            other => tracing::debug!(subtype = other, "claude system line"),
        }
        Ok(())
    }

    async fn stream_event(&mut self, event: &Value) -> Result<(), SinkError> {
        match event["type"].as_str().unwrap_or_default() {
            "message_start" => {
                self.finish_message().await?;
                self.message_id = event["message"]["id"].as_str().map(str::to_string);
                self.usage = usage_from(&event["message"]["usage"]);
            }
            "content_block_delta" => {
                let index = event["index"].as_u64().unwrap_or(0) as u32;
                let delta = &event["delta"];
                let (kind, text) = match delta["type"].as_str().unwrap_or_default() {
                    "text_delta" => (DeltaKind::Text, delta["text"].as_str()),
                    "thinking_delta" => (DeltaKind::Thinking, delta["thinking"].as_str()),
                    _ => return Ok(()),
                };
                let Some(text) = text.filter(|t| !t.is_empty()) else {
                    return Ok(());
                };
                self.first_delta.get_or_insert_with(Instant::now);
                self.delta_bytes += text.len();
                match self.deltas.last_mut() {
                    Some((key, buffered)) if *key == (index, kind) => buffered.push_str(text),
                    _ => self.deltas.push(((index, kind), text.to_string())),
                }
            }
            "message_delta" => self.update_usage(&event["usage"]),
            "message_stop" => self.finish_message().await?,
            _ => {}
        }
        Ok(())
    }

    /// A `message_delta`'s usage: every count it holds is the final one
    /// (an Anthropic-compatible server may count input only at the end).
    fn update_usage(&mut self, usage: &Value) {
        let fields = [
            ("input_tokens", &mut self.usage.input_tokens),
            ("output_tokens", &mut self.usage.output_tokens),
            ("cache_read_input_tokens", &mut self.usage.cache_read_tokens),
            (
                "cache_creation_input_tokens",
                &mut self.usage.cache_write_tokens,
            ),
        ];
        for (key, count) in fields {
            if let Some(n) = usage[key].as_u64() {
                *count = n;
            }
        }
    }

    fn assistant(&mut self, message: &Value) {
        let id = message["id"].as_str().map(str::to_string);
        if self.message_id.is_none() {
            self.message_id = id;
            self.usage = usage_from(&message["usage"]);
        }
        for block in message["content"].as_array().into_iter().flatten() {
            match serde_json::from_value::<ContentBlock>(block.clone()) {
                Ok(ContentBlock::ToolUse { id, name, input }) => {
                    self.blocks.push(ContentBlock::ToolUse {
                        id,
                        name: agentd_name(&name),
                        input,
                    })
                }
                Ok(block) => self.blocks.push(block),
                Err(_) => tracing::info!(block = %block["type"], "claude content block skipped"),
            }
        }
    }

    async fn flush_deltas_if_due(&mut self) -> Result<(), SinkError> {
        let due = self.delta_bytes >= DELTA_BYTES
            || self.first_delta.is_some_and(|t| t.elapsed() >= DELTA_WAIT);
        if due {
            self.flush_deltas().await?;
        }
        Ok(())
    }

    async fn flush_deltas(&mut self) -> Result<(), SinkError> {
        for ((index, kind), text) in self.deltas.drain(..) {
            let (text, notice) = self.external.admit_text(self.agent, &self.turn_id, &text);
            if !text.is_empty() {
                self.sink
                    .emit(Event::MessageDelta {
                        turn_id: self.turn_id.clone(),
                        index,
                        kind,
                        text: text.to_string(),
                        parent_call_id: None,
                    })
                    .await?;
            }
            if let Some(notice) = notice {
                self.sink.emit(notice).await?;
            }
        }
        self.delta_bytes = 0;
        self.first_delta = None;
        Ok(())
    }

    /// The model call ended: usage, the whole message, its tool calls.
    async fn finish_message(&mut self) -> Result<(), SinkError> {
        self.flush_deltas().await?;
        if self.message_id.is_none() && self.blocks.is_empty() {
            return Ok(());
        }
        if let Some(id) = self.message_id.take() {
            self.last_message_id = Some(id);
        }
        self.model_calls += 1;
        let usage = std::mem::take(&mut self.usage);
        self.sink
            .emit(Event::Usage {
                usage,
                cost_usd: self.agent.config().cost(&usage),
                context_tokens: usage.context_tokens(),
                parent_call_id: None,
            })
            .await?;
        let message = Message::assistant(std::mem::take(&mut self.blocks));
        if message.content.is_empty() {
            return Ok(());
        }
        let text = message.text();
        if !text.is_empty() {
            self.last_text = Some(text);
        }
        self.sink.append_message(&self.turn_id, &message).await?;
        self.sink
            .emit(Event::MessageCompleted {
                turn_id: self.turn_id.clone(),
                message: message.clone(),
                parent_call_id: None,
            })
            .await?;
        for call in message.tool_uses() {
            self.tools_started
                .insert(call.id.to_string(), Instant::now());
            self.sink
                .emit(Event::ToolStarted {
                    turn_id: self.turn_id.clone(),
                    call_id: call.id.to_string(),
                    name: call.name.to_string(),
                    input: call.input.clone(),
                    parent_call_id: None,
                })
                .await?;
            if let Ok(mut announced) = self.announced.lock() {
                announced.push((
                    call.id.to_string(),
                    call.name.to_string(),
                    call.input.clone(),
                ));
            }
        }
        // Whoever the tool asks must see the call first.
        self.sink.flush().await
    }

    async fn user(&mut self, message: &Value) -> Result<(), SinkError> {
        self.finish_message().await?;
        let mut results = Vec::new();
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] != "tool_result" {
                continue;
            }
            let call_id = block["tool_use_id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let output = result_text(&block["content"]);
            let is_error = block["is_error"].as_bool().unwrap_or(false);
            let duration_ms = self
                .tools_started
                .remove(&call_id)
                .map_or(0, |t| t.elapsed().as_millis() as u64);
            if let Ok(mut announced) = self.announced.lock() {
                announced.retain(|(id, _, _)| id != &call_id);
            }
            self.sink
                .emit(Event::ToolFinished {
                    call_id: call_id.clone(),
                    is_error,
                    output: output.clone(),
                    duration_ms,
                })
                .await?;
            results.push(ContentBlock::tool_result(call_id, output, is_error));
        }
        if !results.is_empty() {
            let message = Message {
                role: Role::User,
                content: results,
            };
            self.sink.append_message(&self.turn_id, &message).await?;
        }
        Ok(())
    }

    fn result(&self, line: &Value) -> CliResult {
        CliResult {
            subtype: line["subtype"].as_str().unwrap_or_default().to_string(),
            is_error: line["is_error"].as_bool().unwrap_or(false),
            result: line["result"].as_str().map(str::to_string),
            usage: usage_from(&line["usage"]),
            cost_usd: line["total_cost_usd"].as_f64().unwrap_or(0.0),
            errors: line["errors"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e.as_str().map(str::to_string))
                .collect(),
        }
    }
}
