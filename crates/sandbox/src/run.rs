//! Running one shell command under a [`Policy`], with live output, an output
//! cap, a timeout, cancellation, and whole-process-group cleanup.
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::capture::{Capture, SharedCapture, Stream, pump};
use crate::command::{BwrapSpec, Launch, find_bwrap, plain_command, plain_exec};
use crate::gate;
pub(crate) use crate::group_killer::GroupKiller;
use crate::launch::spawn_confined;
use crate::policy::{ExecOutcome, ExecRequest, OutputChunk, Policy, SandboxError};
use crate::running::Running;
use crate::spare::{self, Taken};

/// How long pipes may stay open after the main process is gone and its group
/// has been killed (something that left the group may still hold them).
const DRAIN_GRACE: Duration = Duration::from_millis(300);

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
    /// Start a spare sandbox for `policy` in the background now, so that the
    /// first command under it need not wait for bubblewrap (the first `Bash`
    /// of an `agentd run` or `agentd claude` turn, started beside its first
    /// model call). Does nothing when
    /// spares are off, the policy runs unsandboxed, or a spare for it is
    /// waiting or starting already. The spare is set up under the same
    /// workspace gate as one started after a command, and serves a command
    /// only if everything it was made of is unchanged by then.
    pub fn prestart(&self, policy: &Policy) {
        if policy.unsandboxed {
            return;
        }
        match bwrap_spec(policy) {
            Ok(Some(spec)) => spare::replenish(policy, spec),
            Ok(None) => {}
            Err(err) => tracing::debug!(%err, "no spare sandbox prestarted"),
        }
    }

    /// Run a command under `policy`. Live output goes to `output` as it arrives
    /// (a closed receiver is fine). Returns when the command has exited, timed
    /// out or been cancelled, and every process it started has been killed.
    ///
    /// Guarantees: without bubblewrap (and without `policy.unsandboxed`) nothing
    /// runs and `BwrapMissing` is returned; nothing runs without its
    /// `policy.limits` (`Limits` when a process limit cannot be enforced); when
    /// the main process ends, for any reason, its whole process group and
    /// cgroup are killed; the call returns within about [`DRAIN_GRACE`] of the
    /// main process ending, of the timeout, or of `cancel`. The cgroup is
    /// removed in the background once the kernel has finished tearing the
    /// killed processes down (their namespaces take about 2 ms). Dropping the
    /// returned future also kills the sandbox; its workspace gate pass goes
    /// once it has ended (`running::Running`), on a live runtime.
    ///
    /// With spares on ([`crate::set_spare_capacity`]) the command may run in a
    /// sandbox prestarted for an identical policy; it sees and does exactly
    /// what it would in a fresh one, and `timeout` starts when it is handed over.
    pub async fn exec(
        &self,
        policy: &Policy,
        request: &ExecRequest,
        output: Option<mpsc::UnboundedSender<OutputChunk>>,
        cancel: CancellationToken,
    ) -> Result<ExecOutcome, SandboxError> {
        let started = Instant::now();
        let bwrap = bwrap_spec(policy)?;
        let wrapped;
        let request = match crate::egress_forward::shell_command(bwrap.as_ref(), &request.command) {
            std::borrow::Cow::Owned(command) => {
                wrapped = ExecRequest {
                    command,
                    ..request.clone()
                };
                &wrapped
            }
            std::borrow::Cow::Borrowed(_) => request,
        };
        if cancel.is_cancelled() {
            // Interrupted before it started: run nothing (a spare stays for the next one).
            return Ok(not_started(started));
        }
        // Held until the command has ended (see the `gate` module), even if
        // this future is dropped.
        let (process, pass, bwrap) = match start(policy, request, bwrap, &cancel).await? {
            Some(started) => started,
            None => return Ok(not_started(started)),
        };
        let mut running = Running::new(process, pass);
        let Some(process) = running.process() else {
            return Err(SandboxError::Spawn("the command's process is gone".into()));
        };
        let capture: SharedCapture = Arc::new(Mutex::new(Capture::new(request.output_cap)));
        // The pipes are read in this task, not tasks of their own: the exit
        // and the pipes' end come together, and one task wakes once for both.
        let (stdout, stderr) = process.take_output();
        let pumps = pumps(stdout, stderr, &capture, output);
        tokio::pin!(pumps);
        let mut pipes_closed = false;
        let deadline = tokio::time::sleep(request.timeout);
        tokio::pin!(deadline);
        let mut init_watch = crate::group_killer::init_watch();
        let mut watching = true;
        let ending = loop {
            tokio::select! {
                status = process.wait() => break Ending::Exited(status),
                _ = init_watch.tick(), if watching => watching = !process.watch_init(),
                () = &mut pumps, if !pipes_closed => pipes_closed = true,
                () = &mut deadline => break Ending::TimedOut,
                () = cancel.cancelled() => break Ending::Cancelled,
            }
        };
        let (timed_out, cancelled) = (
            matches!(ending, Ending::TimedOut),
            matches!(ending, Ending::Cancelled),
        );
        let status = match ending {
            Ending::Exited(status) => status,
            Ending::TimedOut | Ending::Cancelled => {
                process.kill();
                process.wait().await
            }
        };
        // Background jobs in the group would keep the pipes (and us) waiting.
        // (A serving sandbox has killed its command's already.)
        process.kill_leftovers();
        if !pipes_closed {
            pipes_closed = tokio::time::timeout(DRAIN_GRACE, &mut pumps).await.is_ok();
            if !pipes_closed {
                tracing::debug!(
                    "output pipes still open after the process group was killed; abandoning them"
                );
            }
        }
        if let Some((process, pass)) = running.finish() {
            process.finish(policy, bwrap, status.is_ok() && pipes_closed, pass);
        }

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

/// Start the command: in a spare sandbox prestarted for this policy, or in
/// a fresh one once the gate lets it through. `None` when `cancel` came
/// first (nothing ran). The pass is held until the command has ended.
async fn start(
    policy: &Policy,
    request: &ExecRequest,
    mut bwrap: Option<BwrapSpec>,
    cancel: &CancellationToken,
) -> Result<Option<(Process, Option<gate::Pass>, Option<BwrapSpec>)>, SandboxError> {
    let spare = match &bwrap {
        Some(spec) => tokio::select! {
            biased;
            // Interrupted while waiting for a spare: nothing ran.
            () = cancel.cancelled() => return Ok(None),
            taken = spare::take_or_wait(spec, &policy.limits, &request.command, &policy.workspace) => taken,
        },
        None => None,
    };
    match spare {
        Some((Taken::Served(served), pass)) => Ok(Some((Process::Served(served), pass, bwrap))),
        Some((Taken::Child(child, group), pass)) => {
            Ok(Some((Process::Child(child, group), pass, bwrap)))
        }
        None => {
            let pass;
            (pass, bwrap) = tokio::select! {
                entered = enter_gate(policy, bwrap) => entered?,
                () = cancel.cancelled() => return Ok(None),
            };
            let (command, launch) = match &bwrap {
                Some(spec) => (spec.shell(&request.command), spec.launch()),
                None => (
                    plain_command(policy, &request.command),
                    Launch::plain(policy),
                ),
            };
            let (child, group) =
                spawn_confined(command, Stdio::null(), &policy.limits, &launch, false)?;
            Ok(Some((Process::Child(child, group), Some(pass), bwrap)))
        }
    }
}

/// A command interrupted before it started: nothing ran.
fn not_started(started: Instant) -> ExecOutcome {
    ExecOutcome {
        exit_code: None,
        stdout: String::new(),
        stderr: String::new(),
        truncated: false,
        dropped_bytes: 0,
        timed_out: false,
        cancelled: true,
        duration: started.elapsed(),
    }
}

/// The gate's side of a cold start: a pinned start, or a command that could
/// rename things in the workspace (an unsandboxed one can too).
fn side_of(spec: Option<&BwrapSpec>) -> gate::Side {
    if spec.is_some_and(BwrapSpec::pins_workspace) {
        gate::Side::PinnedStart
    } else {
        gate::Side::UnpinnedCommand
    }
}

/// Pass the gate for a cold start of `spec`; after a wait the workspace may
/// have changed (`.git` made or removed), so the spec is built again, and
/// the gate passed again if that changes its side.
pub(crate) async fn enter_gate(
    policy: &Policy,
    spec: Option<BwrapSpec>,
) -> Result<(gate::Pass, Option<BwrapSpec>), SandboxError> {
    enter_gate_as(policy, spec, false).await
}

/// [`enter_gate`], with an evictable pass for a long-lived process when
/// `evictable` (see the `gate` module).
pub(crate) async fn enter_gate_as(
    policy: &Policy,
    mut spec: Option<BwrapSpec>,
    evictable: bool,
) -> Result<(gate::Pass, Option<BwrapSpec>), SandboxError> {
    loop {
        let side = side_of(spec.as_ref());
        let (pass, waited) = gate::enter(&policy.workspace, side, evictable).await;
        if !waited {
            return Ok((pass, spec));
        }
        spec = bwrap_spec(policy)?;
        if side_of(spec.as_ref()) == side {
            return Ok((pass, spec));
        }
    }
}

/// How `policy` runs under bubblewrap; `None` when it runs unsandboxed.
pub(crate) fn bwrap_spec(policy: &Policy) -> Result<Option<BwrapSpec>, SandboxError> {
    if policy.unsandboxed {
        if !policy.mounts.is_empty() {
            // Without bubblewrap a mount would be neither there nor read-only.
            return Err(SandboxError::Spawn(
                "host mounts need the sandbox; this policy runs commands unsandboxed".into(),
            ));
        }
        warn_unsandboxed(policy);
        return Ok(None);
    }
    let bwrap = find_bwrap().ok_or(SandboxError::BwrapMissing)?;
    let spec = BwrapSpec::new(bwrap, policy)
        .map_err(|err| SandboxError::Spawn(format!("preparing the sandbox: {err}")))?;
    Ok(Some(spec))
}

/// Build the process for a program and its arguments under `spec` (from
/// [`bwrap_spec`]; `None`: unsandboxed).
pub(crate) fn exec_under(
    policy: &Policy,
    spec: Option<&BwrapSpec>,
    argv: &[&str],
) -> Result<(Command, Launch), SandboxError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(SandboxError::Spawn("no program given".to_string()));
    };
    Ok(match spec {
        Some(spec) => (spec.exec(argv), spec.launch()),
        None => (plain_exec(policy, program, args), Launch::plain(policy)),
    })
}

fn warn_unsandboxed(policy: &Policy) {
    if policy.host_command {
        let uid = policy.run_as.map(|identity| identity.uid);
        tracing::info!(
            ?uid,
            "running an operator's host command (runs_on = \"host\") outside the sandbox"
        );
        return;
    }
    tracing::warn!(
        workspace = %policy.workspace.display(),
        "running a command WITHOUT a sandbox (profile sets sandbox = \"off\"): \
         it can read and write anything this server can"
    );
}

/// A reader of a command's output.
type Output = Box<dyn tokio::io::AsyncRead + Unpin + Send>;

/// Copies the command's stdout and stderr to `capture` (and `output`) until
/// both close.
fn pumps(
    stdout: Option<Output>,
    stderr: Option<Output>,
    capture: &SharedCapture,
    output: Option<mpsc::UnboundedSender<OutputChunk>>,
) -> impl std::future::Future<Output = ()> + use<> {
    let stdout = stdout.map(|out| pump(out, Stream::Stdout, capture.clone(), output.clone()));
    let stderr = stderr.map(|err| pump(err, Stream::Stderr, capture.clone(), output));
    async move {
        let stdout = async {
            if let Some(pump) = stdout {
                pump.await;
            }
        };
        let stderr = async {
            if let Some(pump) = stderr {
                pump.await;
            }
        };
        // In order: of output that is there at once, stdout's goes first.
        tokio::join!(biased; stdout, stderr);
    }
}

/// A running command: a process of its own (cold, or a one-shot spare), or
/// a command in a serving sandbox.
pub(crate) enum Process {
    Child(Child, GroupKiller),
    Served(crate::served::Served),
}

impl Process {
    fn take_output(&mut self) -> (Option<Output>, Option<Output>) {
        match self {
            Process::Child(child, _) => (
                child.stdout.take().map(|out| Box::new(out) as Output),
                child.stderr.take().map(|err| Box::new(err) as Output),
            ),
            Process::Served(served) => (
                served.stdout.take().map(|out| Box::new(out) as Output),
                served.stderr.take().map(|err| Box::new(err) as Output),
            ),
        }
    }

    /// Cancel-safe.
    pub(crate) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            Process::Child(child, _) => child.wait().await,
            Process::Served(served) => served.wait().await,
        }
    }

    /// Kill the command (for a served one, its whole sandbox).
    pub(crate) fn kill(&mut self) {
        match self {
            Process::Child(_, group) => group.kill_sandbox(),
            Process::Served(served) => served.kill(),
        }
    }

    /// Look for a cold sandbox's PID 1 (see [`GroupKiller::watch_init`]);
    /// true once there is nothing (more) to look for.
    fn watch_init(&mut self) -> bool {
        match self {
            Process::Child(_, group) => group.watch_init(),
            Process::Served(_) => true,
        }
    }

    /// Whether its own process (not a served command's sandbox) has been
    /// reaped: its pid and group id may then be another's.
    pub(crate) fn reaped(&self) -> bool {
        matches!(self, Process::Child(child, _) if child.id().is_none())
    }

    /// After the main process ended: kill what it left behind.
    pub(crate) fn kill_leftovers(&mut self) {
        if let Process::Child(_, group) = self {
            group.kill();
        }
    }

    /// A killed command whose `exec` was dropped, now reaped: its pass goes
    /// once nothing of it runs; no spare follows (nobody waits for one).
    pub(crate) fn abandon(self, pass: Option<gate::Pass>) {
        self.tear_down(false, pass);
    }

    /// The command is over: tear its sandbox down and make the next spare
    /// (a serving sandbox that ended `clean` serves again instead).
    /// The command's gate `pass` goes once nothing of it runs.
    fn finish(
        self,
        policy: &Policy,
        bwrap: Option<BwrapSpec>,
        clean: bool,
        pass: Option<gate::Pass>,
    ) {
        // Only after the tear-down: a command still running (or, after a
        // kill, still dying) could change what the next sandbox is made of
        // between the spare's checks and its mounts (swap `.git` for a link).
        if self.tear_down(clean, pass)
            && let Some(spec) = bwrap
        {
            spare::replenish(policy, spec);
        }
    }

    /// Kill and clean up its sandbox, the `pass` going once nothing of it
    /// runs; a serving one that ended `clean` goes back to the pool instead.
    /// True when the sandbox is gone (a new spare may take its place).
    fn tear_down(self, clean: bool, pass: Option<gate::Pass>) -> bool {
        match self {
            Process::Child(_, group) => {
                group.finish_later(pass);
                true
            }
            Process::Served(served) => !served.finish(clean, pass),
        }
    }
}
