//! The agentd service layer: configuration ([`config::Config`]), model choice
//! ([`models::resolve_model`]), and the [`runtime::Runtime`] that runs turns of
//! stored sessions through the engine, recording every event and message in the
//! store. `agentd run` uses it in-process; `agentd serve` puts HTTP in front.

pub mod access;
pub mod admission;
pub mod agent_build;
pub mod approvals;
pub mod background;
pub mod checkpoints;
/// The `claude-code` engine, in its own crate.
pub use agentd_claude_code as claude_code;
pub mod cluster;
pub mod config;
pub mod content;
pub mod coordination;
pub mod egress;
pub mod engines;
pub mod health;
pub mod http;
mod identity;
mod mcp_pools;
pub mod mcp_server;
pub mod metrics;
pub mod model_gateway;
pub mod models;
mod mounts;
pub mod paths;
pub mod project;
pub mod registry;
pub mod runtime;
mod search_indexer;
pub mod session;
mod sink;
#[cfg(test)]
mod test_support;
pub mod threads;
pub mod tool_identity;
mod transcripts;
mod turn_writes;
pub mod webhooks;
mod worker;
pub mod workspace_open;
pub mod workspace_owner;

pub use sink::StoreSink;
