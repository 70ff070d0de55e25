//! Running one hook process.
//!
//! `bash -c <command>` in the workspace, in its own process group, with a clean
//! environment: `PATH`, `HOME` and `LANG` (the server's values, or defaults), then
//! the context's extra variables, then `AGENTD_SESSION_ID` and `CLAUDE_PROJECT_DIR`
//! (= the workspace). Nothing else of the server's environment — which holds API
//! keys — reaches the hook. The stdin JSON is written and stdin closed; stdout and
//! stderr are captured up to [`OUTPUT_CAP`] bytes each (the rest is read and
//! dropped). When the hook exits, times out, or the call is dropped, the whole
//! process group is killed, so nothing a hook starts outlives it.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use super::HookContext;

/// Per-stream capture limit.
pub(crate) const OUTPUT_CAP: usize = 1024 * 1024;

/// How long to keep reading output after the process group was killed (a process
/// that left the group may still hold the pipes).
const DRAIN_GRACE: Duration = Duration::from_millis(500);

const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
const DEFAULT_LANG: &str = "C.UTF-8";

/// How a hook process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Exited with this code.
    Exited(i32),
    /// Killed by this signal (not by us).
    Signaled(i32),
    /// Ran past its timeout (of this many seconds) and was killed.
    TimedOut(u64),
    /// Could not be started, or could not be waited for.
    Failed(String),
}

/// The result of running one hook.
#[derive(Debug, Clone)]
pub(crate) struct HookRun {
    pub ending: Ending,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
}

impl HookRun {
    pub(crate) fn failed(error: String) -> Self {
        Self {
            ending: Ending::Failed(error),
            stdout: String::new(),
            stderr: String::new(),
            stdout_truncated: false,
        }
    }
}

/// The environment a hook process gets (and nothing else).
pub(crate) fn hook_env(ctx: &HookContext) -> Vec<(String, String)> {
    let inherited = |name: &str, default: Option<&str>| {
        std::env::var(name)
            .ok()
            .filter(|value| !value.is_empty())
            .or_else(|| default.map(str::to_owned))
            .map(|value| (name.to_owned(), value))
    };
    let mut env: Vec<(String, String)> = [
        inherited("PATH", Some(DEFAULT_PATH)),
        inherited("HOME", None),
        inherited("LANG", Some(DEFAULT_LANG)),
    ]
    .into_iter()
    .flatten()
    .collect();
    env.extend(ctx.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.push(("AGENTD_SESSION_ID".into(), ctx.session_id.clone()));
    env.push(("CLAUDE_PROJECT_DIR".into(), ctx.cwd.display().to_string()));
    env
}

/// Start the hook in the workspace by descriptor (checked against the
/// turn's pin) and, in a root server, as the agent's user. The descriptor is
/// held until the hook has started.
fn working_dir(
    process: &mut Command,
    ctx: &HookContext,
) -> Result<Option<rustix::fd::OwnedFd>, String> {
    let identity = ctx.run_as.filter(|_| rustix::process::geteuid().is_root());
    if identity.is_none() && ctx.workspace_pin.is_none() {
        return Ok(None);
    }
    if let Some(identity) = identity {
        // The standard library also drops root's supplementary groups here.
        process.uid(identity.uid).gid(identity.gid);
    }
    let fd = rustix::fs::open(
        &ctx.cwd,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|err| {
        format!(
            "could not open its working directory {}: {err}",
            ctx.cwd.display()
        )
    })?;
    if let Some(pin) = ctx.workspace_pin {
        let stat = rustix::fs::fstat(&fd).map_err(|err| err.to_string())?;
        if (stat.st_dev, stat.st_ino) != pin {
            return Err(format!(
                "its working directory {} is no longer the turn's workspace (it was replaced)",
                ctx.cwd.display()
            ));
        }
    }
    use std::os::fd::AsRawFd;
    process.current_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    Ok(Some(fd))
}

/// Run `command` with `stdin` as its input. Never fails: problems are an [`Ending`].
pub(crate) async fn run_hook(
    command: &str,
    timeout: Duration,
    sandboxed: bool,
    ctx: &HookContext,
    stdin: &[u8],
) -> HookRun {
    if sandboxed {
        return super::sandboxed::run(command, timeout, ctx, stdin).await;
    }
    let started = Instant::now();
    let mut process = Command::new("bash");
    process
        .arg("-c")
        .arg(command)
        .env_clear()
        .envs(hook_env(ctx))
        .current_dir(&ctx.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // Held until the hook has started: its working directory for the switch.
    let _workspace_fd = match working_dir(&mut process, ctx) {
        Ok(fd) => fd,
        Err(message) => return HookRun::failed(message),
    };
    let mut child = match process.spawn() {
        Ok(child) => child,
        Err(err) => {
            return HookRun::failed(format!(
                "could not be started (`bash -c` in {}): {err}",
                ctx.cwd.display()
            ));
        }
    };
    let group = GroupKiller::new(&child);

    let feeder = child.stdin.take().map(|mut pipe| {
        let input = stdin.to_vec();
        // A hook that never reads its stdin gets EPIPE here, which is fine.
        tokio::spawn(async move {
            let _ = pipe.write_all(&input).await;
            let _ = pipe.shutdown().await;
        })
    });
    let stdout = Capture::default();
    let stderr = Capture::default();
    let pumps = start_pumps(&mut child, &stdout, &stderr);

    let ending = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(status)) => match (status.code(), status.signal()) {
            (Some(code), _) => Ending::Exited(code),
            (None, Some(signal)) => Ending::Signaled(signal),
            (None, None) => Ending::Failed(format!("ended with an unknown status: {status}")),
        },
        Ok(Err(err)) => Ending::Failed(format!("could not be waited for: {err}")),
        Err(_) => {
            group.kill();
            let _ = child.wait().await;
            Ending::TimedOut(timeout.as_secs())
        }
    };
    // Whatever the hook left running in the background goes too.
    group.kill();
    drain(pumps).await;
    group.disarm();
    if let Some(feeder) = feeder {
        feeder.abort();
    }

    let (stdout, stdout_truncated) = stdout.take();
    let (stderr, _) = stderr.take();
    tracing::debug!(
        command,
        ?ending,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "hook finished"
    );
    HookRun {
        ending,
        stdout,
        stderr,
        stdout_truncated,
    }
}

/// A capped output buffer shared with the task that reads the pipe.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<(Vec<u8>, bool)>>);

impl Capture {
    fn push(&self, bytes: &[u8]) {
        let mut guard = self.0.lock().unwrap_or_else(|err| err.into_inner());
        let (buffer, truncated) = &mut *guard;
        let room = OUTPUT_CAP.saturating_sub(buffer.len());
        buffer.extend_from_slice(&bytes[..bytes.len().min(room)]);
        if bytes.len() > room {
            *truncated = true;
        }
    }

    fn take(&self) -> (String, bool) {
        let mut guard = self.0.lock().unwrap_or_else(|err| err.into_inner());
        let (buffer, truncated) = std::mem::take(&mut *guard);
        (String::from_utf8_lossy(&buffer).into_owned(), truncated)
    }
}

fn start_pumps(child: &mut Child, stdout: &Capture, stderr: &Capture) -> Vec<JoinHandle<()>> {
    let mut pumps = Vec::with_capacity(2);
    if let Some(pipe) = child.stdout.take() {
        pumps.push(tokio::spawn(pump(pipe, stdout.clone())));
    }
    if let Some(pipe) = child.stderr.take() {
        pumps.push(tokio::spawn(pump(pipe, stderr.clone())));
    }
    pumps
}

async fn pump(mut pipe: impl AsyncRead + Unpin, capture: Capture) {
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => capture.push(&chunk[..n]),
        }
    }
}

/// Wait for the pipes to close, but give up after [`DRAIN_GRACE`].
async fn drain(pumps: Vec<JoinHandle<()>>) {
    let aborts: Vec<_> = pumps.iter().map(JoinHandle::abort_handle).collect();
    let all_closed = async {
        for pump in pumps {
            let _ = pump.await;
        }
    };
    if tokio::time::timeout(DRAIN_GRACE, all_closed).await.is_err() {
        tracing::debug!("hook output pipes still open after its process group was killed");
        aborts.iter().for_each(|abort| abort.abort());
    }
}

/// Kills the child's process group (it leads one, thanks to `process_group(0)`),
/// and does so on drop unless disarmed — so dropping a running hook's future
/// leaves nothing behind.
struct GroupKiller {
    group: Option<rustix::process::Pid>,
}

impl GroupKiller {
    fn new(child: &Child) -> Self {
        let group = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(rustix::process::Pid::from_raw);
        Self { group }
    }

    fn kill(&self) {
        if let Some(group) = self.group {
            // ESRCH (the group is already empty) is the normal case.
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
