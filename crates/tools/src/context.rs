//! INTERFACE (to be implemented).
use std::time::Duration;

use agentd_protocol::OutputStream;
use agentd_sandbox::{PathGuard, Policy, Sandbox};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Live output of a running tool call, for `tool.output` events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub stream: OutputStream,
    pub text: String,
}

/// Everything a tool call may use. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ToolContext {
    pub guard: PathGuard,
    pub sandbox: Sandbox,
    pub policy: Policy,
    /// Live output sink; `None` when nobody listens.
    pub output: Option<mpsc::UnboundedSender<ToolOutput>>,
    pub cancel: CancellationToken,
    /// Default and maximum `Bash` timeouts.
    pub bash_timeout: Duration,
    pub bash_max_timeout: Duration,
    /// Cap, in characters, on a result put into the model's context.
    pub result_cap: usize,
}

/// The result of a tool call as the model will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub content: String,
    pub is_error: bool,
}

impl ToolResult {
    pub fn ok(content: impl Into<String>) -> Self {
        Self { content: content.into(), is_error: false }
    }

    pub fn error(content: impl Into<String>) -> Self {
        Self { content: content.into(), is_error: true }
    }
}
