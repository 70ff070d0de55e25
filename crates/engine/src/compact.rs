//! Compaction: when the context estimate passes the threshold (or the user
//! asks), the model summarises the older part of the conversation and the
//! context becomes that summary plus the recent messages, verbatim. Old tool
//! outputs are trimmed before the older part goes to the summariser. The
//! transcript in the store stays whole; the sink records the new context.

use std::sync::Arc;

use agentd_model::{ModelEvent, ModelRequest};
use agentd_protocol::{CompactionTrigger, ContentBlock, ErrorCode, Event, Message, Role};
use futures::StreamExt;

use crate::offered::json_len;
use crate::sink::Compaction;
use crate::turn::{Exit, TurnRun, model_exit};

/// Share of the window the recent messages kept verbatim may take.
const KEEP_SHARE: f64 = 0.25;
/// Characters of an old tool output the summariser still sees.
const TRIMMED_OUTPUT_CHARS: usize = 1500;

const SUMMARY_SYSTEM: &str = "You write the working memory of a coding agent whose \
conversation is too long to keep. Be specific and complete: the agent will continue from \
your summary alone, without the conversation.";

const INSTRUCTIONS: &str = "Summarise the conversation above for the agent that will \
continue it. Use these sections:\n\
1. Current task: what the user asked for, in their words where it matters.\n\
2. Decisions: what was decided and why, including the user's preferences.\n\
3. Files touched: each file read, created or changed, and what changed.\n\
4. Open work: what is left to do, and the next step.\n\
5. Facts to keep: errors seen, commands that worked, values, names.\n\
Answer with the summary only.";

/// Tokens of a request whose tool specs are `tool_chars` long, estimated
/// (about four characters a token, plus a little per message); the
/// provider's count is only known after the call.
pub(crate) fn estimate_tokens(system: &str, tool_chars: usize, messages: &[Message]) -> u64 {
    let chars = system.len() + tool_chars + messages.iter().map(message_chars).sum::<usize>();
    (chars / 4 + messages.len() * 4) as u64
}

/// What an image is counted as: about 1,500 tokens, a mid-sized picture.
const IMAGE_CHARS: usize = 6_000;

fn message_chars(message: &Message) -> usize {
    message
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => text.len(),
            ContentBlock::Thinking { thinking, .. } => thinking.len(),
            ContentBlock::ToolUse { name, input, .. } => name.len() + json_len(input),
            ContentBlock::ToolResult {
                content, images, ..
            } => content.len() + images.len() * IMAGE_CHARS,
            ContentBlock::Image { .. } => IMAGE_CHARS,
            ContentBlock::Document { source, .. } => json_len(source),
        })
        .sum()
}

/// Where the kept part starts: the earliest assistant message from which the
/// rest fits in `budget` tokens (at least the last assistant message), so
/// every kept tool result still follows its call. `None`: nothing to cut.
fn cut_point(messages: &[Message], budget: u64) -> Option<usize> {
    let mut kept = 0u64;
    let mut cut = None;
    for (index, message) in messages.iter().enumerate().rev() {
        kept += (message_chars(message) / 4 + 4) as u64;
        if message.role == Role::Assistant && index > 0 {
            if cut.is_some() && kept > budget {
                break;
            }
            cut = Some(index);
        }
    }
    cut
}

/// The older part as plain text for the summariser, tool outputs trimmed.
fn transcript(messages: &[Message]) -> String {
    let mut out = String::new();
    for message in messages {
        for block in &message.content {
            match (message.role, block) {
                (Role::User, ContentBlock::Text { text }) => {
                    out.push_str(&format!("User: {text}\n\n"))
                }
                (Role::Assistant, ContentBlock::Text { text }) => {
                    out.push_str(&format!("Assistant: {text}\n\n"));
                }
                (_, ContentBlock::ToolUse { name, input, .. }) => {
                    out.push_str(&format!("[Assistant called {name} with {input}]\n\n"));
                }
                (
                    _,
                    ContentBlock::ToolResult {
                        content, is_error, ..
                    },
                ) => {
                    let kind = if *is_error { "Error" } else { "Result" };
                    out.push_str(&format!("[{kind}: {}]\n\n", trim(content)));
                }
                _ => {}
            }
        }
    }
    out
}

fn trim(text: &str) -> String {
    let total = text.chars().count();
    if total <= TRIMMED_OUTPUT_CHARS {
        return text.to_string();
    }
    let head: String = text.chars().take(TRIMMED_OUTPUT_CHARS).collect();
    format!(
        "{head} … [{} more characters trimmed]",
        total - TRIMMED_OUTPUT_CHARS
    )
}

/// The last thing the user typed in `messages`, if any.
fn last_request(messages: &[Message]) -> Option<String> {
    messages.iter().rev().find_map(|m| {
        let text = m.text();
        (m.role == Role::User && !text.is_empty()).then_some(text)
    })
}

impl TurnRun<'_> {
    pub(crate) fn context_estimate(&self) -> u64 {
        let config = &self.agent.config;
        estimate_tokens(
            &config.system_prompt,
            self.agent.offered().chars,
            &self.messages,
        )
    }

    /// Compacts when the estimate passes the threshold; at most once between
    /// two model calls, so a context that stays large does not loop.
    pub(crate) async fn maybe_compact(&mut self) -> Result<(), Exit> {
        let config = &self.agent.config;
        let threshold = (config.context_window() as f64 * config.limits.compact_threshold) as u64;
        if self.compacted_since_call || self.context_estimate() <= threshold {
            return Ok(());
        }
        self.compact(CompactionTrigger::Auto).await.map(|_| ())
    }

    /// Summarise the older part of the context and continue from the summary.
    /// `Ok(None)` when there was nothing to compact or a PreCompact hook
    /// blocked it.
    pub(crate) async fn compact(
        &mut self,
        trigger: CompactionTrigger,
    ) -> Result<Option<Compaction>, Exit> {
        self.compacted_since_call = true;
        let trigger_name = match trigger {
            CompactionTrigger::Auto => "auto",
            CompactionTrigger::Manual => "manual",
        };
        let mut extra = Vec::new();
        if let Some((hooks, context)) = self.agent.hooks() {
            let feedback = hooks.pre_compact(context, trigger_name).await;
            if feedback.block {
                tracing::info!(reason = ?feedback.reason, "a PreCompact hook blocked compaction");
                return Ok(None);
            }
            extra = feedback.additional_context;
        }
        // Keep at most a quarter of the window, and at most half of what
        // there is, so a compaction always makes room.
        let window_share = (self.agent.config.context_window() as f64 * KEEP_SHARE) as u64;
        let budget = window_share.min(estimate_tokens("", 0, &self.messages) / 2);
        let Some(cut) = cut_point(&self.messages, budget) else {
            return Ok(None);
        };
        let tokens_before = self.context_estimate();
        let (older, kept) = self.messages.split_at(cut);
        let mut prompt = transcript(older);
        prompt.push_str(INSTRUCTIONS);
        for line in extra {
            prompt.push_str(&format!("\n{line}"));
        }
        let request_text = last_request(older);
        let kept = kept.to_vec();
        let summary = self.summarise(prompt).await?;
        let mut note =
            format!("This conversation was compacted. Summary of the earlier part:\n\n{summary}");
        if let Some(request) = request_text {
            note.push_str(&format!(
                "\n\nThe user's last request before the cut: {request}"
            ));
        }
        let mut context = vec![Message::user_text(note)];
        context.extend(kept);
        self.replace_messages(context.clone());
        let tokens_after = self.context_estimate();
        let compaction = Compaction {
            trigger,
            summary: summary.clone(),
            context,
            tokens_before,
            tokens_after,
        };
        self.sink.compacted(&self.turn_id, &compaction).await?;
        self.sink
            .emit(Event::Compaction {
                trigger,
                tokens_before,
                tokens_after,
                summary: Some(summary),
            })
            .await?;
        Ok(Some(compaction))
    }

    /// One call to the model for the summary (no tools, not streamed to clients).
    async fn summarise(&mut self, prompt: String) -> Result<String, Exit> {
        let config = &self.agent.config;
        let request = ModelRequest {
            model: config.model_name.clone(),
            system: Some(SUMMARY_SYSTEM.to_string()),
            messages: Arc::new(vec![Message::user_text(prompt)]),
            tools: Default::default(),
            max_tokens: config.limits.max_output_tokens.min(8192),
            thinking_budget: None,
            wire_cache: None,
        };
        let cancel = self.cancel.clone();
        let mut stream = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(self.cancelled()),
            stream = self.agent.model.stream(request) => stream.map_err(model_exit)?,
        };
        let response = loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(self.cancelled()),
                item = stream.next() => match item {
                    Some(Ok(ModelEvent::Completed(response))) => break response,
                    Some(Ok(_)) => {}
                    Some(Err(err)) => return Err(model_exit(err)),
                    None => return Err(model_exit(agentd_model::ModelError::Stream(
                        "the stream ended before the summary was complete".into(),
                    ))),
                },
            }
        };
        self.account(&response.usage).await?;
        let summary = Message::assistant(response.content).text();
        if summary.trim().is_empty() {
            return Err(Exit::failed(
                ErrorCode::CompactionFailed,
                "The model wrote an empty summary; the context was not compacted.".into(),
                true,
            ));
        }
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> Message {
        Message::assistant(vec![ContentBlock::ToolUse {
            id: id.into(),
            name: "Read".into(),
            input: serde_json::json!({"file_path": "x"}),
        }])
    }

    fn result(id: &str, size: usize) -> Message {
        Message {
            role: Role::User,
            content: vec![ContentBlock::tool_result(id, "x".repeat(size), false)],
        }
    }

    #[test]
    fn the_cut_keeps_calls_with_their_results_within_the_budget() {
        let messages = vec![
            Message::user_text("do it"),
            call("a"),
            result("a", 4000),
            call("b"),
            result("b", 400),
            call("c"),
            result("c", 400),
        ];
        // ~100 tokens each for b and c: both fit in 300, a does not.
        assert_eq!(cut_point(&messages, 300), Some(3));
        // Nothing fits: still keep the last call and its result.
        assert_eq!(cut_point(&messages, 1), Some(5));
        assert_eq!(cut_point(&messages[..1], 1000), None);
    }

    #[test]
    fn old_outputs_are_trimmed_for_the_summariser() {
        let text = transcript(&[Message::user_text("hi"), call("a"), result("a", 10_000)]);
        assert!(text.contains("User: hi"));
        assert!(text.contains("called Read"));
        assert!(text.contains("8500 more characters trimmed"), "{text}");
        assert!(text.len() < 2_000);
    }
}
