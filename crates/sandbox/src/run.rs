//! Running one shell command under a [`Policy`], with live output, an output
//! cap, a timeout, cancellation, and whole-process-group cleanup.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::capture::{Capture, SharedCapture, Stream, pump};
use crate::command::{bwrap_command, find_bwrap, plain_command};

/// How long pipes may stay open after the main process is gone and its group
/// has been killed (something that left the group may still hold them).
const DRAIN_GRACE: Duration = Duration::from_millis(300);

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

impl Policy {
    /// The strictest policy for `workspace`: sandboxed, no network, no extra
    /// paths or variables.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Self {
            workspace: workspace.into(),
            read_only_paths: Vec::new(),
            network: false,
            env: BTreeMap::new(),
            unsandboxed: false,
        }
    }
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
    /// How many bytes of output were dropped because of `output_cap`.
    pub dropped_bytes: u64,
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

/// True when a `bwrap` executable is installed (on PATH or in /usr/bin).
pub fn bwrap_available() -> bool {
    find_bwrap().is_some()
}

#[derive(Debug, Clone, Default)]
pub struct Sandbox;

/// Why the wait for the main process ended.
enum Ending {
    Exited(std::io::Result<ExitStatus>),
    TimedOut,
    Cancelled,
}

impl Sandbox {
    /// Run a command under `policy`. Live output goes to `output` as it arrives
    /// (a closed receiver is fine). Returns when the command and every process it
    /// started have exited, been timed out, or been cancelled.
    ///
    /// Guarantees: without bubblewrap (and without `policy.unsandboxed`) nothing
    /// runs and `BwrapMissing` is returned; when the main process ends, for any
    /// reason, its whole process group is killed; the call returns within about
    /// [`DRAIN_GRACE`] of the main process ending, of the timeout, or of `cancel`.
    /// Dropping the returned future also kills the process group.
    pub async fn exec(
        &self,
        policy: &Policy,
        request: &ExecRequest,
        output: Option<mpsc::UnboundedSender<OutputChunk>>,
        cancel: CancellationToken,
    ) -> Result<ExecOutcome, SandboxError> {
        let started = Instant::now();
        let mut command = build_command(policy, &request.command)?;
        if cancel.is_cancelled() {
            // Interrupted before it started: run nothing.
            return Ok(ExecOutcome {
                exit_code: None,
                stdout: String::new(),
                stderr: String::new(),
                truncated: false,
                dropped_bytes: 0,
                timed_out: false,
                cancelled: true,
                duration: started.elapsed(),
            });
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        apply_resource_limits(&mut command, policy);

        let mut child = command
            .spawn()
            .map_err(|err| SandboxError::Spawn(err.to_string()))?;
        let group = GroupKiller::new(&child);
        let capture: SharedCapture = Arc::new(Mutex::new(Capture::new(request.output_cap)));
        let pumps = start_pumps(&mut child, &capture, output);

        let ending = tokio::select! {
            status = child.wait() => Ending::Exited(status),
            () = tokio::time::sleep(request.timeout) => Ending::TimedOut,
            () = cancel.cancelled() => Ending::Cancelled,
        };
        let (timed_out, cancelled) = (
            matches!(ending, Ending::TimedOut),
            matches!(ending, Ending::Cancelled),
        );
        let status = match ending {
            Ending::Exited(status) => status,
            Ending::TimedOut | Ending::Cancelled => {
                group.kill();
                child.wait().await
            }
        };
        // Background jobs in the group would keep the pipes (and us) waiting.
        group.kill();
        drain(pumps).await;
        group.disarm();

        let status = status.map_err(|err| SandboxError::Spawn(format!("waiting failed: {err}")))?;
        let capture = std::mem::take(&mut *capture.lock().unwrap_or_else(|err| err.into_inner()));
        Ok(ExecOutcome {
            exit_code: status.code(),
            stdout: String::from_utf8_lossy(&capture.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&capture.stderr).into_owned(),
            truncated: capture.dropped_bytes > 0,
            dropped_bytes: capture.dropped_bytes,
            timed_out,
            cancelled,
            duration: started.elapsed(),
        })
    }
}

fn build_command(policy: &Policy, shell_command: &str) -> Result<Command, SandboxError> {
    if policy.unsandboxed {
        tracing::warn!(
            workspace = %policy.workspace.display(),
            "running a command WITHOUT a sandbox (profile sets sandbox = \"off\"): \
             it can read and write anything this server can"
        );
        return Ok(plain_command(policy, shell_command));
    }
    let bwrap = find_bwrap().ok_or(SandboxError::BwrapMissing)?;
    Ok(bwrap_command(&bwrap, policy, shell_command))
}

/// Hook for per-process resource limits (CPU, address space, file size,
/// processes, open files), applied between fork and exec. Not yet enforced:
/// it needs a `pre_exec` closure, i.e. a reviewed `unsafe` block.
fn apply_resource_limits(_command: &mut Command, _policy: &Policy) {}

fn start_pumps(
    child: &mut Child,
    capture: &SharedCapture,
    output: Option<mpsc::UnboundedSender<OutputChunk>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut pumps = Vec::with_capacity(2);
    if let Some(stdout) = child.stdout.take() {
        pumps.push(tokio::spawn(pump(
            stdout,
            Stream::Stdout,
            capture.clone(),
            output.clone(),
        )));
    }
    if let Some(stderr) = child.stderr.take() {
        pumps.push(tokio::spawn(pump(
            stderr,
            Stream::Stderr,
            capture.clone(),
            output,
        )));
    }
    pumps
}

/// Wait for the pipes to close, but give up after [`DRAIN_GRACE`].
async fn drain(pumps: Vec<tokio::task::JoinHandle<()>>) {
    let aborts: Vec<_> = pumps.iter().map(|pump| pump.abort_handle()).collect();
    let all_closed = async {
        for pump in pumps {
            let _ = pump.await;
        }
    };
    if tokio::time::timeout(DRAIN_GRACE, all_closed).await.is_err() {
        tracing::debug!(
            "output pipes still open after the process group was killed; abandoning them"
        );
        aborts.iter().for_each(|abort| abort.abort());
    }
}

/// Kills the child's process group (the child leads it, thanks to
/// `process_group(0)`), and does so on drop unless disarmed.
struct GroupKiller {
    group: Option<rustix::process::Pid>,
}

impl GroupKiller {
    fn new(child: &Child) -> Self {
        let group = child
            .id()
            .and_then(|pid| rustix::process::Pid::from_raw(pid as i32));
        Self { group }
    }

    fn kill(&self) {
        if let Some(group) = self.group {
            // ESRCH (group already empty) is the normal case.
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }

    fn disarm(mut self) {
        self.group = None;
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        self.kill();
    }
}
