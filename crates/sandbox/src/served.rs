//! The host's side of a serving sandbox (see the `serve` module for the
//! sandbox's): its channel, and a command running in it.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rustix::net::RecvFlags;
use tokio::io::unix::AsyncFd;
use tokio::process::Child;

use crate::launch::spawn_confined;
use crate::policy::Limits;
use crate::run::{GroupKiller, Process};
use crate::running::Running;
use crate::serve::{ANSWER_BYTES, read_answer};
use crate::spare::{self, BindIdentities, Key, Reader, Spare};

/// The host's end of a served sandbox's channel.
pub(crate) struct Channel {
    socket: AsyncFd<OwnedFd>,
    /// The sequence number of the last command sent.
    sent: u32,
    /// Whether the server has answered a command yet.
    answered: bool,
    /// Whether the server's "ready" (sequence 0) has been read.
    ready: bool,
    /// The read ends of the next command's output: the server's shell for it
    /// is started with the write ends before the command comes.
    next_output: Option<(OwnedFd, OwnedFd)>,
}

/// A served command's end, as the server reports it.
pub(crate) struct Answer {
    pub(crate) status: ExitStatus,
    /// The command changed something later commands would inherit from the
    /// server; it has exited.
    pub(crate) retired: bool,
}

impl Channel {
    /// Register `host` (from [`channel`]) with the current Tokio runtime.
    pub(crate) fn new(host: OwnedFd) -> io::Result<Self> {
        rustix::io::ioctl_fionbio(&host, true)?;
        Ok(Self {
            socket: crate::pre_exec::register(host)?,
            sent: 0,
            answered: false,
            ready: false,
            next_output: None,
        })
    }

    /// True until the server has answered a command.
    pub(crate) fn unused(&self) -> bool {
        !self.answered
    }

    /// Hand the server `command` with the write ends of the output pipes
    /// for the command after it; the read ends of this one's. All or
    /// nothing: the channel is empty between commands.
    pub(crate) fn send(&mut self, command: &str) -> io::Result<(Pipe, Pipe)> {
        let Some((stdout, stderr)) = self.next_output.take() else {
            return Err(io::Error::other("a serving sandbox without output pipes"));
        };
        // Nothing may fail once the command is sent: a failed start runs it cold.
        let output = (Pipe::from_owned_fd(stdout)?, Pipe::from_owned_fd(stderr)?);
        let (next_read, [next_stdout, next_stderr]) = output_pipes()?;
        let sequence = self.sent.wrapping_add(1).to_ne_bytes();
        crate::serve::send_with_fds(
            self.socket.get_ref().as_fd(),
            &[
                io::IoSlice::new(&sequence),
                io::IoSlice::new(command.as_bytes()),
            ],
            &[next_stdout.as_fd(), next_stderr.as_fd()],
        )?;
        self.sent = self.sent.wrapping_add(1);
        self.next_output = Some(next_read);
        Ok(output)
    }

    /// The last command's end, once it and everything it started are gone;
    /// `None` when the sandbox ended instead. Cancel-safe.
    pub(crate) async fn answer(&mut self) -> io::Result<Option<Answer>> {
        let mut answer = [0u8; ANSWER_BYTES];
        loop {
            let mut ready = self.socket.readable().await?;
            let received = ready.try_io(|fd| {
                rustix::net::recv(fd.get_ref(), &mut answer, RecvFlags::empty())
                    .map(|(read, _)| read)
                    .map_err(io::Error::from)
            });
            let read = match received {
                Ok(Ok(read)) => read,
                Ok(Err(err)) if err.kind() == io::ErrorKind::ConnectionReset => 0,
                Ok(Err(err)) => return Err(err),
                Err(_would_block) => continue,
            };
            if read == 0 {
                return Ok(None);
            }
            let (sequence, status, retired) = read_answer(&answer);
            if read == ANSWER_BYTES && sequence == 0 && !self.ready {
                self.ready = true;
                continue;
            }
            if read != ANSWER_BYTES || sequence != self.sent {
                return Err(io::Error::other("an answer that is not for this command"));
            }
            self.answered = true;
            return Ok(Some(Answer {
                status: ExitStatus::from_raw(status),
                retired,
            }));
        }
    }
}

/// A command running in a serving sandbox, which goes back to the pool
/// after it unless something went wrong.
pub(crate) struct Served {
    group: GroupKiller,
    child: Child,
    channel: Channel,
    /// What it goes back to the pool under (boxed: it is most of the size).
    place: Box<(Key, BindIdentities)>,
    /// The read ends of the command's output.
    pub(crate) stdout: Option<Pipe>,
    pub(crate) stderr: Option<Pipe>,
    /// Set once the sandbox has ended or must not serve again.
    ended: bool,
    /// Set when we killed it (a timeout, a cancel).
    killed: bool,
}

impl Served {
    /// Hand `command` to the sandbox with two new pipes for its output.
    pub(crate) fn start(
        group: GroupKiller,
        child: Child,
        mut channel: Channel,
        key: Key,
        binds: BindIdentities,
        command: &str,
    ) -> io::Result<Self> {
        let (stdout, stderr) = channel.send(command)?;
        Ok(Self {
            group,
            child,
            channel,
            place: Box::new((key, binds)),
            stdout: Some(stdout),
            stderr: Some(stderr),
            ended: false,
            killed: false,
        })
    }

    /// The command's wait status, once it and everything it started are
    /// gone. An error when the sandbox ended first: whether and how far the
    /// command ran is unknown. Cancel-safe.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        if !self.ended {
            match self.channel.answer().await {
                Ok(Some(answer)) => {
                    STARTS_UNSERVED.store(0, Ordering::Relaxed);
                    self.ended = answer.retired;
                    return Ok(answer.status);
                }
                Ok(None) => {
                    self.ended = true;
                    if self.channel.unused() {
                        ended_unused();
                    }
                }
                Err(err) => {
                    self.kill();
                    return Err(err);
                }
            }
        }
        let status = self.child.wait().await?;
        if self.killed {
            return Ok(status);
        }
        Err(io::Error::other(format!(
            "the sandbox ended while running the command ({status})"
        )))
    }

    /// Kill the whole sandbox (a timeout, a cancel).
    pub(crate) fn kill(&mut self) {
        self.ended = true;
        self.killed = true;
        self.group.kill_sandbox();
    }

    /// Back to the pool when `clean` (the command ended by itself and its
    /// output is drained); else killed, and the command's gate `pass` goes
    /// once nothing of the sandbox runs. True when it went back.
    pub(crate) fn finish(self, clean: bool, pass: Option<crate::gate::Pass>) -> bool {
        let Served {
            group,
            child,
            channel,
            place,
            ended,
            ..
        } = self;
        if !clean || ended {
            // The child (bwrap's monitor) is killed as it drops.
            group.finish_later(pass);
            return false;
        }
        // Its server killed the command's processes before it answered.
        drop(pass);
        let sandbox = Spare {
            group,
            child,
            reader: Reader::Server(channel),
        };
        let (key, binds) = *place;
        spare::give_back(sandbox, key, binds)
    }
}

/// Serving sandboxes found dead before their first command, in a row: where
/// the executable cannot run inside a sandbox (its libraries outside the
/// bound system directories, say), spares fall back to one-shot readers.
static STARTS_UNSERVED: AtomicU64 = AtomicU64::new(0);
const MAX_STARTS_UNSERVED: u64 = 3;

/// The fewest open files a serving sandbox's server works with (its own
/// stdio, channel and executable, a command's two pipes, the next command's
/// two and its shell's stdin), with room.
const MIN_OPEN_FILES: u64 = 16;

/// Whether a spare under `limits` should be a serving sandbox.
pub(crate) fn serving(limits: &Limits) -> bool {
    crate::trampoline::enabled()
        && STARTS_UNSERVED.load(Ordering::Relaxed) < MAX_STARTS_UNSERVED
        && limits.open_files.is_none_or(|n| n >= MIN_OPEN_FILES)
}

/// A serving sandbox was found dead before it took a command.
pub(crate) fn ended_unused() {
    if STARTS_UNSERVED.fetch_add(1, Ordering::Relaxed) + 1 == MAX_STARTS_UNSERVED {
        tracing::warn!(
            "serving sandboxes end before their first command; \
             falling back to one-shot spare sandboxes"
        );
    }
}

/// How long a start waits for a serving sandbox to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Start `command` (from `BwrapSpec::serve`) with a new channel on its stdin.
/// With a gate `pass` (a pinned start), return only once the server inside
/// says it serves (bubblewrap's set-up is over), blocking this thread
/// meanwhile; the pass goes then, or, if the start fails after the spawn,
/// once the killed sandbox has ended (as a dropped command's, `Running`).
pub(crate) fn start_serving(
    command: tokio::process::Command,
    limits: &Limits,
    launch: &crate::command::Launch,
    pass: Option<crate::gate::Pass>,
) -> io::Result<Spare> {
    let (bootstrap_server, bootstrap) = crate::serve::channel()?;
    let (server, host) = crate::serve::channel()?;
    let (child, group) =
        spawn_confined(command, Stdio::from(bootstrap_server), limits, launch, true)
            .map_err(io::Error::other)?;
    match connect(&bootstrap, server, host, pass.is_some()) {
        Ok(channel) => {
            drop(pass);
            Ok(Spare {
                group,
                child,
                reader: Reader::Server(channel),
            })
        }
        Err(err) => {
            drop(Running::new(Process::Child(child, group), pass));
            Err(err)
        }
    }
}

/// Hand the started sandbox its end of the channel (`server`) and, with
/// `wait_ready`, wait until it says it serves.
fn connect(
    bootstrap: &OwnedFd,
    server: OwnedFd,
    host: OwnedFd,
    wait_ready: bool,
) -> io::Result<Channel> {
    // The channel goes over stdin, which bwrap's monitor keeps open outside
    // the sandbox: held by the server alone, the channel ends when it does,
    // and a command for a dead server fails to send (and starts cold). With
    // it, the first command's output pipes.
    let (first_output, [stdout, stderr]) = output_pipes()?;
    crate::serve::send_with_fds(
        bootstrap.as_fd(),
        &[io::IoSlice::new(&0u32.to_ne_bytes())],
        &[server.as_fd(), stdout.as_fd(), stderr.as_fd()],
    )?;
    drop((server, stdout, stderr));
    if wait_ready {
        wait_until_ready(&host)?;
    }
    let mut channel = Channel::new(host)?;
    channel.ready = wait_ready;
    channel.next_output = Some(first_output);
    Ok(channel)
}

/// Block until the server's "ready" arrives on `host` (still blocking).
fn wait_until_ready(host: &OwnedFd) -> io::Result<()> {
    let deadline = std::time::Instant::now() + READY_TIMEOUT;
    let mut answer = [0u8; ANSWER_BYTES];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::Error::other("the sandbox did not start in time"));
        }
        let timeout = rustix::event::Timespec::try_from(left).map_err(io::Error::other)?;
        let mut poll = [rustix::event::PollFd::new(
            host,
            rustix::event::PollFlags::IN,
        )];
        if rustix::event::poll(&mut poll, Some(&timeout))? == 0 {
            continue;
        }
        let (read, _) = rustix::net::recv(host, &mut answer, RecvFlags::empty())?;
        if read == 0 {
            return Err(io::Error::other("the sandbox ended before it was ready"));
        }
        let (sequence, _, _) = read_answer(&answer);
        if read != ANSWER_BYTES || sequence != 0 {
            return Err(io::Error::other(
                "an unexpected first message from the sandbox",
            ));
        }
        return Ok(());
    }
}

/// The read end of a served command's stdout or stderr.
pub(crate) type Pipe = tokio::net::unix::pipe::Receiver;

/// Two pipes for a command's stdout and stderr: their read ends, and the
/// write ends for the sandbox. Ours of the write ends close once sent, so the
/// output ends when the command's copies do.
fn output_pipes() -> io::Result<((OwnedFd, OwnedFd), [OwnedFd; 2])> {
    let pipe = || rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC);
    let (stdout_read, stdout_write) = pipe()?;
    let (stderr_read, stderr_write) = pipe()?;
    Ok(((stdout_read, stderr_read), [stdout_write, stderr_write]))
}
