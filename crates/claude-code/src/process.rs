//! One `claude` CLI process: spawning it, its stdout as JSON lines (with a
//! size cap), its stderr tail, writing user messages and control requests,
//! and stopping it (close stdin, wait, TERM, KILL).

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use crate::ENGINE_MARK;
use tokio::task::JoinHandle;

use super::ClaudeCodeSettings;

/// Longest stdout line accepted (a tool result or a big file can make lines
/// of several MiB; the SDKs' 1 MiB default is too small).
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;
/// Bytes of stderr kept for error messages.
const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// How long a stopped CLI's last stderr lines may take to arrive.
const STDERR_DRAIN: Duration = Duration::from_millis(500);

/// What the CLI printed on stdout.
#[derive(Debug)]
pub enum Line {
    Json(Value),
    /// Not JSON: the protocol is broken, the turn fails.
    NotJson(String),
    /// Longer than [`MAX_LINE_BYTES`].
    TooLong(usize),
    /// stdout closed: the process ended.
    Eof,
}

/// How to start the CLI for one session.
#[derive(Debug, Clone)]
pub struct Launch {
    pub settings: ClaudeCodeSettings,
    pub workspace: PathBuf,
    /// `CLAUDE_CONFIG_DIR`, private to the session.
    pub config_dir: PathBuf,
    /// The `--mcp-config` JSON serving agentd's tools.
    pub mcp_config: Value,
    /// `--resume` this CLI session.
    pub resume: Option<String>,
    pub max_turns: u32,
}

impl Launch {
    pub fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "-p",
            "--bare",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
            // Claude Code's own tools are off: agentd's come over MCP.
            "--tools",
            "",
            "--strict-mcp-config",
            // Settings from agentd's own config dir alone: a workspace's
            // `.claude/settings.json` is the agent's (or anyone's who can
            // write there) and must not configure a CLI run by the server.
            "--setting-sources",
            "user",
            // The CLI lets agentd's tools through; agentd's own permission
            // flow gates each call inside the MCP handler.
            "--allowedTools",
            "mcp__agentd",
            // Anything else the CLI would ask about comes to agentd.
            "--permission-prompt-tool",
            "stdio",
        ]
        .map(String::from)
        .to_vec();
        args.extend(["--model".into(), self.settings.model.clone()]);
        args.extend(["--max-turns".into(), self.max_turns.to_string()]);
        args.extend(["--mcp-config".into(), self.mcp_config.to_string()]);
        if let Some(id) = &self.resume {
            args.extend(["--resume".into(), id.clone()]);
        }
        args
    }
}

/// A running CLI. Dropped without [`Process::stop`] (say, at the end of the
/// server's runtime), it kills its whole process group.
pub struct Process {
    child: Child,
    /// The process group (`process_group(0)`: the CLI's pid), while it may
    /// still have members.
    group: Option<Pid>,
    stdin: Option<ChildStdin>,
    pub lines: mpsc::UnboundedReceiver<Line>,
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<JoinHandle<()>>,
    next_request: u64,
}

/// How a stopped CLI ended.
pub struct Stopped {
    /// `None` if it could not be waited for.
    pub status: Option<ExitStatus>,
    /// The end of what it wrote on stderr, complete up to its exit.
    pub stderr: String,
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            let _ = kill_process_group(group, Signal::KILL);
        }
    }
}

impl Process {
    pub fn spawn(launch: &Launch) -> std::io::Result<Self> {
        let home = launch.config_dir.parent().unwrap_or(&launch.config_dir);
        let mut command = Command::new(&launch.settings.command);
        command
            .args(launch.args())
            .current_dir(&launch.workspace)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("CLAUDE_CONFIG_DIR", &launch.config_dir)
            .env("ANTHROPIC_API_KEY", &launch.settings.api_key)
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            // Root may not skip permission prompts otherwise; agentd's
            // sandbox is what confines the tools.
            .env("IS_SANDBOX", "1")
            // An `agentd claude` found as `claude` refuses to run under it.
            .env(ENGINE_MARK, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        if let Some(lang) = std::env::var_os("LANG") {
            command.env("LANG", lang);
        }
        if let Some(url) = &launch.settings.base_url {
            command.env("ANTHROPIC_BASE_URL", url);
        }
        if launch.settings.backend.is_some() {
            // agentd's endpoint knows only configured model names.
            for var in [
                "ANTHROPIC_SMALL_FAST_MODEL",
                "ANTHROPIC_DEFAULT_HAIKU_MODEL",
            ] {
                command.env(var, &launch.settings.model);
            }
        }
        let mut child = command.spawn()?;
        let stdin = child.stdin.take();
        let (sender, lines) = mpsc::unbounded_channel();
        if let Some(stdout) = child.stdout.take() {
            tokio::spawn(read_lines(stdout, sender));
        }
        let stderr = Arc::new(Mutex::new(String::new()));
        let stderr_reader = child
            .stderr
            .take()
            .map(|err| tokio::spawn(keep_tail(err, stderr.clone())));
        let group = child.id().and_then(|pid| Pid::from_raw(pid as i32));
        Ok(Self {
            child,
            group,
            stdin,
            lines,
            stderr,
            stderr_reader,
            next_request: 0,
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Whether the process has ended.
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    pub async fn write(&mut self, line: &Value) -> std::io::Result<()> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(std::io::Error::other("the CLI's stdin is closed"));
        };
        let mut bytes = serde_json::to_vec(line).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        stdin.write_all(&bytes).await?;
        stdin.flush().await
    }

    /// A user message; `content` is a string or Anthropic content blocks.
    pub async fn send_user(&mut self, content: &Value) -> std::io::Result<()> {
        self.write(&json!({
            "type": "user",
            "message": {"role": "user", "content": content},
            "parent_tool_use_id": null,
            "session_id": "default",
        }))
        .await
    }

    /// Send a control request (`interrupt`, `set_permission_mode`, …); its
    /// `control_response` arrives among the lines.
    pub async fn control(&mut self, request: Value) -> std::io::Result<String> {
        self.next_request += 1;
        let id = format!("agentd-{}", self.next_request);
        self.write(&json!({"type": "control_request", "request_id": id, "request": request}))
            .await?;
        Ok(id)
    }

    /// Stop: close stdin and wait, then TERM the process group, then KILL.
    /// The CLI is reaped (no zombie) and whatever is left of its process
    /// group is killed; then its stderr is read to the end (bounded).
    pub async fn stop(mut self, grace: Duration) -> Stopped {
        drop(self.stdin.take());
        let mut status = self.wait_for(grace).await;
        if status.is_none() {
            self.signal_group(Signal::TERM);
            status = self.wait_for(grace).await;
        }
        if status.is_none() {
            self.signal_group(Signal::KILL);
            let _ = self.child.start_kill();
            status = self.child.wait().await.ok();
        }
        // The CLI is gone; anything it left in its group goes too.
        if let Some(group) = self.group.take() {
            let _ = kill_process_group(group, Signal::KILL);
        }
        if let Some(reader) = self.stderr_reader.take() {
            let _ = tokio::time::timeout(STDERR_DRAIN, reader).await;
        }
        let stderr = self.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        Stopped { status, stderr }
    }

    async fn wait_for(&mut self, grace: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(grace, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    fn signal_group(&self, signal: Signal) {
        if let Some(group) = self.group {
            let _ = kill_process_group(group, signal);
        }
    }
}

async fn read_lines(stdout: impl AsyncRead + Unpin, sender: mpsc::UnboundedSender<Line>) {
    let mut reader = BufReader::with_capacity(256 * 1024, stdout);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let mut too_long = 0usize;
        // Read one line without holding more than the cap in memory.
        loop {
            let Ok(available) = reader.fill_buf().await else {
                let _ = sender.send(Line::Eof);
                return;
            };
            if available.is_empty() {
                if buf.is_empty() && too_long == 0 {
                    let _ = sender.send(Line::Eof);
                    return;
                }
                break;
            }
            let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
                Some(i) => (&available[..i], Some(i + 1)),
                None => (available, None),
            };
            if too_long > 0 || buf.len() + chunk.len() > MAX_LINE_BYTES {
                too_long = too_long.max(buf.len()) + chunk.len();
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
            let used = done.unwrap_or(available.len());
            reader.consume(used);
            if done.is_some() {
                break;
            }
        }
        let line = if too_long > 0 {
            Line::TooLong(too_long)
        } else {
            let text = String::from_utf8_lossy(&buf);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            match serde_json::from_str(text) {
                Ok(value) => Line::Json(value),
                Err(_) => Line::NotJson(text.chars().take(2000).collect()),
            }
        };
        if sender.send(line).is_err() {
            return;
        }
    }
}

async fn keep_tail(stderr: impl AsyncRead + Unpin, tail: Arc<Mutex<String>>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "agentd::claude_code", "claude stderr: {line}");
        if let Ok(mut tail) = tail.lock() {
            tail.push_str(&line);
            tail.push('\n');
            if tail.len() > STDERR_TAIL_BYTES {
                let mut cut = tail.len() - STDERR_TAIL_BYTES;
                while !tail.is_char_boundary(cut) {
                    cut += 1;
                }
                tail.drain(..cut);
            }
        }
    }
}
