//! How to start the `claude` CLI for a model with `provider = "claude-code"`.

use std::path::PathBuf;
use std::time::Duration;

/// How to start the `claude` CLI for a `claude-code` model.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaudeCodeSettings {
    pub command: PathBuf,
    pub model: String,
    pub base_url: Option<String>,
    pub api_key: String,
    /// A warm CLI without a turn for this long is stopped.
    pub idle_timeout: Duration,
    /// Set when the CLI talks to agentd's own `/v1/messages`, which serves
    /// this configured model (`backend = …`): `model` is its name, and the
    /// CLI's side requests (titles, topic checks) use it too instead of Haiku.
    pub backend: Option<String>,
}
