//! Long-lived sandboxed processes, such as MCP stdio servers: the same
//! [`Policy`] as [`Sandbox::exec`] (bubblewrap, workspace as cwd, clean
//! environment, rlimits, cgroup, own process group), but with stdin and stdout
//! piped to the caller, stderr kept as a bounded tail (a background shell's
//! is piped too, see `background`), and no wall-clock timeout: the process
//! lives until it exits, is killed or shut down, or is dropped.
use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::capture::Utf8Chunker;
use crate::command::Launch;
use crate::launch::spawn_confined;
use crate::policy::{Policy, SandboxError};
use crate::run::{GroupKiller, Sandbox, bwrap_spec, enter_gate, enter_gate_as, exec_under};

/// How much of a spawned process's stderr is kept (the most recent bytes).
pub const STDERR_TAIL_BYTES: usize = 16 * 1024;

/// How long [`SandboxedProcess::shutdown`] waits, after closing stdin, for the
/// process to exit by itself before killing it.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// How long [`SandboxedProcess::shutdown`] waits for the watcher's
/// clean-up after the process has been killed.
const WATCHER_WAIT: Duration = Duration::from_secs(2);

/// How long stderr may stay open after the process group was killed
/// (something that escaped it may hold the pipe).
const STDERR_DRAIN: Duration = Duration::from_millis(300);

impl Sandbox {
    /// Start `argv` (program and arguments, exec'd directly: no shell parses
    /// it) under `policy`, with stdin and stdout piped. Must be called inside a
    /// Tokio runtime.
    ///
    /// Guarantees as for [`Sandbox::exec`]: nothing runs without bubblewrap
    /// (unless `policy.unsandboxed`) or without `policy.limits`. When the main
    /// process exits, whatever it left in its process group and cgroup is
    /// killed (so its pipes close). Dropping the [`SandboxedProcess`] kills it
    /// all; [`SandboxedProcess::shutdown`] first lets it exit by itself.
    /// `policy.limits.cpu_seconds` is per process over its whole life, so a
    /// long-lived process needs a budget for all the work it will ever do.
    ///
    /// It passes the workspace gate first and holds an evictable pass (see
    /// the `gate` module): it is killed, as by [`SandboxedProcess::kill`],
    /// when a start or command on the gate's other side has to wait for it.
    /// A pass taken for a pinned start goes at [`SandboxedProcess::set_up`];
    /// an unpinned process holds its pass for its life.
    pub async fn spawn(
        &self,
        policy: &Policy,
        argv: &[String],
    ) -> Result<SandboxedProcess, SandboxError> {
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        if argv.is_empty() {
            // Before the gate, which could stop others for nothing.
            return Err(SandboxError::Spawn("no program given".to_string()));
        }
        let (pass, bwrap) = enter_gate_as(policy, bwrap_spec(policy)?, true).await?;
        let (command, launch) = exec_under(policy, bwrap.as_ref(), &argv)?;
        start_piped(policy, command, &launch, &argv, Some(pass))
    }

    /// [`Sandbox::spawn`] for a process the model's call starts (an
    /// operator's command tool): a sandboxed one first passes the
    /// workspace gate like a cold command (see the `gate` module) and holds
    /// its pass until it has ended; an operator's host command
    /// (`policy.host_command`) takes none. `None` when `cancel` came before
    /// it started (nothing ran).
    pub async fn spawn_gated(
        &self,
        policy: &Policy,
        argv: &[String],
        cancel: &CancellationToken,
    ) -> Result<Option<SandboxedProcess>, SandboxError> {
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let bwrap = bwrap_spec(policy)?;
        let (pass, bwrap) = if policy.host_command {
            (None, bwrap)
        } else {
            // Biased: an interrupt that came first starts nothing.
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(None),
                entered = enter_gate(policy, bwrap) => {
                    let (pass, bwrap) = entered?;
                    (Some(pass), bwrap)
                }
            }
        };
        if cancel.is_cancelled() {
            return Ok(None);
        }
        let (command, launch) = exec_under(policy, bwrap.as_ref(), &argv)?;
        start_piped(policy, command, &launch, &argv, pass).map(Some)
    }
}

/// Start `command` with stdin and stdout piped, stderr to the masked tail,
/// holding `pass` until it has ended.
fn start_piped(
    policy: &Policy,
    command: tokio::process::Command,
    launch: &Launch,
    argv: &[&str],
    pass: Option<crate::gate::Pass>,
) -> Result<SandboxedProcess, SandboxError> {
    let spawned = spawn_confined(command, Stdio::piped(), &policy.limits, launch, false);
    let (child, group) = spawned.map_err(|err| match err {
        SandboxError::Spawn(message) => SandboxError::Spawn(format!("{}: {message}", argv[0])),
        other => other,
    })?;
    let mask = crate::SecretMask::new(policy.secrets());
    Ok(SandboxedProcess::supervise(child, group, Some(mask), pass))
}

impl SandboxedProcess {
    /// Watch a spawned child: its stderr goes to the tail, masked, when
    /// `tail_stderr` gives the mask (else the caller takes it), and `pass`
    /// is held until the main process has ended and its group been killed.
    pub(crate) fn supervise(
        mut child: Child,
        group: GroupKiller,
        tail_stderr: Option<crate::SecretMask>,
        pass: Option<crate::gate::Pass>,
    ) -> Self {
        let pid = child.id();
        let tail = Arc::new(Mutex::new(Tail::default()));
        let stderr_pipe = child.stderr.take();
        let (stderr, stderr_pipe) = match stderr_pipe {
            Some(pipe) if tail_stderr.is_some() => (
                Some(tokio::spawn(
                    read_stderr(pipe, tail.clone(), pid, tail_stderr.unwrap_or_default())
                        .in_current_span(),
                )),
                None,
            ),
            pipe => (None, pipe),
        };
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let (exit_sender, exit) = watch::channel(None);
        // An evicted pass kills the process like `kill`.
        let kill = match pass.as_ref().and_then(crate::gate::Pass::evicted) {
            Some(evicted) => evicted.child_token(),
            None => CancellationToken::new(),
        };
        let pass = Arc::new(Mutex::new(pass));
        let watched = Watched {
            child,
            group,
            stderr,
            pass: pass.clone(),
        };
        let waiter =
            tokio::spawn(watch_child(watched, kill.clone(), exit_sender).in_current_span());
        SandboxedProcess {
            pid,
            stdin,
            stdout,
            stderr: stderr_pipe,
            tail,
            exit,
            kill,
            pass,
            waiter: Some(waiter),
        }
    }
}

/// How the main process ended: `None` while it runs, `Some(None)` when
/// waiting for it failed.
type Exit = Option<Option<ExitStatus>>;

/// A process started by [`Sandbox::spawn`]. Dropping it kills the process, its
/// process group and its cgroup.
pub struct SandboxedProcess {
    pid: Option<u32>,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    /// Only when the caller reads stderr itself (a background command).
    stderr: Option<ChildStderr>,
    tail: Arc<Mutex<Tail>>,
    exit: watch::Receiver<Exit>,
    kill: CancellationToken,
    pass: SharedPass,
    waiter: Option<JoinHandle<()>>,
}

impl SandboxedProcess {
    /// The host pid of the process (bubblewrap's, when sandboxed).
    pub fn id(&self) -> Option<u32> {
        self.pid
    }

    /// The process's stdin; `None` once taken.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// The process's stdout; `None` once taken.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// The process's stderr when it is not kept as a tail (a shell
    /// started with [`Sandbox::spawn_shell`]); `None` once taken.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.stderr.take()
    }

    /// The process has answered from inside its sandbox: bubblewrap's
    /// set-up is over. A pass held for a pinned start goes now (nothing can
    /// misdirect its mounts any more, and commands that could rename names
    /// in the workspace need not stop it); one held as an unpinned process
    /// stays until it ends.
    pub fn set_up(&self) {
        let mut pass = self.pass.lock().unwrap_or_else(|err| err.into_inner());
        if pass
            .as_ref()
            .is_some_and(|pass| pass.side() == crate::gate::Side::PinnedStart)
        {
            *pass = None;
        }
    }

    /// Kill the process, its process group and its cgroup now; await
    /// [`SandboxedProcess::exited`] to know it is over.
    pub fn kill(&self) {
        self.kill.cancel();
    }

    /// The last [`STDERR_TAIL_BYTES`] of its stderr, decoded lossily.
    pub fn stderr_tail(&self) -> String {
        self.tail.lock().map(|tail| tail.text()).unwrap_or_default()
    }

    /// True once the main process has exited (or been killed).
    pub fn has_exited(&self) -> bool {
        self.exit.borrow().is_some()
    }

    /// How the main process ended; `None` while it runs (or when its status
    /// could not be read).
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.exit.borrow().flatten()
    }

    /// Resolves when the main process has exited.
    pub async fn exited(&self) {
        let mut exit = self.exit.clone();
        // An error means the watcher is gone, which it only is after exiting.
        let _ = exit.wait_for(Option::is_some).await;
    }

    /// Stop it politely: close stdin (if still held here; a caller that took
    /// it must drop it first), give it [`SHUTDOWN_GRACE`] to exit, then kill
    /// everything left, and remove its cgroup.
    pub async fn shutdown(mut self) {
        drop(self.stdin.take());
        if tokio::time::timeout(SHUTDOWN_GRACE, self.exited())
            .await
            .is_err()
        {
            tracing::debug!(
                pid = self.pid,
                "sandboxed process ignored stdin closing; killing it"
            );
        }
        self.kill.cancel();
        if let Some(waiter) = self.waiter.take() {
            // Bounded: a process stuck in uninterruptible sleep keeps its
            // cgroup (and its gate pass, held by the watcher) for as long as
            // it lasts; the caller need not wait for that.
            let _ = tokio::time::timeout(WATCHER_WAIT, waiter).await;
        }
    }
}

impl Drop for SandboxedProcess {
    fn drop(&mut self) {
        // The watcher kills it: it alone knows when nothing of it runs any
        // more, which is when its gate pass may go.
        self.kill.cancel();
    }
}

impl std::fmt::Debug for SandboxedProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxedProcess")
            .field("pid", &self.pid)
            .field("exit", &*self.exit.borrow())
            .finish_non_exhaustive()
    }
}

/// What [`watch_child`] looks after.
struct Watched {
    child: Child,
    group: GroupKiller,
    stderr: Option<JoinHandle<()>>,
    pass: SharedPass,
}

/// A process's gate pass: the watcher drops it at the end, unless
/// [`SandboxedProcess::set_up`] did before.
type SharedPass = Arc<Mutex<Option<crate::gate::Pass>>>;

/// The pass, if still held.
fn take_pass(pass: &SharedPass) -> Option<crate::gate::Pass> {
    pass.lock().unwrap_or_else(|err| err.into_inner()).take()
}

/// Reap the child (killing it first when asked), kill what it left behind,
/// let stderr drain (so the tail is complete once the exit is announced),
/// announce the exit, wait until its cgroup is empty, drop its gate pass,
/// and remove the cgroup.
async fn watch_child(watched: Watched, kill: CancellationToken, exit: watch::Sender<Exit>) {
    let Watched {
        mut child,
        mut group,
        stderr,
        pass,
    } = watched;
    let mut init_watch = crate::group_killer::init_watch();
    let mut watching = true;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            () = kill.cancelled() => {
                // PID 1 first (see `kill_sandbox`); the pass waits below.
                group.kill_sandbox();
                break child.wait().await;
            }
            _ = init_watch.tick(), if watching => watching = !group.watch_init(),
        }
    };
    // Anything left in the group or cgroup would hold the pipes open.
    group.kill();
    if let Err(err) = &status {
        tracing::warn!(%err, "waiting for a sandboxed process failed");
    }
    if let Some(stderr) = stderr {
        let abort = stderr.abort_handle();
        if tokio::time::timeout(STDERR_DRAIN, stderr).await.is_err() {
            abort.abort();
        }
    }
    exit.send_replace(Some(status.ok()));
    // The pass goes only once nothing of it runs.
    group.emptied().await;
    drop(take_pass(&pass));
    group.finish().await;
}

/// A stderr line longer than this is taken in pieces.
const MAX_STDERR_LINE: usize = 16 << 10;

/// Keep the tail of stderr and log it at debug level, line by line with the
/// sandbox's secrets masked (a value split across reads is still whole).
async fn read_stderr(
    mut stderr: impl AsyncRead + Unpin,
    tail: Arc<Mutex<Tail>>,
    pid: Option<u32>,
    mask: crate::SecretMask,
) {
    let mut buffer = vec![0u8; 8192];
    let mut decoder = Utf8Chunker::default();
    let mut line = String::new();
    let record = |text: &str| {
        if let Ok(mut tail) = tail.lock() {
            tail.push(text.as_bytes());
        }
        for line in text.lines() {
            tracing::debug!(pid, line, "sandboxed process stderr");
        }
    };
    loop {
        let read = match stderr.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        line.push_str(&decoder.decode(&buffer[..read]));
        if let Some(end) = line.rfind('\n') {
            let rest = line.split_off(end + 1);
            record(&mask.mask(&line));
            line = rest;
        } else if line.len() > MAX_STDERR_LINE {
            let mut cut = line.len() - mask.hold_back();
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            let (out, used) = mask.mask_until(&line, cut);
            record(&out);
            line.drain(..used);
        }
    }
    record(&mask.mask(&line));
}

/// The most recent [`STDERR_TAIL_BYTES`] bytes of a stream.
#[derive(Debug, Default)]
struct Tail(VecDeque<u8>);

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        let bytes = &bytes[bytes.len().saturating_sub(STDERR_TAIL_BYTES)..];
        let overflow = (self.0.len() + bytes.len()).saturating_sub(STDERR_TAIL_BYTES);
        self.0.drain(..overflow);
        self.0.extend(bytes);
    }

    fn text(&self) -> String {
        let (front, back) = self.0.as_slices();
        let bytes = [front, back].concat();
        // The cut may have split a character: skip its continuation bytes.
        let start = bytes
            .iter()
            .take(3)
            .take_while(|byte| *byte & 0b1100_0000 == 0b1000_0000)
            .count();
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    #[test]
    fn tail_keeps_the_last_bytes() {
        let mut tail = Tail::default();
        tail.push(b"hello ");
        tail.push(&vec![b'x'; STDERR_TAIL_BYTES]);
        tail.push(b"end");
        let text = tail.text();
        assert_eq!(text.len(), STDERR_TAIL_BYTES);
        assert!(text.ends_with("xend") && !text.contains('h'));
        let mut split = Tail::default();
        split.push(&vec![b'a'; STDERR_TAIL_BYTES - 1]);
        split.push("é".as_bytes());
        split.push(b"z");
        assert!(split.text().starts_with('a') && split.text().ends_with('z'));
        let mut cut = Tail::default();
        cut.push(&[&[0xA9][..], b"ok"].concat());
        assert_eq!(cut.text(), "ok");
    }

    fn policy(dir: &tempfile::TempDir) -> Policy {
        Policy::new(dir.path().canonicalize().unwrap())
    }

    fn argv(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| item.to_string()).collect()
    }

    #[tokio::test]
    async fn pipes_reach_a_process_in_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let policy = policy(&dir);
        let script = "echo started >&2; read line; echo \"got $line in $PWD\"; echo bye >&2";
        let mut process = Sandbox
            .spawn(&policy, &argv(&["bash", "-c", script]))
            .await
            .unwrap();
        let mut stdin = process.take_stdin().unwrap();
        let mut stdout = BufReader::new(process.take_stdout().unwrap()).lines();
        stdin.write_all(b"it's \"quoted\" $HOME\n").await.unwrap();
        let line = stdout.next_line().await.unwrap().unwrap();
        assert_eq!(
            line,
            format!(
                "got it's \"quoted\" $HOME in {}",
                policy.workspace.display()
            )
        );
        process.exited().await;
        assert_eq!(process.exit_status().unwrap().code(), Some(0));
        assert!(process.stderr_tail().starts_with("started\n"));
    }

    #[tokio::test]
    async fn shutdown_closes_stdin_then_kills() {
        let dir = tempfile::tempdir().unwrap();
        let polite = Sandbox.spawn(&policy(&dir), &argv(&["cat"])).await.unwrap();
        let started = std::time::Instant::now();
        polite.shutdown().await;
        assert!(started.elapsed() < SHUTDOWN_GRACE);

        let stubborn = Sandbox
            .spawn(
                &policy(&dir),
                &argv(&["bash", "-c", "trap '' HUP; sleep 30"]),
            )
            .await
            .unwrap();
        let started = std::time::Instant::now();
        stubborn.shutdown().await;
        assert!(started.elapsed() >= SHUTDOWN_GRACE);
        assert!(started.elapsed() < SHUTDOWN_GRACE + Duration::from_secs(3));
    }

    #[tokio::test]
    async fn dropping_kills_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let process = Sandbox
            .spawn(&policy(&dir), &argv(&["sleep", "30"]))
            .await
            .unwrap();
        let pid = rustix::process::Pid::from_raw(process.id().unwrap() as i32).unwrap();
        drop(process);
        for _ in 0..200 {
            if rustix::process::test_kill_process(pid).is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("process {pid:?} still alive after drop");
    }

    /// Without a cgroup (no process or memory limit) only the kernel kills
    /// what runs inside once the sandbox's PID 1 dies: the gate pass of an
    /// evicted process must outlast all of it, or a pinned start overlaps a
    /// process that can still rename things in the workspace.
    ///
    /// Rounds of: a long-lived process appends the time to a file in a loop,
    /// a pinned start waits at the gate (stopping it), and when it gets
    /// through nothing of the process is alive and no time written is
    /// later. Under load, as on a busy server, where the kernel's kill lags
    /// most. Two things hold it, each enough without a cgroup: PID 1 is
    /// killed first (`kill_sandbox`), and the pass waits for stderr to drain;
    /// with both undone it fails (ticks 3–7 ms late).
    #[tokio::test]
    async fn an_evicted_process_has_stopped_before_its_pass_goes() {
        let dir = tempfile::tempdir().unwrap();
        let mut policy = policy(&dir);
        policy.limits.processes = None;
        policy.limits.memory_bytes = None;
        let ticks = policy.workspace.join("ticks");
        let marker = format!("evicted-process-{}", std::process::id());
        let script = format!(": {marker}; while :; do echo $EPOCHREALTIME >> ticks; done");
        let _spinners = crate::race_tests::Spinners::start(2);
        let (mut late, mut alive) = (Vec::new(), Vec::new());
        for _ in 0..8 {
            let _ = std::fs::remove_file(&ticks);
            let process = Sandbox
                .spawn(&policy, &argv(&["bash", "-c", &script]))
                .await
                .unwrap();
            let ticker = tokio::spawn(async move { process.exited().await });
            let began = std::time::Instant::now();
            while crate::race_tests::last_tick(&ticks) == 0.0 {
                assert!(began.elapsed() < Duration::from_secs(30), "it never ticked");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let entering =
                crate::gate::enter(&policy.workspace, crate::gate::Side::PinnedStart, false);
            let (pass, waited) = tokio::time::timeout(Duration::from_secs(30), entering)
                .await
                .expect("the evicted process's pass never went");
            let entered = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            assert!(waited, "the sandbox held no pass");
            let left = crate::race_tests::alive_with(&marker);
            if left > 0 {
                alive.push(left);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(pass);
            let last = crate::race_tests::last_tick(&ticks);
            if last > entered {
                late.push(last - entered);
            }
            ticker.await.unwrap();
        }
        assert!(
            late.is_empty() && alive.is_empty(),
            "ran on after the pass went, by (s): {late:?}; processes alive then: {alive:?}"
        );
    }

    #[tokio::test]
    async fn an_empty_argv_or_a_missing_program_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let empty = Sandbox.spawn(&policy(&dir), &[]).await.unwrap_err();
        assert!(matches!(empty, SandboxError::Spawn(_)), "{empty}");
        // bwrap starts, then fails to exec: the process exits non-zero.
        let missing = Sandbox
            .spawn(&policy(&dir), &argv(&["/nonexistent/program"]))
            .await
            .unwrap();
        missing.exited().await;
        assert_ne!(missing.exit_status().unwrap().code(), Some(0));
        assert!(
            missing.stderr_tail().contains("nonexistent"),
            "{}",
            missing.stderr_tail()
        );
    }
}
