//! A scripted model server for tests, demos and benchmarks without an API key.
//!
//! [`ModelServer`] plays a [`Script`] (the format of `agentd_model::scripted`) over
//! real HTTP, speaking the Anthropic Messages API (`POST /v1/messages`, streaming
//! and not) and OpenAI Chat Completions (`POST /v1/chat/completions`) wire formats
//! closely enough that the real `claude` CLI and SDK-style clients accept it. It
//! records every request it receives ([`ModelServer::requests`], or
//! `GET /_testkit/requests`), keeps the time it spends serving them
//! ([`ModelServer::stats`], or `GET /_testkit/stats`) and can inject faults: HTTP
//! errors with `retry-after`, streams cut mid-message, garbage bodies and slow tokens.
//!
//! Point a client at it with `ANTHROPIC_BASE_URL` = [`ModelServer::url`] or
//! `OPENAI_BASE_URL` = [`ModelServer::openai_base_url`]. The `agentd-model-server`
//! binary runs [`serve_forever`].

mod anthropic_wire;
pub mod idp;
mod openai_wire;
pub mod processes;
mod recording;
mod reply;
mod server;
pub mod ssh_agent;
mod stats;
pub mod swapper;

use std::path::Path;

use anyhow::Context;

pub use agentd_model::scripted::{Fault, Matcher, Script, ScriptBlock, ScriptReply, demo_script};
pub use recording::RecordedRequest;
pub use server::{ModelServer, coalesce_replies, serve_forever};
pub use stats::ServiceStats;

/// Reads a script from a JSON file; the name `demo` gives the built-in demo script.
pub fn load_script(path: &Path) -> anyhow::Result<Script> {
    if path.as_os_str() == "demo" && !path.exists() {
        return Ok(demo_script());
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading script {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing script {}", path.display()))
}
