//! What a tool call runs in, and what it returns.
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentd_protocol::OutputStream;
use agentd_sandbox::{PathGuard, Policy, Sandbox};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::WebPolicy;
use crate::background::BackgroundShells;
use crate::result_cap::DEFAULT_RESULT_CAP;

/// Default `Bash` timeout when the model gives none.
pub const DEFAULT_BASH_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest `Bash` timeout a model may ask for.
pub const DEFAULT_BASH_MAX_TIMEOUT: Duration = Duration::from_secs(600);

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
    /// Paths that searches (Glob, Grep) must not reveal, e.g. those a
    /// `Read(.env)` deny rule covers.
    pub hidden: HiddenPaths,
    /// What `WebFetch` may reach.
    pub web: WebPolicy,
    /// The session's background commands (`Bash` with `run_in_background`).
    pub background: BackgroundShells,
    /// Connections the session's egress proxy refused, to be reported.
    pub network_refusals: Option<crate::egress::NetworkRefusals>,
}

/// A predicate over paths that directory walks skip. Empty by default.
#[derive(Clone, Default)]
pub struct HiddenPaths(Option<Arc<IsHidden>>);

type IsHidden = dyn Fn(&Path) -> bool + Send + Sync;

impl HiddenPaths {
    pub fn new(is_hidden: impl Fn(&Path) -> bool + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(is_hidden)))
    }

    pub fn is_hidden(&self, path: &Path) -> bool {
        self.0.as_ref().is_some_and(|is_hidden| is_hidden(path))
    }
}

impl std::fmt::Debug for HiddenPaths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "HiddenPaths(..)"
        } else {
            "HiddenPaths(none)"
        })
    }
}

impl ToolContext {
    /// A context for `workspace` (which must exist) with the strictest sandbox
    /// policy (no network, no extra roots), no output listener, and the default
    /// timeouts and result cap.
    pub fn for_workspace(workspace: &Path) -> std::io::Result<Self> {
        let guard = PathGuard::new(workspace, &[])?;
        let policy = Policy::new(guard.workspace());
        Ok(Self {
            guard,
            sandbox: Sandbox,
            policy,
            output: None,
            cancel: CancellationToken::new(),
            bash_timeout: DEFAULT_BASH_TIMEOUT,
            bash_max_timeout: DEFAULT_BASH_MAX_TIMEOUT,
            result_cap: DEFAULT_RESULT_CAP,
            hidden: HiddenPaths::default(),
            web: WebPolicy::default(),
            background: BackgroundShells::default(),
            network_refusals: None,
        })
    }
}

/// The result of a tool call as the model will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub content: String,
    pub is_error: bool,
    /// Images shown to the model after `content` (image `source` objects,
    /// see `agentd_protocol::ContentBlock::Image`).
    pub images: Vec<serde_json::Value>,
}

impl ToolResult {
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            images: Vec::new(),
        }
    }

    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            images: Vec::new(),
        }
    }
}
