//! Model providers behind one streaming interface, [`ModelClient`].
//!
//! - [`anthropic::AnthropicClient`]: the Anthropic Messages API over SSE.
//! - [`openai::OpenAiClient`]: OpenAI Chat Completions over SSE (also OpenRouter,
//!   vLLM, Ollama, llama.cpp).
//! - [`scripted::ScriptedClient`]: deterministic in-process replies from a [`scripted::Script`],
//!   used by the offline `demo` model; the same script format drives the testkit server.
//!
//! Providers retry transient failures with backoff that honours `retry-after`
//! ([`retry::RetryPolicy`]); [`price`] turns usage into US dollars.

mod client;
mod error;
mod http_cache;

pub mod anthropic;
pub mod openai;
pub mod price;
pub mod retry;
pub mod scripted;
mod sse;
mod wire_cache;

pub use client::{
    ModelClient, ModelEvent, ModelRequest, ModelResponse, ModelStream, StopReason, ToolSpec,
};
pub use error::ModelError;
pub use wire_cache::WireCache;
