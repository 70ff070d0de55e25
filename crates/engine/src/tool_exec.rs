//! Running the tool calls of one assistant message.

use std::time::Instant;

use agentd_protocol::{ContentBlock, ErrorCode, ErrorInfo, Event, OutputStream};
use agentd_tools::{ToolContext, ToolOutput, ToolResult};
use futures::future::join_all;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::sleep_until;

use crate::agent_tools::AgentTool;
use crate::coalesce::Coalescer;
use crate::context::{TurnContext, truncated};
use crate::gate::Gate;
use crate::live_budget::LiveStream;
use crate::secret_mask::{SecretMask, StreamMasks};
use crate::sink::SinkError;
use crate::turn::Exit;

/// A tool call as the model asked for it.
struct Call {
    id: String,
    name: String,
    input: Value,
}

impl TurnContext<'_> {
    /// Run the calls and return one `tool_result` block per call, in call order.
    /// Consecutive read-only calls run in parallel; others one at a time. Calls
    /// not reached because the turn was cancelled are answered as not run.
    pub(crate) async fn run_tools(
        &self,
        calls: Vec<ContentBlock>,
    ) -> Result<Vec<ContentBlock>, Exit> {
        let calls: Vec<Call> = calls
            .into_iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse { id, name, input } => Some(Call { id, name, input }),
                _ => None,
            })
            .collect();
        let mut results = Vec::with_capacity(calls.len());
        let mut rest = calls.as_slice();
        while !rest.is_empty() {
            let batch_len = match rest.iter().position(|c| !self.agent.is_read_only(&c.name)) {
                Some(0) => 1,
                Some(n) => n,
                None => rest.len(),
            };
            let (batch, tail) = rest.split_at(batch_len);
            rest = tail;
            for result in join_all(batch.iter().map(|call| self.run_call(call, true))).await {
                results.push(result?);
            }
        }
        Ok(results)
    }

    /// One call announced elsewhere (no `tool.started`/`tool.finished`).
    pub(crate) async fn run_one_call(
        &self,
        block: ContentBlock,
    ) -> Result<ContentBlock, SinkError> {
        let ContentBlock::ToolUse { id, name, input } = block else {
            return Ok(block);
        };
        self.run_call(&Call { id, name, input }, false).await
    }

    async fn run_call(&self, call: &Call, announce: bool) -> Result<ContentBlock, SinkError> {
        let answer = |result: ToolResult| ContentBlock::ToolResult {
            tool_use_id: call.id.clone(),
            content: result.content,
            is_error: result.is_error,
            images: result.images,
        };
        if self.cancel.is_cancelled() {
            return Ok(answer(ToolResult::error(crate::history::NOT_RUN)));
        }
        if announce {
            self.sink
                .emit(Event::ToolStarted {
                    parent_call_id: None,
                    turn_id: self.turn_id.to_string(),
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                })
                .await?;
        }
        let started = Instant::now();
        let read_only = self.agent.is_read_only(&call.name);
        let result = match self.precheck(call) {
            Some(refusal) => refusal,
            None => match self
                .gate(&call.id, &call.name, read_only, &call.input)
                .await?
            {
                Gate::Run(input) => {
                    if !read_only {
                        self.checkpoint_once().await?;
                    }
                    let mut result = self.execute(call, input.clone()).await?;
                    self.report_refusals(&call.id).await?;
                    // Before anything sees it, hooks included.
                    result.content = self.secret_mask().mask(&result.content);
                    self.after_tool(call, &input, result).await
                }
                Gate::Refuse(message) => ToolResult::error(message),
            },
        };
        let result = result.capped(self.agent.tool_context.result_cap);
        if announce {
            self.sink
                .emit(Event::ToolFinished {
                    call_id: call.id.clone(),
                    is_error: result.is_error,
                    output: result.content.clone(),
                    duration_ms: started.elapsed().as_millis() as u64,
                })
                .await?;
        }
        Ok(answer(result))
    }

    /// What the session's egress proxy refused during the call, as
    /// `network.refused` events (so a failed `pip install` says why).
    async fn report_refusals(&self, call_id: &str) -> Result<(), SinkError> {
        let Some(refusals) = &self.agent.tool_context.network_refusals else {
            return Ok(());
        };
        for refusal in refusals.take() {
            self.sink
                .emit(Event::NetworkRefused {
                    turn_id: self.turn_id.to_string(),
                    call_id: call_id.to_string(),
                    host: refusal.host,
                    port: refusal.port,
                    reason: refusal.reason,
                })
                .await?;
        }
        Ok(())
    }

    /// The turn's checkpoint, taken before its first tool that may change
    /// files (subagents share it). A failure is reported and the call goes
    /// on: refusing every edit because a snapshot failed would stop the work.
    async fn checkpoint_once(&self) -> Result<(), SinkError> {
        let Some(checkpointer) = &self.agent.checkpointer else {
            return Ok(());
        };
        let mut outcome = Ok(());
        self.shared
            .checkpoint
            .get_or_init(|| async {
                // The checkpoint is placed after the turn's messages so far:
                // have them recorded first if it reads them back.
                if checkpointer.needs_flush()
                    && let Err(err) = self.sink.flush().await
                {
                    outcome = Err(err);
                    return;
                }
                outcome = match checkpointer.checkpoint(self.turn_id).await {
                    Ok(Some((checkpoint_id, files))) => {
                        self.sink
                            .emit(Event::CheckpointCreated {
                                checkpoint_id,
                                files,
                            })
                            .await
                    }
                    Ok(None) => Ok(()),
                    Err(message) => {
                        tracing::warn!(%message, "could not checkpoint the workspace");
                        self.sink
                            .emit(Event::Error(ErrorInfo {
                                code: ErrorCode::CheckpointFailed,
                                message: format!(
                                    "The workspace could not be checkpointed before this turn \
                                     changed it, so it cannot be rewound to here: {message}"
                                ),
                                retryable: false,
                            }))
                            .await
                    }
                };
            })
            .await;
        outcome
    }

    /// The secret variable values of the agent's sandbox, to mask in what
    /// its tools return.
    fn secret_mask(&self) -> SecretMask {
        SecretMask::new(self.agent.tool_context.policy.secrets())
    }

    /// `PostToolUse` hooks: extra context for the model, or a block note.
    async fn after_tool(&self, call: &Call, input: &Value, mut result: ToolResult) -> ToolResult {
        let Some((hooks, context)) = self.agent.hooks() else {
            return result;
        };
        let feedback = hooks
            .post_tool_use(
                context,
                &call.id,
                &call.name,
                input,
                &result.content,
                result.is_error,
            )
            .await;
        let mask = self.secret_mask();
        if feedback.block {
            let reason = mask.mask(feedback.reason.as_deref().unwrap_or("no reason given"));
            result
                .content
                .push_str(&format!("\n\n[PostToolUse hook] {reason}"));
        }
        for extra in feedback.additional_context {
            result
                .content
                .push_str(&format!("\n\n{}", mask.mask(&extra)));
        }
        result
    }

    /// Calls that cannot run whatever anyone decides: unknown tools, input that
    /// was not valid JSON.
    fn precheck(&self, call: &Call) -> Option<ToolResult> {
        let (agent, name) = (self.agent, &call.name);
        if agent.tools.get(name).is_none() && agent.agent_tool(name).is_none() {
            let specs = agent.tool_specs();
            let known: Vec<&str> = specs.iter().map(|spec| spec.name.as_str()).collect();
            return Some(ToolResult::error(format!(
                "There is no tool named {name:?}. Available tools: {}.",
                known.join(", ")
            )));
        }
        if let Value::String(raw) = &call.input {
            return Some(ToolResult::error(format!(
                "The input for {} was not valid JSON, so the call did not run. Received: {raw}",
                call.name
            )));
        }
        None
    }

    async fn execute(&self, call: &Call, input: Value) -> Result<ToolResult, SinkError> {
        match self.agent.agent_tool(&call.name) {
            Some(AgentTool::TodoWrite) => return self.todo_write(&call.id, &input).await,
            Some(AgentTool::AskUserQuestion) => {
                return self.ask_user_question(&call.id, &input).await;
            }
            Some(AgentTool::Task) => return Ok(self.run_task(&call.id, &input).await),
            None => {}
        }
        let Some(tool) = self.agent.tools.get(&call.name) else {
            return Ok(ToolResult::error(format!(
                "There is no tool named {:?}.",
                call.name
            )));
        };
        let (sender, receiver) = mpsc::unbounded_channel();
        let ctx = ToolContext {
            output: Some(sender),
            cancel: self.cancel.clone(),
            ..self.agent.tool_context.clone()
        };
        let run = async move {
            let result = tool.call(input, &ctx).await;
            drop(ctx); // closes the output channel so forwarding ends
            result
        };
        let (result, forwarded) = tokio::join!(run, self.forward_output(&call.id, receiver));
        forwarded?;
        Ok(result)
    }

    /// Live tool output to `tool.output` events, coalesced like model deltas,
    /// up to the call's and the turn's stream limits. The rest is drained and
    /// dropped: the tool's own result keeps what the model needs.
    async fn forward_output(
        &self,
        call_id: &str,
        mut receiver: mpsc::UnboundedReceiver<ToolOutput>,
    ) -> Result<(), SinkError> {
        let limits = &self.agent.config.limits;
        let mut live = LiveStream::new(
            &self.shared.streamed,
            limits.max_turn_stream_bytes,
            Some(limits.max_tool_output_stream_bytes),
        );
        let mut coalescer = Coalescer::new();
        let mut masks = StreamMasks::new(self.secret_mask());
        loop {
            let deadline = coalescer.deadline();
            let due = tokio::select! {
                _ = sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                    coalescer.take().into_iter().collect()
                }
                chunk = receiver.recv() => match chunk {
                    Some(_) if live.stopped() => continue,
                    Some(chunk) => coalescer.push(chunk.stream, &masks.push(chunk.stream, &chunk.text)),
                    None => break,
                },
            };
            self.emit_output(call_id, &mut live, due).await?;
        }
        let mut due: Vec<_> = coalescer.take().into_iter().collect();
        for (stream, rest) in masks.finish() {
            due.extend(coalescer.push(stream, &rest));
        }
        due.extend(coalescer.take());
        self.emit_output(call_id, &mut live, due).await
    }

    async fn emit_output(
        &self,
        call_id: &str,
        live: &mut LiveStream<'_>,
        due: impl IntoIterator<Item = (OutputStream, String)>,
    ) -> Result<(), SinkError> {
        for (stream, text) in due {
            let admitted = live.admit(&text);
            if !admitted.text.is_empty() {
                self.sink
                    .emit(Event::ToolOutput {
                        call_id: call_id.to_string(),
                        stream,
                        text: admitted.text.to_string(),
                    })
                    .await?;
            }
            if let Some(notice) = admitted.notice {
                self.sink
                    .emit(truncated(self.turn_id, Some(call_id), notice))
                    .await?;
            }
        }
        Ok(())
    }
}
