//! SSE load on `agentd serve`: (1) N sessions, each with one idle event stream
//! held open, and the server's RSS per idle stream; (2) events/s and
//! append-to-delivery latency of turns streamed to live clients.
//!
//!     sse [--agentd PATH] [--streams N] [--parallel P] [--clients K] [--calls C]
//!
//! Plain HTTP/1.1 over tokio sockets, so the client costs little next to the
//! server (both share this machine). Run through `bench/sse.sh`, which raises
//! the open-file limit.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentd_protocol::EventEnvelope;
use anyhow::{Context, Result, bail};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

struct Args {
    agentd: PathBuf,
    streams: usize,
    parallel: usize,
    clients: usize,
    calls: u32,
}

fn args() -> Result<Args> {
    let mut args = Args {
        agentd: PathBuf::from("target/release/agentd"),
        streams: 10_000,
        parallel: 4,
        clients: 4,
        calls: 10,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--agentd" => args.agentd = value.into(),
            "--streams" => args.streams = value.parse()?,
            "--parallel" => args.parallel = value.parse()?,
            "--clients" => args.clients = value.parse()?,
            "--calls" => args.calls = value.parse()?,
            _ => bail!("unknown flag {flag}"),
        }
    }
    Ok(args)
}

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    reader: BufReader<TcpStream>,
    addr: String,
}

impl Conn {
    async fn open(addr: &str) -> Result<Self> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        Ok(Self {
            reader: BufReader::new(tcp),
            addr: addr.to_string(),
        })
    }

    async fn send_head(&mut self, method: &str, path: &str, body: &str, extra: &str) -> Result<()> {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n{extra}\r\n{body}",
            self.addr,
            body.len()
        );
        self.reader.get_mut().write_all(head.as_bytes()).await?;
        Ok(())
    }

    /// Status and headers (lower-cased names).
    async fn read_head(&mut self) -> Result<(u16, Vec<(String, String)>)> {
        let mut line = String::new();
        self.reader.read_line(&mut line).await?;
        let status = line
            .split_whitespace()
            .nth(1)
            .context("no status line")?
            .parse()?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            if self.reader.read_line(&mut line).await? == 0 {
                bail!("connection closed in headers");
            }
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                return Ok((status, headers));
            }
            if let Some((name, value)) = trimmed.split_once(':') {
                headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
            }
        }
    }

    async fn request(&mut self, method: &str, path: &str, body: &str) -> Result<(u16, String)> {
        self.send_head(method, path, body, "").await?;
        let (status, headers) = self.read_head().await?;
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map(|(_, v)| v.parse())
            .transpose()?
            .unwrap_or(0);
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).await?;
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// Start an event stream; the connection then carries only it.
    async fn events(mut self, session: &str) -> Result<Self> {
        let path = format!("/v1/sessions/{session}/events");
        self.send_head("GET", &path, "", "").await?;
        let (status, _) = self.read_head().await?;
        if status != 200 {
            bail!("events: HTTP {status}");
        }
        Ok(self)
    }

    /// The next chunk of a chunked body (`None` at its end).
    async fn chunk(&mut self) -> Result<Option<Vec<u8>>> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)?;
        let mut data = vec![0; size + 2];
        self.reader.read_exact(&mut data).await?;
        data.truncate(size);
        Ok((size > 0).then_some(data))
    }
}

fn session_id(body: &str) -> Result<String> {
    let value: serde_json::Value = serde_json::from_str(body)?;
    Ok(value["id"].as_str().context("no id")?.to_string())
}

fn rss_kib(pid: u32) -> u64 {
    proc_field(pid, "status", |s| {
        s.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    })
}

/// User + system CPU time of the process, in clock ticks (1/100 s).
fn cpu_ticks(pid: u32) -> u64 {
    proc_field(pid, "stat", |s| {
        let after = s.rsplit_once(')')?.1;
        let fields: Vec<&str> = after.split_whitespace().collect();
        Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
    })
}

fn proc_field(pid: u32, file: &str, get: impl Fn(&str) -> Option<u64>) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .ok()
        .and_then(|s| get(&s))
        .unwrap_or(0)
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(f64::NAN)
}

async fn start_server(agentd: &Path, data: &Path) -> Result<(Child, String)> {
    let mut child = Command::new(agentd)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", data)
        .env("AGENTD_DATA_DIR", data)
        .env("AGENTD_CONFIG", data.join("agentd.toml"))
        .env("AGENTD_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", agentd.display()))?;
    let mut lines = BufReader::new(child.stdout.take().context("no stdout")?).lines();
    let line = lines
        .next_line()
        .await?
        .context("agentd serve printed nothing")?;
    let url = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .context("no URL")?
        .to_string();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, url))
}

/// Create `n` sessions over `conns` connections.
async fn create_sessions(addr: &str, n: usize, conns: usize) -> Result<Vec<String>> {
    let mut tasks = Vec::new();
    for c in 0..conns {
        let addr = addr.to_string();
        let count = n / conns + usize::from(c < n % conns);
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(&addr).await?;
            let mut ids = Vec::with_capacity(count);
            for _ in 0..count {
                let (status, body) = conn.request("POST", "/v1/sessions", "{}").await?;
                if status != 201 {
                    bail!("create: HTTP {status} {body}");
                }
                ids.push(session_id(&body)?);
            }
            Ok(ids)
        }));
    }
    let mut ids = Vec::with_capacity(n);
    for task in tasks {
        ids.extend(task.await??);
    }
    Ok(ids)
}

async fn metrics(addr: &str) -> Result<String> {
    Ok(Conn::open(addr)
        .await?
        .request("GET", "/metrics", "")
        .await?
        .1)
}

async fn idle_streams(addr: &str, pid: u32, n: usize) -> Result<()> {
    println!("## idle streams: {n} sessions, one open SSE stream each");
    let base = rss_kib(pid);
    let started = Instant::now();
    let ids = create_sessions(addr, n, 8).await?;
    let rows = rss_kib(pid);
    println!(
        "created {n} sessions in {:.1} s; RSS {base} KiB -> {rows} KiB",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let mut streams = Vec::with_capacity(n);
    for chunk in ids.chunks(256) {
        let opening = chunk.iter().map(|id| {
            let addr = addr.to_string();
            let id = id.clone();
            tokio::spawn(async move { Conn::open(&addr).await?.events(&id).await })
        });
        for task in opening.collect::<Vec<_>>() {
            streams.push(task.await??);
        }
    }
    println!(
        "opened {} streams in {:.1} s",
        streams.len(),
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held = rss_kib(pid);
    let text = metrics(addr).await?;
    println!(
        "server: sse_clients {} sessions_live {}",
        metric(&text, "agentd_sse_clients"),
        metric(&text, "agentd_sessions_live")
    );
    let per = (held.saturating_sub(rows)) as f64 / n as f64;
    println!(
        "RSS with streams {held} KiB: {per:.1} KiB per idle stream (session entry + connection)"
    );

    // Heartbeats reach every stream; the server's CPU meanwhile.
    let cpu0 = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_secs(16)).await;
    let cpu = (cpu_ticks(pid) - cpu0) as f64 / 100.0;
    let mut beats = 0;
    for stream in &mut streams {
        if let Ok(Ok(Some(_))) =
            tokio::time::timeout(Duration::from_millis(50), stream.chunk()).await
        {
            beats += 1;
        }
    }
    println!("heartbeat seen on {beats}/{n} streams; server CPU {cpu:.2} s over 16 s idle");
    drop(streams);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let text = metrics(addr).await?;
    println!(
        "after closing: sse_clients {} sessions_live {} RSS {} KiB",
        metric(&text, "agentd_sse_clients"),
        metric(&text, "agentd_sessions_live"),
        rss_kib(pid)
    );
    Ok(())
}

/// What one client saw of one turn.
struct Seen {
    events: u64,
    first: Instant,
    last: Instant,
    latencies_us: Vec<u64>,
}

async fn watch(mut conn: Conn) -> Result<Seen> {
    let mut buffer = Vec::new();
    let mut seen = Seen {
        events: 0,
        first: Instant::now(),
        last: Instant::now(),
        latencies_us: Vec::new(),
    };
    loop {
        let chunk = conn.chunk().await?.context("stream ended")?;
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = buffer.drain(..end + 2).collect();
            let block = String::from_utf8_lossy(&block);
            let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) else {
                continue;
            };
            let envelope: EventEnvelope = serde_json::from_str(data)?;
            let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_micros() as i64;
            seen.latencies_us
                .push((now - envelope.at.timestamp_micros()).max(0) as u64);
            if seen.events == 0 {
                seen.first = Instant::now();
            }
            seen.events += 1;
            seen.last = Instant::now();
            if envelope.event.type_name() == "turn.finished" {
                return Ok(seen);
            }
        }
    }
}

async fn throughput(addr: &str, parallel: usize, clients: usize) -> Result<()> {
    println!(
        "## throughput: {parallel} sessions with a turn each, {clients} live clients per session"
    );
    let ids = create_sessions(addr, parallel, 1).await?;
    let mut watchers = Vec::new();
    for id in &ids {
        for _ in 0..clients {
            let conn = Conn::open(addr).await?.events(id).await?;
            watchers.push(tokio::spawn(watch(conn)));
        }
    }
    let events0 = metric(&metrics(addr).await?, "agentd_events_total");
    let started = Instant::now();
    for id in &ids {
        let mut conn = Conn::open(addr).await?;
        let path = format!("/v1/sessions/{id}/messages");
        let (status, body) = conn.request("POST", &path, r#"{"content":"go"}"#).await?;
        if status != 202 {
            bail!("message: HTTP {status} {body}");
        }
    }
    let mut seen = Vec::new();
    for watcher in watchers {
        seen.push(watcher.await??);
    }
    let wall = started.elapsed().as_secs_f64();
    let stored = metric(&metrics(addr).await?, "agentd_events_total") - events0;
    let delivered: u64 = seen.iter().map(|s| s.events).sum();
    let mut latencies: Vec<u64> = seen.iter().flat_map(|s| s.latencies_us.clone()).collect();
    latencies.sort_unstable();
    let q = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize] as f64 / 1000.0;
    let span = seen
        .iter()
        .map(|s| s.last.duration_since(s.first).as_secs_f64())
        .fold(0.0, f64::max);
    println!(
        "{stored} events stored in {wall:.2} s: {:.0} events/s appended; {delivered} deliveries \
         ({:.0}/s over the {span:.2} s the streams ran)",
        stored / wall,
        delivered as f64 / span
    );
    println!(
        "append->delivery latency: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (from the stored `at`, ms resolution)",
        q(0.5),
        q(0.99),
        q(1.0)
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = args()?;
    let data = tempfile::tempdir()?;
    // Offline scripted model: each call streams ~100 KiB of text, then an LS.
    let words: String = (0..15_000).map(|i| format!("w{i:05} ")).collect();
    let script = serde_json::json!({"replies": [{"repeat": true, "content": [
        {"type": "text", "text": words},
        {"type": "tool_use", "name": "LS", "input": {"path": "."}}
    ]}]});
    let script_path = data.path().join("script.json");
    std::fs::write(&script_path, script.to_string())?;
    let mut config = std::fs::File::create(data.path().join("agentd.toml"))?;
    writeln!(
        config,
        "[server]\nauth = \"none\"\n{}\
         [models.default]\nprovider = \"scripted\"\nscript = {:?}\n\
         [profiles.default]\nmax_turns = {}\n",
        agentd_bench::UNCAPPED,
        script_path.display().to_string(),
        args.calls
    )?;
    let (child, addr) = start_server(&args.agentd, data.path()).await?;
    let pid = child.id().context("no pid")?;
    println!("agentd serve pid {pid} on {addr}");
    if args.streams > 0 {
        idle_streams(&addr, pid, args.streams).await?;
    }
    if args.parallel > 0 {
        throughput(&addr, 1, 1).await?;
        throughput(&addr, args.parallel, args.clients).await?;
    }
    println!(
        "server peak RSS {} KiB",
        proc_field(pid, "status", |s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
    );
    Ok(())
}
