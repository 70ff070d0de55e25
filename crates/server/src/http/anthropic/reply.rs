//! Answering one call: the model's stream as Anthropic's server-sent
//! events, or the whole reply as one message object; and what it used,
//! reported once whatever happens (see [`Spend`]).
//!
//! Provider streams carry text and thinking deltas as they come and the
//! assembled reply at the end; tool calls and signatures arrive only with
//! the end. So text and thinking stream live, and each other block is sent
//! whole (start, one delta, stop) when the reply is complete. A signed
//! thinking block's signature must come before its `content_block_stop`,
//! and blocks must not interleave: for a provider that signs thinking
//! (Anthropic), once a thinking block is followed by another, the rest of
//! the reply is sent from the assembled reply. Other providers' thinking
//! has no signature, so its block stops as soon as the next one starts.

use std::sync::Arc;

use agentd_model::anthropic::wire::{self, Delta};
use agentd_model::{ModelClient, ModelError, ModelEvent, ModelRequest, ModelResponse, ModelStream};
use agentd_protocol::{ContentBlock, Usage};
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::error::AnthropicError;
use super::estimate;

/// One call to answer.
pub struct Call {
    pub client: Arc<dyn ModelClient>,
    pub request: ModelRequest,
    /// The `model` the reply names: what the client asked for.
    pub model: String,
    pub stream: bool,
    /// The provider signs its thinking (Anthropic's does).
    pub signs_thinking: bool,
    /// Cancelled at shutdown: a streamed reply ends there.
    pub stop: CancellationToken,
}

/// Told what a call used (for spend and quotas), exactly once.
pub type OnUsage = Box<dyn FnOnce(Usage) + Send>;

/// What a started call used, reported once: the provider's count when the
/// reply completed, else (the client went away, the handler was dropped,
/// the stream broke) an estimate — the whole input, and the output that
/// had arrived — since the provider bills those too.
pub struct Spend {
    report: Option<OnUsage>,
    input_tokens: u64,
    output_chars: usize,
}

impl Spend {
    pub fn new(report: OnUsage, input_tokens: u64) -> Self {
        Self {
            report: Some(report),
            input_tokens,
            output_chars: 0,
        }
    }

    fn saw(&mut self, event: &ModelEvent) {
        match event {
            ModelEvent::TextDelta { text, .. } | ModelEvent::ThinkingDelta { text, .. } => {
                self.output_chars += text.len();
            }
            ModelEvent::Completed(reply) => {
                if let Some(report) = self.report.take() {
                    report(reply.usage);
                }
            }
        }
    }
}

impl Drop for Spend {
    fn drop(&mut self) {
        if let Some(report) = self.report.take() {
            report(estimate::incomplete(self.input_tokens, self.output_chars));
        }
    }
}

pub async fn answer(call: Call, on_usage: OnUsage) -> Response {
    let id = format!("msg_{}", uuid::Uuid::new_v4().simple());
    let input_tokens = estimate::input_tokens(&call.request);
    let stream = match call.client.stream(call.request).await {
        Ok(stream) => stream,
        Err(err) => return AnthropicError::from(err).into_response(),
    };
    // The call has started: from here on it is paid for.
    let mut spend = Spend::new(on_usage, input_tokens);
    if call.stream {
        let start = Usage {
            input_tokens,
            ..Usage::default()
        };
        let encoder = Encoder::new(call.signs_thinking);
        let stream = stream.take_until(call.stop.cancelled_owned()).boxed();
        sse(stream, &id, &call.model, &start, encoder, spend)
    } else {
        match completed(stream, &mut spend).await {
            Ok(reply) => {
                let body = wire::message(
                    &id,
                    &call.model,
                    &reply.content,
                    reply.stop_reason,
                    &reply.usage,
                );
                axum::Json(body).into_response()
            }
            Err(err) => AnthropicError::from(err).into_response(),
        }
    }
}

/// The assembled reply at the end of `stream`.
async fn completed(
    mut stream: ModelStream,
    spend: &mut Spend,
) -> Result<ModelResponse, ModelError> {
    while let Some(event) = stream.next().await {
        let event = event?;
        spend.saw(&event);
        if let ModelEvent::Completed(reply) = event {
            return Ok(reply);
        }
    }
    Err(ModelError::Stream(
        "the reply ended before it was complete".into(),
    ))
}

/// `start`'s usage is an estimate of the input: the provider's count comes
/// with `message_delta`.
fn sse(
    stream: ModelStream,
    id: &str,
    model: &str,
    start: &Usage,
    mut encoder: Encoder,
    mut spend: Spend,
) -> Response {
    let start = [wire::message_start(id, model, start), wire::ping()];
    // A model stream ends after its error: so does this one. `spend` lives
    // as long as the body: dropped with it when the client goes away.
    let events = stream
        .map(move |event| {
            let frames = match event {
                Ok(event) => {
                    spend.saw(&event);
                    match &event {
                        ModelEvent::Completed(reply) => encoder.complete(reply),
                        event => encoder.delta(event),
                    }
                }
                Err(err) => {
                    let err = AnthropicError::from(err);
                    vec![wire::error_event(err.status.as_u16(), &err.message)]
                }
            };
            futures::stream::iter(frames.into_iter().map(Ok::<Bytes, std::io::Error>))
        })
        .flatten();
    let body = futures::stream::iter(start.map(Ok)).chain(events);
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Turns model events into Anthropic SSE frames (see the module comment).
#[derive(Default)]
pub(crate) struct Encoder {
    /// Thinking blocks are signed at the end: they cannot stop early.
    signs_thinking: bool,
    /// Provider block indexes started live, in the order sent: the index
    /// sent is the position here.
    streamed: Vec<u32>,
    /// The provider index of the block started and not stopped.
    open: Option<(u32, bool)>,
    /// Live streaming stopped; the rest comes from the assembled reply.
    frozen: bool,
}

impl Encoder {
    pub(crate) fn new(signs_thinking: bool) -> Self {
        Self {
            signs_thinking,
            ..Self::default()
        }
    }

    pub(crate) fn delta(&mut self, event: &ModelEvent) -> Vec<Bytes> {
        let (index, text, thinking) = match event {
            ModelEvent::TextDelta { index, text } => (*index, text, false),
            ModelEvent::ThinkingDelta { index, text } => (*index, text, true),
            ModelEvent::Completed(_) => return Vec::new(),
        };
        if self.frozen {
            return Vec::new();
        }
        let delta = |sent| {
            let delta = if thinking {
                Delta::Thinking(text)
            } else {
                Delta::Text(text)
            };
            wire::content_block_delta(sent, delta)
        };
        let mut out = Vec::new();
        match self.open {
            Some((open, _)) if open == index => {
                return vec![delta(self.streamed.len() - 1)];
            }
            // Its signature is not known yet: it cannot be stopped.
            Some((_, true)) if self.signs_thinking => {
                self.frozen = true;
                return out;
            }
            Some(_) => out.push(wire::content_block_stop(self.streamed.len() - 1)),
            None => {}
        }
        self.open = None;
        if self.streamed.contains(&index) {
            self.frozen = true;
            return out;
        }
        let sent = self.streamed.len();
        self.streamed.push(index);
        self.open = Some((index, thinking));
        let empty = if thinking {
            ContentBlock::Thinking {
                thinking: String::new(),
                signature: None,
            }
        } else {
            ContentBlock::Text {
                text: String::new(),
            }
        };
        out.push(wire::content_block_start(sent, &empty));
        out.push(delta(sent));
        out
    }

    /// The end of the open block, every block not streamed, and the end of
    /// the message.
    pub(crate) fn complete(&mut self, reply: &ModelResponse) -> Vec<Bytes> {
        let mut out = Vec::new();
        if let Some((open, _)) = self.open.take() {
            let sent = self.streamed.len() - 1;
            if let Some(ContentBlock::Thinking {
                signature: Some(signature),
                ..
            }) = reply.content.get(open as usize)
            {
                out.push(wire::content_block_delta(sent, Delta::Signature(signature)));
            }
            out.push(wire::content_block_stop(sent));
        }
        let mut next = self.streamed.len();
        for (index, block) in reply.content.iter().enumerate() {
            if self.streamed.contains(&(index as u32)) {
                continue;
            }
            if whole_block(next, block, &mut out) {
                next += 1;
            }
        }
        out.extend(wire::message_end(reply.stop_reason, &reply.usage));
        out
    }
}

/// `block` sent whole as block `sent`; false for a kind a reply cannot hold.
fn whole_block(sent: usize, block: &ContentBlock, out: &mut Vec<Bytes>) -> bool {
    let input_json;
    let deltas: Vec<Delta<'_>> = match block {
        ContentBlock::Text { text } => vec![Delta::Text(text)],
        ContentBlock::Thinking {
            thinking,
            signature,
        } => std::iter::once(Delta::Thinking(thinking))
            .chain(signature.as_deref().map(Delta::Signature))
            .collect(),
        ContentBlock::ToolUse { input, .. } => {
            input_json = wire::tool_input(input).to_string();
            vec![Delta::InputJson(&input_json)]
        }
        _ => return false,
    };
    out.push(wire::content_block_start(sent, block));
    out.extend(
        deltas
            .into_iter()
            .map(|d| wire::content_block_delta(sent, d)),
    );
    out.push(wire::content_block_stop(sent));
    true
}

#[cfg(test)]
#[path = "reply_tests.rs"]
mod tests;
