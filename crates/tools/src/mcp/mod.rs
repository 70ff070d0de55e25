//! MCP client bridge: tools of external MCP servers (stdio or streamable
//! HTTP) as [`Tool`](crate::Tool)s named `mcp__<server>__<tool>`.
//!
//! An [`McpPool`] (one per agentd process) starts each session's servers
//! lazily, on the session's first [`McpPool::tools`] call, and keeps them per
//! session: a stdio server runs inside the session's sandbox with the policy
//! given there (workspace as cwd and `HOME`, network as the policy says,
//! clean environment plus the policy's and the server config's variables),
//! so it sees and changes what the session's `Bash` would.
//!
//! What stdio servers get: `policy.limits`, except that the address-space
//! rlimit is raised to at least [`MCP_MIN_ADDRESS_SPACE`] (V8 and
//! WebAssembly runtimes reserve large address ranges up front; memory is
//! still bounded by the cgroup's `memory_bytes`). `cpu_seconds` counts over
//! the server's whole life, so a busy server that hits it dies and is
//! restarted on the next call. The program and its files must be visible in
//! the sandbox: under `/usr` (e.g. a global npm install) or in one of
//! `policy.read_only_paths`.
//!
//! Lifecycle: a server idle (no call) for its `idle_timeout` is stopped by a
//! background reaper and restarted on its next call. The tool list fetched at
//! the first start is cached per session, so listing tools for a session
//! whose servers were stopped for idleness does not start them again (a
//! server whose tools changed shows the change only in a new session). A
//! server that dies during a call turns that call into an error naming the
//! exit and the tail of its stderr; the next call starts it afresh. A call
//! that outlives `call_timeout`, or whose `ToolContext::cancel` fires, is
//! abandoned with a `notifications/cancelled` to the server.
//!
//! Limits: [`ToolResult`](crate::ToolResult) is text only, so images and
//! audio become a line such as `[image: image/png, 12345 bytes base64]`, and
//! blob resources `[resource <uri> (<mime>), N bytes]`; the model never sees
//! the pixels. Only tools are bridged (no prompts, resources, sampling,
//! roots or elicitation).

mod channel;
mod connection;
mod listed;
mod names;
mod pool;
mod read_only;
mod result;
mod slot;
mod tool;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use agentd_sandbox::Limits;

pub use channel::McpChannel;
pub use names::tool_name;
pub use pool::McpPool;
pub use read_only::ReadOnlyTools;

/// Lowest address-space rlimit a stdio MCP server is given (16 GiB).
pub const MCP_MIN_ADDRESS_SPACE: u64 = 16 << 30;

/// One MCP server, as configured. Its `Debug` shows the names of its
/// variables and headers only: values may be tokens.
#[derive(Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    /// Used in tool names (`mcp__<name>__<tool>`) and messages.
    pub name: String,
    pub transport: McpTransport,
    /// Longest wait for the server to start, initialize and list its tools.
    pub startup_timeout: Duration,
    /// Longest wait for one tool call.
    pub call_timeout: Duration,
    /// A server with no call for this long is stopped (and restarted on use).
    pub idle_timeout: Duration,
    /// A profile's network allowlist, which an HTTP server's address must
    /// pass as the egress proxy's would (a stdio server's traffic goes
    /// through the proxy itself).
    pub egress: Option<Arc<crate::egress::EgressAllowlist>>,
    /// Which of its tools are read-only (none unless the operator says).
    pub read_only: ReadOnlyTools,
    /// Names in a stdio server's `env` whose values are secret (a token the
    /// server filled in): given to the sandbox outside bubblewrap's command
    /// line (which any host user can read) and masked in its stderr.
    pub secret_env: BTreeSet<String>,
}

impl std::fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServerConfig")
            .field("name", &self.name)
            .field("transport", &self.transport)
            .field("startup_timeout", &self.startup_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("egress", &self.egress)
            .field("read_only", &self.read_only)
            .field("secret_env", &self.secret_env)
            .finish()
    }
}

impl McpServerConfig {
    pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
    pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(120);
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

    /// A server with the default timeouts.
    pub fn new(name: impl Into<String>, transport: McpTransport) -> Self {
        Self {
            name: name.into(),
            transport,
            startup_timeout: Self::DEFAULT_STARTUP_TIMEOUT,
            call_timeout: Self::DEFAULT_CALL_TIMEOUT,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            egress: None,
            read_only: ReadOnlyTools::default(),
            secret_env: BTreeSet::new(),
        }
    }
}

/// How to reach an MCP server. Its `Debug` shows the names of `env` and
/// `headers`, not their values.
#[derive(Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A program speaking MCP on stdin/stdout, run in the session's sandbox.
    /// `command` is looked up on the sandbox's PATH (`/usr/local/bin:/usr/bin:/bin`)
    /// unless absolute; `env` is added to the sandbox environment.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        /// Directories the server's own files live in (outside `/usr`),
        /// bound read-only into its sandbox.
        read_only_paths: Vec<std::path::PathBuf>,
        /// Let this server reach the network even when the session's
        /// commands cannot.
        network: bool,
    },
    /// A streamable HTTP endpoint, reached from this server (not sandboxed);
    /// `headers` go with every request (e.g. `Authorization`).
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// A server living in the client that started agentd (an Agent SDK
    /// app's in-process server), reached one JSON-RPC message at a time.
    Channel(McpChannel),
}

impl std::fmt::Debug for McpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stdio {
                command,
                args,
                env,
                read_only_paths,
                network,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .field("read_only_paths", read_only_paths)
                .field("network", network)
                .finish(),
            Self::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .finish(),
            Self::Channel(channel) => f.debug_tuple("Channel").field(channel).finish(),
        }
    }
}

/// A session's MCP tools, and why some servers have none.
#[derive(Clone, Default)]
pub struct McpTools {
    pub tools: Vec<Arc<dyn crate::Tool>>,
    /// One message per server that failed to start or list its tools (or
    /// per tool that could not be offered).
    pub errors: Vec<String>,
}

impl std::fmt::Debug for McpTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.tools.iter().map(|tool| tool.name()).collect();
        f.debug_struct("McpTools")
            .field("tools", &names)
            .field("errors", &self.errors)
            .finish()
    }
}

/// The limits a stdio MCP server runs with, given the session's.
pub fn server_limits(session: &Limits) -> Limits {
    Limits {
        address_space_bytes: session
            .address_space_bytes
            .map(|bytes| bytes.max(MCP_MIN_ADDRESS_SPACE)),
        ..*session
    }
}
