//! A sandbox that serves a session's commands one after another.
//!
//! A one-shot spare costs a whole bubblewrap start (namespaces, mounts, ~8 ms
//! of CPU with the trampoline and the reader shell) per command, and its
//! teardown sits on the command's path. When the trampoline is enabled, a spare
//! runs this server instead, as the sandbox's PID 1 (`bwrap --as-pid-1 …
//! /proc/self/fd/3 __sandbox-serve`: the trampoline's own executable, handed in by
//! the trampoline, so nothing is bound into the sandbox's file system).
//!
//! It reads commands from a `SOCK_SEQPACKET` socket that comes first over its
//! stdin (which bubblewrap's monitor, outside, also holds; the socket only the
//! server holds, so the host's end sees the server's end), one message each:
//! a sequence number and the command's text, with the stdout and stderr pipes
//! of the command after it attached (`SCM_RIGHTS`; the first command's come
//! with the channel). Its shell is started before the command comes, with
//! those pipes, and waits for the text on its stdin ([`WAITING_SHELL`]): a
//! command does not wait for bash's `exec` and start-up, ~3 ms on a small
//! virtual machine. The shell then runs the text as `bash -c` would, with stdin
//! on /dev/null, as a cold sandbox does; a command too long for the waiting
//! shell to read quickly, or one it could not hold, gets a `bash -c <command>`
//! of its own. The server reaps orphans as they come. Once bash
//! has exited it kills every other process in the sandbox (`kill(-1)` from a
//! PID namespace's init reaches all of the namespace but itself), reaps them,
//! and only then answers with the sequence number and bash's wait status: when
//! the answer comes, nothing of the command is left. Being PID 1, it is the
//! only process in the sandbox holding the socket, it ignores signals sent from
//! inside, and it is not dumpable, so no command can take the socket
//! (`pidfd_getfd`) or stop it; the sequence number catches any answer that is
//! not for the command just sent.
//!
//! A command can change the server's own settings that later commands would
//! inherit (rlimits, CPU affinity, nice value, scheduling, I/O priority, OOM
//! score adjustment: a process of the same uid needs no capability for that);
//! the server compares them after each command and, when one changed, says so
//! in its answer and exits, so the sandbox is not used again.
//!
//! What a command sees that a fresh sandbox would not: its `$$` and `$PPID`
//! (2, 3, … under this server rather than 2 under bubblewrap's init), its
//! shell's command line (`/proc/$$/cmdline`: the waiting shell's), a syntax
//! error reported as `bash: eval: line N: …` rather than `bash: -c: line N: …`,
//! a fork before an external program that `bash -c` would have `exec`ed (so
//! bash reports that program's death by a signal on stderr, as in a script), and
//! what earlier commands of the same sandbox left in its private `/tmp`,
//! `/dev/shm`, System V IPC objects and user keyring (a session's own scratch
//! space, kept as long as the sandbox, and counted in its cgroup's memory).

use std::ffi::OsStr;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::process::Stdio;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

/// The argument that makes the executable a serving sandbox init; the
/// host's PID namespace (`/proc/self/ns/pid`'s inode) follows it.
pub(crate) const SERVE: &str = "__sandbox-serve";

/// Where the trampoline puts its own executable for bubblewrap to run.
pub(crate) const SELF_FD: i32 = 3;

/// The longest command a served sandbox takes; longer ones start cold.
pub(crate) const MAX_COMMAND_BYTES: usize = 64 * 1024;

/// A command message: sequence number, then the text.
pub(crate) const HEADER_BYTES: usize = 4;

/// What a command's shell runs, started before its command: the text from
/// stdin into `BASH_EXECUTION_STRING` (where `bash -c` keeps it), `$SECONDS`
/// from zero again, stdin then
/// on /dev/null opened for reading (as `Stdio::null` opens a stdin), `$_` set as
/// `bash -c` leaves it, and the text run by `eval`. Compared with `bash -c`
/// by the `served` tests' probe. Spares (this server among them) exist only
/// for policies whose variables do not act on a shell's start
/// (`spare::reader_is_transparent`: `BASH_ENV`, `SHELLOPTS`, `TMOUT`, …).
const WAITING_SHELL: &str = r#"IFS= read -r -d "" BASH_EXECUTION_STRING; SECONDS=0; exec </dev/null; : bash; eval "$BASH_EXECUTION_STRING""#;

/// The longest command the waiting shell is given: bash reads a pipe a byte
/// at a time (~0.5 µs each on a small virtual machine), so a longer one gets
/// a shell of its own, started with the text as its argument.
const WAITING_SHELL_MAX_BYTES: usize = 2048;

/// An answer: the command's sequence number, its wait status, and whether
/// the server retires ([`answer`], [`read_answer`]).
pub(crate) const ANSWER_BYTES: usize = HEADER_BYTES + 4 + 1;

/// The answer to command `sequence`.
pub(crate) fn answer(
    sequence: [u8; HEADER_BYTES],
    status: i32,
    retire: bool,
) -> [u8; ANSWER_BYTES] {
    let mut answer = [0u8; ANSWER_BYTES];
    answer[..HEADER_BYTES].copy_from_slice(&sequence);
    answer[HEADER_BYTES..ANSWER_BYTES - 1].copy_from_slice(&status.to_ne_bytes());
    answer[ANSWER_BYTES - 1] = u8::from(retire);
    answer
}

/// An [`answer`]'s sequence number, status and retire flag.
pub(crate) fn read_answer(answer: &[u8; ANSWER_BYTES]) -> (u32, i32, bool) {
    let field = |from: usize| {
        let mut bytes = [0u8; 4];
        bytes.copy_from_slice(&answer[from..from + 4]);
        bytes
    };
    (
        u32::from_ne_bytes(field(0)),
        i32::from_ne_bytes(field(HEADER_BYTES)),
        answer[ANSWER_BYTES - 1] != 0,
    )
}

/// The server's end and the host's end of a new command channel.
pub(crate) fn channel() -> io::Result<(OwnedFd, OwnedFd)> {
    let (server, host) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    // A message must fit the send buffer whole (a host may set a small default).
    let needed = 2 * (HEADER_BYTES + MAX_COMMAND_BYTES);
    if rustix::net::sockopt::socket_send_buffer_size(&host)? < needed {
        rustix::net::sockopt::set_socket_send_buffer_size(&host, needed)?;
    }
    Ok((server, host))
}

/// The identity of this process's PID namespace.
pub(crate) fn pid_namespace() -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata("/proc/self/ns/pid")?.ino())
}

/// [`pid_namespace`] of the host server, looked up once.
pub(crate) fn host_pid_namespace() -> Option<u64> {
    static HOST: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *HOST.get_or_init(|| pid_namespace().ok())
}

/// Runs commands until the host closes the channel; never returns.
pub(crate) fn serve() -> ! {
    match serve_commands() {
        Ok(()) => std::process::exit(0),
        Err(err) => {
            eprintln!("agentd: the sandbox stopped serving: {err}");
            std::process::exit(1)
        }
    }
}

fn serve_commands() -> io::Result<()> {
    // Killing "everything but us" is only safe as the init of a PID namespace
    // other than the host server's: anywhere else it would reach the host.
    let pid = rustix::process::getpid().as_raw_nonzero().get();
    let parent = rustix::process::getppid();
    let host: Option<u64> = std::env::args().nth(2).and_then(|arg| arg.parse().ok());
    if pid != 1 || parent.is_some() || host.is_none() || host == pid_namespace().ok() {
        return Err(io::Error::other(format!(
            "not the init of a sandbox's own PID namespace (pid {pid})"
        )));
    }
    // Our own executable (fd 3) and anything else inherited stays out of commands.
    crate::pre_exec::close_inherited_fds()?;
    // Not dumpable: a command (same uid, no capabilities) can then neither
    // ptrace us nor take our channel with pidfd_getfd to answer for us.
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    rustix::thread::set_name(c"agentd-sandbox")?;
    // The channel comes over stdin, which bubblewrap's monitor (outside)
    // holds too; the channel itself only we hold, so the host sees our end.
    // With it, the first command's output pipes.
    let Some((_, [channel, stdout, stderr])) =
        receive::<3>(std::io::stdin().as_fd(), &mut [0; HEADER_BYTES])?
    else {
        return Ok(());
    };
    let channel = channel.as_fd();
    // Sequence 0: set up and serving. Sent only now, from inside: the host
    // knows bubblewrap has finished its mounts (the `gate` module).
    rustix::net::send(
        channel,
        &answer(0u32.to_ne_bytes(), 0, false),
        rustix::net::SendFlags::empty(),
    )?;
    let inherited = Inherited::now();
    let mut next = NextShell::start(stdout, stderr);
    let mut message = vec![0u8; HEADER_BYTES + MAX_COMMAND_BYTES];
    loop {
        let Some((len, [stdout, stderr])) = receive::<2>(channel, &mut message)? else {
            return Ok(());
        };
        let status = next.run(&message[HEADER_BYTES..len])?;
        // Nothing of the command may outlive it.
        crate::pre_exec::kill_all_others();
        while wait_any()?.is_some() {}
        // A command changed what the next one would inherit from us: this
        // sandbox serves no more.
        let retire = Inherited::now() != inherited;
        let mut sequence = [0u8; HEADER_BYTES];
        sequence.copy_from_slice(&message[..HEADER_BYTES]);
        rustix::net::send(
            channel,
            &answer(sequence, status, retire),
            SendFlags::empty(),
        )?;
        if retire {
            return Ok(());
        }
        // Only now: the clean-up above would have killed it.
        next = NextShell::start(stdout, stderr);
    }
}

/// The next command's output pipes, and its shell waiting for it unless
/// that failed to start.
struct NextShell {
    waiting: Option<std::process::Child>,
    stdout: OwnedFd,
    stderr: OwnedFd,
}

impl NextShell {
    fn start(stdout: OwnedFd, stderr: OwnedFd) -> Self {
        let waiting = Self::spawn_waiting(&stdout, &stderr).ok();
        Self {
            waiting,
            stdout,
            stderr,
        }
    }

    fn spawn_waiting(stdout: &OwnedFd, stderr: &OwnedFd) -> io::Result<std::process::Child> {
        std::process::Command::new("bash")
            .arg("-c")
            .arg(WAITING_SHELL)
            .stdin(Stdio::piped())
            .stdout(stdout.try_clone()?)
            .stderr(stderr.try_clone()?)
            .spawn()
    }

    /// Run `command`; its shell's wait status once the shell has ended.
    fn run(self, command: &[u8]) -> io::Result<i32> {
        let Self {
            waiting,
            stdout,
            stderr,
        } = self;
        // A NUL cannot reach the waiting shell whole; `bash -c` refuses it.
        let fits = command.len() <= WAITING_SHELL_MAX_BYTES && !command.contains(&0);
        // One that died waiting (killed for memory, say) is not the command's.
        let waiting = waiting.and_then(|mut shell| match shell.try_wait() {
            Ok(None) => Some(shell),
            Ok(Some(_)) => None,
            Err(_) => {
                let _ = shell.kill();
                None
            }
        });
        let shell = match waiting {
            Some(mut shell) if fits => {
                // Our copies of the pipes go now: their end is the output's end.
                drop((stdout, stderr));
                if let Some(mut stdin) = shell.stdin.take() {
                    // A shell that died waiting answers with its own status.
                    let _ = std::io::Write::write_all(&mut stdin, command);
                }
                Ok(shell)
            }
            waiting => {
                if let Some(mut unused) = waiting {
                    // Reaped with the command's orphans.
                    let _ = unused.kill();
                }
                std::process::Command::new("bash")
                    .arg("-c")
                    .arg(OsStr::from_bytes(command))
                    .stdin(Stdio::null())
                    .stdout(stdout)
                    .stderr(stderr)
                    .spawn()
            }
        };
        Ok(match shell {
            Ok(shell) => wait_for(shell.id())?,
            // As bash reports a program it cannot run.
            Err(_) => 127 << 8,
        })
    }
}

/// What a process of the sandbox's uid can change about the server (no
/// capability needed) and every later command would inherit: rlimits, CPU
/// affinity, nice value, scheduling, I/O priority, OOM score adjustment.
#[derive(PartialEq)]
struct Inherited {
    limits: Vec<rustix::process::Rlimit>,
    affinity: Option<rustix::thread::CpuSet>,
    nice: Option<i32>,
    scheduling: [i32; 3],
    oom_score_adj: Option<String>,
}

impl Inherited {
    fn now() -> Self {
        use rustix::process::Resource;
        let resources = [
            Resource::Cpu,
            Resource::Fsize,
            Resource::Data,
            Resource::Stack,
            Resource::Core,
            Resource::Rss,
            Resource::Nproc,
            Resource::Nofile,
            Resource::Memlock,
            Resource::As,
            Resource::Locks,
            Resource::Sigpending,
            Resource::Msgqueue,
            Resource::Nice,
            Resource::Rtprio,
            Resource::Rttime,
        ];
        Self {
            limits: resources.map(rustix::process::getrlimit).to_vec(),
            affinity: rustix::thread::sched_getaffinity(None).ok(),
            nice: rustix::process::getpriority_process(None).ok(),
            scheduling: crate::pre_exec::scheduling(),
            oom_score_adj: std::fs::read_to_string("/proc/self/oom_score_adj").ok(),
        }
    }
}

/// Reap children (orphans of the command come to us, PID 1) until `pid`
/// ends; its wait status, a signal's death as bubblewrap reports it (128 + n).
fn wait_for(pid: u32) -> io::Result<i32> {
    loop {
        let Some((reaped, status)) = wait_any()? else {
            return Err(io::Error::other("the command's shell vanished"));
        };
        if reaped.as_raw_nonzero().get().cast_unsigned() != pid {
            continue;
        }
        return Ok(match status.terminating_signal() {
            Some(signal) => (128 + signal) << 8,
            None => status.as_raw(),
        });
    }
}

/// The next child to end; `None` when there is none left.
fn wait_any() -> io::Result<Option<(rustix::process::Pid, rustix::process::WaitStatus)>> {
    use rustix::io::Errno;
    loop {
        match rustix::process::wait(rustix::process::WaitOptions::empty()) {
            Ok(found) => return Ok(found),
            Err(Errno::INTR) => {}
            Err(Errno::CHILD) => return Ok(None),
            Err(err) => return Err(err.into()),
        }
    }
}

/// The next message's length and its `N` descriptors (a command's: the
/// next command's pipes); `None` once the host is gone.
fn receive<const N: usize>(
    channel: BorrowedFd<'_>,
    buffer: &mut [u8],
) -> io::Result<Option<(usize, [OwnedFd; N])>> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let message = rustix::net::recvmsg(
        channel,
        &mut [io::IoSliceMut::new(buffer)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for part in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = part {
            fds.extend(received);
        }
    }
    if message.bytes == 0 && fds.is_empty() {
        return Ok(None);
    }
    if message.flags.contains(rustix::net::ReturnFlags::CTRUNC) {
        return Err(io::Error::other(
            "a message's descriptors did not fit (too few allowed?)",
        ));
    }
    if message.flags.contains(rustix::net::ReturnFlags::TRUNC) {
        return Err(io::Error::other("a command longer than the limit"));
    }
    if message.bytes < HEADER_BYTES {
        return Err(io::Error::other("a message without its sequence number"));
    }
    let fds: [OwnedFd; N] = fds
        .try_into()
        .map_err(|_| io::Error::other(format!("a message without its {N} descriptors")))?;
    Ok(Some((message.bytes, fds)))
}

/// Send `parts` with `fds` attached, as one message.
pub(crate) fn send_with_fds(
    socket: BorrowedFd<'_>,
    parts: &[io::IoSlice<'_>],
    fds: &[BorrowedFd<'_>],
) -> io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("no room for the descriptors"));
    }
    let sent = rustix::net::sendmsg(socket, parts, &mut control, SendFlags::NOSIGNAL)?;
    if sent != parts.iter().map(|part| part.len()).sum::<usize>() {
        return Err(io::Error::other("a message went out short"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_reads_back_as_written() {
        for (sequence, status, retire) in
            [(1u32, 0, false), (u32::MAX, 139 << 8, true), (7, -1, false)]
        {
            let written = answer(sequence.to_ne_bytes(), status, retire);
            assert_eq!(read_answer(&written), (sequence, status, retire));
        }
    }
}
