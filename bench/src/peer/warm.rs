//! Warm turns in one live session (agentd over HTTP, one warm `claude` process),
//! and warm `claude` processes for the memory comparison.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use agentd_testkit::ServiceStats;
use anyhow::{Context, Result, bail};

use super::activity::{Activity, PerTurn};
use super::client::{Conn, create_session, model_stats, post_message};
use super::processes::{
    claude_command, cpu_of, seed_workspace, session_workspace, start_serve, stop,
};
use super::scenarios::{Ctx, median};

/// Per turn in one live session: medians of wall, host and model server time,
/// and CPU of the host process.
#[derive(Debug, Clone, Default)]
pub struct Warm {
    pub wall: Duration,
    /// Wall − the model server's busy time over the turn.
    pub host: Duration,
    /// The model server's busy time per turn (overlapping requests counted once).
    pub model: Duration,
    /// Requests the model server served per turn (mean).
    pub requests: f64,
    pub cpu: Duration,
    /// CPU of the model server per turn (the same script for both).
    pub model_cpu: Duration,
    pub rss_kib: u64,
    /// Thread switches and read/write calls of the host process per turn.
    pub activity: PerTurn,
}

/// The measured turns of a warm scenario: each turn's wall time and the model
/// server's stats just before and just after it.
#[derive(Default)]
struct Turns {
    walls: Vec<Duration>,
    hosts: Vec<Duration>,
    models: Vec<Duration>,
    requests: u64,
}

impl Turns {
    fn push(&mut self, wall: Duration, before: &ServiceStats, after: &ServiceStats) {
        let model = Duration::from_nanos(after.busy_ns.saturating_sub(before.busy_ns));
        self.walls.push(wall);
        self.hosts.push(wall.saturating_sub(model));
        self.models.push(model);
        self.requests += after.requests.saturating_sub(before.requests);
    }

    fn warm(self, cpu: Duration, model_cpu: Duration, rss_kib: u64, activity: PerTurn) -> Warm {
        let n = self.walls.len().max(1);
        Warm {
            wall: median(self.walls),
            host: median(self.hosts),
            model: median(self.models),
            requests: self.requests as f64 / n as f64,
            cpu,
            model_cpu,
            rss_kib,
            activity,
        }
    }
}

pub async fn warm_agentd(ctx: &Ctx, model_pid: u32, turns: usize) -> Result<Warm> {
    let data = ctx.root.join("agentd-warm");
    std::fs::create_dir_all(&data)?;
    let (server, addr) = start_serve(&ctx.agentd, &data, &ctx.url_rel).await?;
    let outcome = async {
        let pid = server.id();
        let mut conn = Conn::open(&addr).await?;
        let id = create_session(&mut conn).await?;
        seed_workspace(&session_workspace(&data, &id))?;
        let mut events = Conn::open(&addr).await?.events(&id).await?;
        let mut measured = Turns::default();
        let (mut cpu0, mut model0) = (Duration::ZERO, Duration::ZERO);
        let mut activity0 = Activity::default();
        for turn in 0..=turns {
            if turn == 1 {
                (cpu0, model0) = (cpu_of(pid), cpu_of(model_pid));
                activity0 = Activity::of(pid);
            }
            let before = model_stats(&ctx.url_rel).await?;
            let started = Instant::now();
            post_message(&mut conn, &id, &format!("bench turn {turn}")).await?;
            while events.next_event().await?.0 != "turn.finished" {}
            let wall = started.elapsed();
            if turn > 0 {
                measured.push(wall, &before, &model_stats(&ctx.url_rel).await?);
            }
        }
        let n = turns.max(1) as u32;
        let activity = Activity::of(pid).per_turn(&activity0, turns);
        let cpu = cpu_of(pid).saturating_sub(cpu0) / n;
        let model_cpu = cpu_of(model_pid).saturating_sub(model0) / n;
        let edited =
            std::fs::read_to_string(session_workspace(&data, &id).join(super::processes::FILE))?;
        if !edited.contains("counter+") {
            bail!("agentd's turns did not edit the file");
        }
        Ok(measured.warm(cpu, model_cpu, super::processes::rss_kib(pid), activity))
    }
    .await;
    stop(server);
    outcome
}

/// A warm `claude` process speaking stream-json on stdin and stdout.
pub struct ClaudeProc {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl ClaudeProc {
    pub fn start(ctx: &Ctx, home: &Path, cwd: &Path) -> Result<Self> {
        let mut child = claude_command(&ctx.claude, home, &ctx.url_abs, cwd)
            .args([
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--dangerously-skip-permissions",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            child,
            stdin,
            lines,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send one user message and wait for its `result` line.
    pub fn turn(&mut self, text: &str) -> Result<()> {
        let message = serde_json::json!({
            "type": "user",
            "message": {"role": "user", "content": text}
        });
        writeln!(self.stdin, "{message}")?;
        self.stdin.flush()?;
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(120))
                .context("claude: no result within 120 s (or it exited)")?;
            if line.starts_with("{\"type\":\"result\"") {
                if !line.contains("BENCH-DONE") {
                    bail!("claude turn did not finish the script: {line}");
                }
                return Ok(());
            }
        }
    }

    pub fn stop(self) {
        drop(self.stdin);
        stop(self.child);
    }
}

pub async fn warm_claude(ctx: &Ctx, model_pid: u32, turns: usize) -> Result<(Warm, ClaudeProc)> {
    seed_workspace(&ctx.ws)?;
    let mut proc = ClaudeProc::start(ctx, &ctx.root.join("claude-home"), &ctx.ws)?;
    let pid = proc.pid();
    let mut measured = Turns::default();
    let (mut cpu0, mut model0) = (Duration::ZERO, Duration::ZERO);
    let mut activity0 = Activity::default();
    for turn in 0..=turns {
        if turn == 1 {
            (cpu0, model0) = (cpu_of(pid), cpu_of(model_pid));
            activity0 = Activity::of(pid);
        }
        let before = model_stats(&ctx.url_abs).await?;
        let started = Instant::now();
        // Blocks this thread for the turn; nothing else runs meanwhile.
        proc.turn(&format!("bench turn {turn}"))?;
        let wall = started.elapsed();
        if turn > 0 {
            measured.push(wall, &before, &model_stats(&ctx.url_abs).await?);
        }
    }
    let n = turns.max(1) as u32;
    let activity = Activity::of(pid).per_turn(&activity0, turns);
    let warm = measured.warm(
        cpu_of(pid).saturating_sub(cpu0) / n,
        cpu_of(model_pid).saturating_sub(model0) / n,
        tree_rss_kib(pid),
        activity,
    );
    Ok((warm, proc))
}

/// RSS of a process and all its descendants, KiB.
pub fn tree_rss_kib(root: u32) -> u64 {
    let mut parents = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let ppid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')?
                        .1
                        .split_whitespace()
                        .nth(1)?
                        .parse()
                        .ok()
                })
                .unwrap_or(0u32);
            parents.push((pid, ppid));
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    tree.iter().map(|pid| super::processes::rss_kib(*pid)).sum()
}

/// Warm `claude` processes, one per session, each after one turn: RSS of each tree.
pub fn claude_memory(ctx: &Ctx, first: ClaudeProc, count: usize) -> Result<Vec<u64>> {
    let mut procs = vec![first];
    for i in 1..count {
        let home = ctx.root.join(format!("claude-home-{i}"));
        let cwd = ctx.root.join(format!("claude-ws-{i}"));
        std::fs::create_dir_all(&home)?;
        seed_workspace(&cwd)?;
        let mut ctx_ws = ClaudeProc::start(ctx, &home, &cwd)?;
        // Its own workspace: the script's absolute path points at ctx.ws, which
        // is fine (the file is there); the turn makes the process warm.
        ctx_ws.turn("bench turn memory")?;
        procs.push(ctx_ws);
    }
    std::thread::sleep(Duration::from_millis(500));
    let rss = procs.iter().map(|p| tree_rss_kib(p.pid())).collect();
    for p in procs {
        p.stop();
    }
    Ok(rss)
}
