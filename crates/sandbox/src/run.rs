//! INTERFACE (to be implemented): see lib.rs.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What a sandboxed command may do.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The only writable directory; also the working directory and `HOME`.
    pub workspace: PathBuf,
    /// Further directories bound read-only.
    pub read_only_paths: Vec<PathBuf>,
    pub network: bool,
    /// Variables passed in on top of the fixed allowlist (PATH, HOME, LANG, TERM).
    pub env: BTreeMap<String, String>,
    /// Run without bubblewrap. Only when a profile says `sandbox = "off"`.
    pub unsandboxed: bool,
}

#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// Run as `bash -c <command>`.
    pub command: String,
    pub timeout: Duration,
    /// Bytes of combined output kept for the result; the rest is counted, not kept.
    pub output_cap: usize,
}

/// A piece of live output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputChunk {
    Stdout(String),
    Stderr(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutcome {
    /// None when killed by a signal.
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// True when output beyond `output_cap` was dropped.
    pub truncated: bool,
    pub timed_out: bool,
    pub cancelled: bool,
    pub duration: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "bubblewrap (bwrap) is not installed, so sandboxed commands cannot run; install it with `apt-get install bubblewrap`"
    )]
    BwrapMissing,
    #[error("could not start the command: {0}")]
    Spawn(String),
}

#[derive(Debug, Clone, Default)]
pub struct Sandbox;

impl Sandbox {
    /// Run a command under `policy`. Live output goes to `output` as it arrives
    /// (a closed receiver is fine). Returns when the command and every process it
    /// started have exited, been timed out, or been cancelled.
    pub async fn exec(
        &self,
        policy: &Policy,
        request: &ExecRequest,
        output: Option<mpsc::UnboundedSender<OutputChunk>>,
        cancel: CancellationToken,
    ) -> Result<ExecOutcome, SandboxError> {
        let _ = (policy, request, output, cancel);
        Err(SandboxError::BwrapMissing)
    }
}
