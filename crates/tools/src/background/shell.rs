//! One background command: its output since the last read (the newest
//! bytes, capped), its status, and the task that reads its pipes, waits for
//! its end and kills it when asked or when nobody has read it for too long.
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use agentd_sandbox::{SandboxedProcess, SecretMask};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long the pipes may stay open after the command was killed (what
/// escaped the group is in the cgroup and dies too).
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// Where a background command is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellStatus {
    Running,
    /// Exited with code 0.
    Completed,
    /// Exited with another code, by a signal, or waiting for it failed.
    Failed(Option<i32>),
    /// Stopped by `KillShell` or the session's end.
    Killed,
    /// Stopped after nobody read its output for the idle timeout.
    IdleKilled,
}

impl ShellStatus {
    /// The word Claude Code uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed(_) => "failed",
            Self::Killed | Self::IdleKilled => "killed",
        }
    }

    pub fn exit_code(self) -> Option<i32> {
        match self {
            Self::Completed => Some(0),
            Self::Failed(code) => code,
            _ => None,
        }
    }
}

/// Unread bytes of one stream: the newest `cap`, and how many were dropped.
#[derive(Debug, Default)]
pub(crate) struct Unread {
    bytes: Vec<u8>,
    dropped: u64,
}

impl Unread {
    fn push(&mut self, piece: &[u8], cap: usize) {
        self.bytes.extend_from_slice(piece);
        // Trimmed in steps, so each byte is moved a bounded number of times.
        if self.bytes.len() > cap.saturating_mul(2).max(4096) {
            self.trim(cap);
        }
    }

    fn trim(&mut self, cap: usize) {
        let excess = self.bytes.len().saturating_sub(cap);
        self.bytes.drain(..excess);
        self.dropped += excess as u64;
    }

    /// Everything unread, as text, and how many bytes were dropped before
    /// it; an unfinished character at the end stays for the next read
    /// unless the stream is over.
    pub(crate) fn take(&mut self, cap: usize, over: bool) -> (String, u64) {
        self.trim(cap);
        let keep = if over {
            0
        } else {
            unfinished_tail(&self.bytes)
        };
        let rest = self.bytes.split_off(self.bytes.len() - keep);
        let bytes = std::mem::replace(&mut self.bytes, rest);
        // A cut at the front may have split a character: skip its rest.
        let start = if self.dropped > 0 {
            bytes
                .iter()
                .take(3)
                .take_while(|byte| *byte & 0b1100_0000 == 0b1000_0000)
                .count()
        } else {
            0
        };
        let text = String::from_utf8_lossy(&bytes[start..]).into_owned();
        (text, std::mem::take(&mut self.dropped))
    }
}

/// [`Unread::take`] with the secrets masked. While the command runs, the
/// end that could be the start of a secret stays for the next read, so a
/// value split across two reads is still masked whole.
fn take_masked(unread: &mut Unread, cap: usize, mask: &SecretMask, over: bool) -> (String, u64) {
    let (text, dropped) = unread.take(cap, over);
    if over || mask.is_empty() {
        return (mask.mask(&text), dropped);
    }
    let mut cut = text.len().saturating_sub(mask.hold_back());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let (out, used) = mask.mask_until(&text, cut);
    unread
        .bytes
        .splice(0..0, text.as_bytes()[used..].iter().copied());
    (out, dropped)
}

/// How many bytes at the end start a character that is not complete yet.
fn unfinished_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        if byte & 0b1100_0000 == 0b1000_0000 {
            continue;
        }
        let needed = match byte {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if back < needed { back } else { 0 };
    }
    0
}

/// What a read returns.
#[derive(Debug)]
pub(crate) struct Output {
    pub status: ShellStatus,
    pub stdout: String,
    pub stdout_dropped: u64,
    pub stderr: String,
    pub stderr_dropped: u64,
}

#[derive(Debug)]
struct State {
    stdout: Unread,
    stderr: Unread,
    status: ShellStatus,
    last_read: Instant,
}

/// A background command, shared by the registry and its supervising task.
#[derive(Debug)]
pub(crate) struct Shell {
    pub id: String,
    pub command: String,
    pub started_at: SystemTime,
    cap: usize,
    /// The sandbox's secrets, masked in what a read returns.
    mask: SecretMask,
    state: Mutex<State>,
    kill: CancellationToken,
    ended: watch::Sender<bool>,
}

impl Shell {
    /// Start supervising `process` (on the current Tokio runtime).
    pub(crate) fn start(
        id: String,
        command: String,
        process: SandboxedProcess,
        cap: usize,
        idle: Duration,
        mask: SecretMask,
    ) -> Arc<Self> {
        let shell = Arc::new(Self {
            id,
            command,
            started_at: SystemTime::now(),
            cap,
            mask,
            state: Mutex::new(State {
                stdout: Unread::default(),
                stderr: Unread::default(),
                status: ShellStatus::Running,
                last_read: Instant::now(),
            }),
            kill: CancellationToken::new(),
            ended: watch::channel(false).0,
        });
        tokio::spawn(supervise(shell.clone(), process, idle));
        shell
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn status(&self) -> ShellStatus {
        self.state().status
    }

    /// The output since the last read, and the status. Output read after
    /// the status says it ended is all there will be.
    pub(crate) fn read(&self) -> Output {
        let mut state = self.state();
        state.last_read = Instant::now();
        let over = state.status != ShellStatus::Running;
        let (stdout, stdout_dropped) = take_masked(&mut state.stdout, self.cap, &self.mask, over);
        let (stderr, stderr_dropped) = take_masked(&mut state.stderr, self.cap, &self.mask, over);
        Output {
            status: state.status,
            stdout,
            stdout_dropped,
            stderr,
            stderr_dropped,
        }
    }

    /// Kill it (its group and cgroup) and wait until it is over.
    pub(crate) async fn kill(&self) {
        self.kill.cancel();
        self.ended().await;
    }

    pub(crate) async fn ended(&self) {
        let mut ended = self.ended.subscribe();
        // An error means the sender is gone, which it is not while `self` is.
        let _ = ended.wait_for(|ended| *ended).await;
    }

    fn push(&self, stderr: bool, bytes: &[u8]) {
        let mut state = self.state();
        let unread = if stderr {
            &mut state.stderr
        } else {
            &mut state.stdout
        };
        unread.push(bytes, self.cap);
    }

    /// When the idle timeout runs out, counted from the last read.
    fn idle_deadline(&self, idle: Duration) -> Instant {
        self.state().last_read + idle
    }
}

/// Why supervision stopped waiting.
enum Ending {
    Exited,
    Killed,
    Idle,
}

/// Read the pipes into the shell until the command ends; kill it when
/// asked or idle for too long; then record how it ended.
async fn supervise(shell: Arc<Shell>, mut process: SandboxedProcess, idle: Duration) {
    let stdout = process.take_stdout();
    let stderr = process.take_stderr();
    let pumps = async {
        tokio::join!(pump(stdout, &shell, false), pump(stderr, &shell, true));
    };
    tokio::pin!(pumps);
    let mut pipes_closed = false;
    let ending = loop {
        let deadline = shell.idle_deadline(idle);
        tokio::select! {
            () = process.exited() => break Ending::Exited,
            () = &mut pumps, if !pipes_closed => pipes_closed = true,
            () = shell.kill.cancelled() => break Ending::Killed,
            () = tokio::time::sleep_until(deadline) => {
                if shell.idle_deadline(idle) <= Instant::now() {
                    break Ending::Idle;
                }
            }
        }
    };
    if !matches!(ending, Ending::Exited) {
        process.kill();
        process.exited().await;
    }
    if !pipes_closed && tokio::time::timeout(DRAIN_GRACE, &mut pumps).await.is_err() {
        tracing::debug!(shell = %shell.id, "background output pipes still open; abandoning them");
    }
    let status = match ending {
        Ending::Killed => ShellStatus::Killed,
        Ending::Idle => ShellStatus::IdleKilled,
        Ending::Exited => match process.exit_status().map(|status| status.code()) {
            Some(Some(0)) => ShellStatus::Completed,
            Some(code) => ShellStatus::Failed(code),
            None => ShellStatus::Failed(None),
        },
    };
    shell.state().status = status;
    shell.ended.send_replace(true);
    tracing::debug!(shell = %shell.id, status = status.as_str(), "background command ended");
}

async fn pump(reader: Option<impl AsyncRead + Unpin>, shell: &Shell, stderr: bool) {
    let Some(mut reader) = reader else {
        return;
    };
    let mut buffer = vec![0u8; 8192];
    loop {
        match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => shell.push(stderr, &buffer[..read]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_split_across_reads_is_masked_whole() {
        let mask = SecretMask::new([("TOKEN", "s3cr3t-value")]);
        let mut unread = Unread::default();
        unread.push(b"token: s3cr", 1000);
        let first = take_masked(&mut unread, 1000, &mask, false).0;
        unread.push(b"3t-value done\n", 1000);
        let second = take_masked(&mut unread, 1000, &mask, true).0;
        assert_eq!(format!("{first}{second}"), "token: [secret TOKEN] done\n");
        assert!(!first.contains("s3cr"), "{first}");
    }

    #[test]
    fn unread_keeps_the_newest_bytes_and_counts_the_rest() {
        let mut unread = Unread::default();
        unread.push(b"0123456789", 4);
        assert_eq!(unread.take(4, false), ("6789".to_string(), 6));
        assert_eq!(unread.take(4, false), (String::new(), 0));
        unread.push(b"ab", 4);
        assert_eq!(unread.take(4, false), ("ab".to_string(), 0));
    }

    #[test]
    fn an_unfinished_character_waits_for_its_rest() {
        let mut unread = Unread::default();
        let euro = "€".as_bytes();
        unread.push(&[b'a', euro[0], euro[1]], 100);
        assert_eq!(unread.take(100, false).0, "a");
        unread.push(&euro[2..], 100);
        assert_eq!(unread.take(100, false).0, "€");
        unread.push(&euro[..1], 100);
        assert_eq!(unread.take(100, true).0, "\u{fffd}");
    }
}
