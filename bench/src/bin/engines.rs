//! The native engine against the `claude-code` engine on the same scripted
//! conversation, through a real `agentd serve`: per-turn host overhead and
//! memory per live session.
//!
//! The model is the testkit model server, in this process, behind a small
//! timing proxy: every request's time from its arrival at the proxy to the
//! last byte of its response is "model time". A turn's wall time runs from
//! `POST /messages` to `turn.finished` on the session's event stream; host
//! overhead is wall time minus the model time inside that window (overlapping
//! requests counted once). Each turn is one model call that says a sentence
//! and runs Bash (`echo; ls`, in agentd's sandbox, for both engines), then one
//! that answers with a paragraph. One session runs TURNS turns after a
//! warm-up turn, twice: back to back (the next message as soon as
//! `turn.finished` arrives) and with a pause between turns (as when a person
//! reads the answer); the medians are over the TURNS turns. The overhead is
//! split into: message → first model call, `tool.started` → `tool.finished`
//! (native: the sandboxed call; claude-code: the CLI calling agentd's MCP
//! endpoint, the same sandboxed call, and the CLI reporting its result), and
//! last model call → `turn.finished`.
//!
//! Memory and cold starts: a fresh `agentd serve` per engine, then K sessions
//! with one such turn each (so each claude-code session holds a warm
//! `claude`; each first turn starts one), then the RSS (and PSS, which splits
//! shared pages) of agentd plus every process below it, at K = 0, 1 and K.
//!
//!     cargo build --release -p agentd-cli
//!     cargo run --release -p agentd-bench --bin engines [TURNS] [SESSIONS]
//!
//! The `claude` CLI: `AGENTD_CLAUDE_BIN`, else `.tools/node_modules/.bin/claude`
//! (`make deps` installs it).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentd_bench::quantile;
use agentd_testkit::{ModelServer, Script};
use anyhow::{Context, bail};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use futures::{Stream, StreamExt};
use serde_json::{Value, json};

/// What the model server was busy with: `(path, start, end)` per request.
type Busy = Arc<Mutex<Vec<(String, Instant, Instant)>>>;

/// Records a request's interval when its response body is dropped (sent).
struct Timer {
    path: String,
    start: Instant,
    busy: Busy,
}

impl Drop for Timer {
    fn drop(&mut self) {
        if let Ok(mut busy) = self.busy.lock() {
            busy.push((std::mem::take(&mut self.path), self.start, Instant::now()));
        }
    }
}

#[derive(Clone)]
struct Proxy {
    upstream: String,
    client: reqwest::Client,
    busy: Busy,
}

const HOP_BY_HOP: &[&str] = &[
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "keep-alive",
];

async fn forward(State(proxy): State<Proxy>, request: Request) -> Response {
    let start = Instant::now();
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let timer = Timer {
        path: format!("{} {path}", parts.method),
        start,
        busy: proxy.busy.clone(),
    };
    let failed = |err: String| {
        Response::builder()
            .status(StatusCode::BAD_GATEWAY)
            .body(Body::from(err))
            .unwrap_or_default()
    };
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(body) => body,
        Err(err) => return failed(err.to_string()),
    };
    let query = parts
        .uri
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let mut upstream = proxy
        .client
        .request(parts.method, format!("{}{path}{query}", proxy.upstream))
        .body(body);
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            upstream = upstream.header(name, value);
        }
    }
    let answer = match upstream.send().await {
        Ok(answer) => answer,
        Err(err) => return failed(err.to_string()),
    };
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            response = response.header(name, value);
        }
    }
    let stream = answer.bytes_stream().map(move |chunk| {
        let _keep = &timer;
        chunk
    });
    response
        .body(Body::from_stream(stream))
        .unwrap_or_else(|err| failed(err.to_string()))
}

/// The testkit model server behind the timing proxy; the proxy's URL.
async fn start_model(script: Script, busy: Busy) -> anyhow::Result<(ModelServer, String)> {
    let model = ModelServer::start(script).await?;
    let proxy = Proxy {
        upstream: model.url(),
        client: reqwest::Client::builder().no_proxy().build()?,
        busy,
    };
    let app = axum::Router::new().fallback(forward).with_state(proxy);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let _ = axum::serve(listener, app).await;
    });
    Ok((model, url))
}

/// One turn of the conversation, with the engine's name for Bash.
fn script(bash: &str) -> anyhow::Result<Script> {
    let value = json!({"replies": [
        {"repeat": true, "when": {"last_user_contains": "bench turn"}, "content": [
            {"type": "text", "text": "Let me check the state of the workspace with a quick command before answering."},
            {"type": "tool_use", "name": bash, "input": {"command": "echo bench-out; ls -la", "description": "check"}}
        ]},
        {"repeat": true, "when": {"last_tool_result_contains": "bench-out"}, "content": [
            {"type": "text", "text": "The command ran in the sandbox and printed what I expected. The workspace is \
             in the state the task describes, so nothing needs to change; I listed its files to be sure and \
             there is nothing unexpected in it. Tell me if you want me to look at something in more detail."}
        ]},
        // Requests the CLI makes on its own (titles, topic checks).
        {"repeat": true, "content": [{"type": "text", "text": "{\"isNewTopic\": false, \"title\": \"T\"}"}]}
    ]});
    Ok(serde_json::from_value(value)?)
}

fn claude_binary() -> anyhow::Result<PathBuf> {
    if let Some(bin) = std::env::var_os("AGENTD_CLAUDE_BIN") {
        return Ok(PathBuf::from(bin));
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools/node_modules/.bin/claude");
    local.canonicalize().with_context(|| {
        format!(
            "the `claude` CLI: set AGENTD_CLAUDE_BIN or install it into {}",
            local.display()
        )
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Engine {
    Native,
    ClaudeCode,
}

impl Engine {
    fn name(self) -> &'static str {
        match self {
            Engine::Native => "native",
            Engine::ClaudeCode => "claude-code",
        }
    }

    fn bash(self) -> &'static str {
        match self {
            Engine::Native => "Bash",
            Engine::ClaudeCode => "mcp__agentd__Bash",
        }
    }
}

/// A running `agentd serve`.
struct Serve {
    child: Child,
    url: String,
    client: reqwest::Client,
    _data: tempfile::TempDir,
}

impl Serve {
    fn start(model_url: &str, claude: &Path) -> anyhow::Result<Self> {
        let agentd = std::env::current_exe()?.with_file_name("agentd");
        if !agentd.exists() {
            bail!(
                "{} not found: build it with `cargo build --release -p agentd-cli`",
                agentd.display()
            );
        }
        let data = tempfile::tempdir()?;
        let config = data.path().join("agentd.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\nauth = \"none\"\n\
                 [models.native]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = \"{model_url}\"\n\
                 [models.claude-code]\nprovider = \"claude-code\"\nmodel = \"claude-sonnet-4-5\"\n\
                 base_url = \"{model_url}\"\ncommand = \"{}\"\n\
                 [profiles.default]\nmode = \"bypass\"\n",
                claude.display()
            ),
        )?;
        let log = std::fs::File::create(data.path().join("serve.log"))?;
        let mut child = Command::new(agentd)
            .args(["serve", "--bind", "127.0.0.1:0"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", data.path())
            .env("AGENTD_DATA_DIR", data.path())
            .env("AGENTD_CONFIG", &config)
            .env("AGENTD_LOG", "warn")
            .env("ANTHROPIC_API_KEY", "bench")
            .current_dir(data.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().context("agentd serve printed nothing")??;
        let url = first
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .with_context(|| format!("no URL in {first:?}"))?
            .to_string();
        std::thread::spawn(move || for _ in lines {});
        Ok(Self {
            child,
            url,
            client: reqwest::Client::builder().no_proxy().build()?,
            _data: data,
        })
    }

    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let response = self
            .client
            .post(format!("{}{path}", self.url))
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("POST {path}: {status} {body}");
        }
        Ok(body)
    }

    async fn session(&self, engine: Engine) -> anyhow::Result<String> {
        let body = self
            .post("/v1/sessions", json!({"model": engine.name()}))
            .await?;
        body["id"]
            .as_str()
            .map(str::to_string)
            .context("no session id")
    }

    async fn events(&self, session: &str) -> anyhow::Result<Events> {
        let response = self
            .client
            .get(format!("{}/v1/sessions/{session}/events", self.url))
            .send()
            .await?
            .error_for_status()?;
        Ok(Events {
            body: Box::pin(response.bytes_stream()),
            buffer: Vec::new(),
        })
    }

    /// Send a message and wait for its `turn.finished`; the events of the turn.
    async fn turn(
        &self,
        session: &str,
        events: &mut Events,
        text: &str,
    ) -> anyhow::Result<Vec<(String, Value)>> {
        self.post(
            &format!("/v1/sessions/{session}/messages"),
            json!({"content": text}),
        )
        .await?;
        let mut seen = Vec::new();
        loop {
            let (kind, data) = tokio::time::timeout(Duration::from_secs(120), events.next())
                .await
                .context("no event within 120 s")??;
            let done = kind == "turn.finished";
            seen.push((kind, data));
            if done {
                let status = &seen[seen.len() - 1].1["status"];
                if status != "completed" {
                    bail!("a turn ended {status}: {:?}", seen[seen.len() - 1].1);
                }
                return Ok(seen);
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM and wait.
    fn stop(mut self) -> anyhow::Result<()> {
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
        }
        self.child.wait()?;
        Ok(())
    }
}

/// A session's event stream (server-sent events).
struct Events {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: Vec<u8>,
}

impl Events {
    /// The next event: `(type, data)`.
    async fn next(&mut self) -> anyhow::Result<(String, Value)> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let block = String::from_utf8_lossy(&block);
                let (mut kind, mut data) = (None, String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        kind = Some(v.to_string());
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push_str(v);
                    }
                }
                if let (Some(kind), Ok(data)) = (kind, serde_json::from_str(&data)) {
                    return Ok((kind, data));
                }
                continue;
            }
            match self.body.next().await {
                Some(chunk) => self.buffer.extend_from_slice(&chunk?),
                None => bail!("the event stream ended"),
            }
        }
    }
}

/// The model server's part of one turn `[from, to]`.
struct ModelPart {
    /// Busy time, overlapping requests counted once.
    time: Duration,
    /// `POST /v1/messages` requests.
    calls: usize,
    /// From the message to the first model call, and from the end of the
    /// last one to `turn.finished`.
    before: Duration,
    after: Duration,
}

fn model_part(busy: &Busy, from: Instant, to: Instant) -> ModelPart {
    let mut spans: Vec<(Instant, Instant)> = Vec::new();
    let mut calls = 0;
    let (mut first, mut last) = (to, from);
    if let Ok(busy) = busy.lock() {
        for (path, start, end) in busy.iter() {
            if *end <= from || *start >= to {
                continue;
            }
            if path == "POST /v1/messages" {
                calls += 1;
                first = first.min(*start);
                last = last.max(*end);
            }
            spans.push(((*start).max(from), (*end).min(to)));
        }
    }
    spans.sort();
    let mut total = Duration::ZERO;
    let mut current: Option<(Instant, Instant)> = None;
    for (start, end) in spans {
        current = match current {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                total += e - s;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    if let Some((s, e)) = current {
        total += e - s;
    }
    ModelPart {
        time: total,
        calls,
        before: first.saturating_duration_since(from),
        after: to.saturating_duration_since(last),
    }
}

struct Timing {
    wall: Vec<Duration>,
    model: Vec<Duration>,
    overhead: Vec<Duration>,
    before: Vec<Duration>,
    after: Vec<Duration>,
    tool: Vec<Duration>,
    calls: Vec<usize>,
}

/// `turns` turns of one session after a warm-up turn, `pause` apart.
async fn time_turns(
    engine: Engine,
    turns: usize,
    pause: Duration,
    claude: &Path,
) -> anyhow::Result<Timing> {
    let busy: Busy = Default::default();
    let (_model, url) = start_model(script(engine.bash())?, busy.clone()).await?;
    let serve = Serve::start(&url, claude)?;
    let session = serve.session(engine).await?;
    let mut events = serve.events(&session).await?;
    let mut timing = Timing {
        wall: Vec::new(),
        model: Vec::new(),
        overhead: Vec::new(),
        before: Vec::new(),
        after: Vec::new(),
        tool: Vec::new(),
        calls: Vec::new(),
    };
    for n in 0..=turns {
        tokio::time::sleep(pause).await;
        let started = Instant::now();
        let seen = serve
            .turn(
                &session,
                &mut events,
                &format!("bench turn {n}: check the workspace"),
            )
            .await?;
        let ended = Instant::now();
        let wall = ended - started;
        let part = model_part(&busy, started, ended);
        let model = part.time;
        let tool: u64 = seen
            .iter()
            .filter(|(kind, _)| kind == "tool.finished")
            .map(|(_, data)| data["duration_ms"].as_u64().unwrap_or(0))
            .sum();
        if !seen.iter().any(|(kind, _)| kind == "tool.finished") {
            bail!("{}: turn {n} ran no tool", engine.name());
        }
        if n == 0 {
            continue;
        }
        timing.wall.push(wall);
        timing.model.push(model);
        timing.overhead.push(wall.saturating_sub(model));
        timing.before.push(part.before);
        timing.after.push(part.after);
        timing.tool.push(Duration::from_millis(tool));
        timing.calls.push(part.calls);
    }
    drop(events);
    serve.stop()?;
    Ok(timing)
}

/// `(RSS, PSS)` in KiB of one process.
fn memory_kib(pid: u32) -> (u64, u64) {
    let field = |file: &str, key: &str| -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/{file}"))
            .ok()
            .and_then(|text| {
                text.lines().find_map(|line| {
                    line.strip_prefix(key)
                        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
                })
            })
            .unwrap_or(0)
    };
    (field("status", "VmRSS:"), field("smaps_rollup", "Pss:"))
}

/// Every process below `root`.
fn descendants(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
            .and_then(|p| p.parse().ok());
        if let Some(ppid) = ppid {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            out.push(child);
            todo.push(child);
        }
    }
    out
}

/// Memory of agentd and of the processes below it, in KiB.
#[derive(Default, Clone, Copy)]
struct Footprint {
    agentd_rss: u64,
    agentd_pss: u64,
    others_rss: u64,
    others_pss: u64,
    others: usize,
}

impl Footprint {
    fn of(agentd: u32) -> Self {
        let (agentd_rss, agentd_pss) = memory_kib(agentd);
        let mut footprint = Footprint {
            agentd_rss,
            agentd_pss,
            ..Footprint::default()
        };
        for pid in descendants(agentd) {
            let (rss, pss) = memory_kib(pid);
            footprint.others_rss += rss;
            footprint.others_pss += pss;
            footprint.others += 1;
        }
        footprint
    }

    fn rss(&self) -> u64 {
        self.agentd_rss + self.others_rss
    }

    fn pss(&self) -> u64 {
        self.agentd_pss + self.others_pss
    }
}

/// What `sessions` live sessions cost.
struct Sessions {
    /// The footprint with 0, 1 and `sessions` live sessions.
    footprints: Vec<(usize, Footprint)>,
    /// Each session's first turn: wall time and host overhead.
    first_wall: Vec<Duration>,
    first_overhead: Vec<Duration>,
}

async fn sessions(engine: Engine, sessions: usize, claude: &Path) -> anyhow::Result<Sessions> {
    let busy: Busy = Default::default();
    let (_model, url) = start_model(script(engine.bash())?, busy.clone()).await?;
    let serve = Serve::start(&url, claude)?;
    let settle = || tokio::time::sleep(Duration::from_secs(2));
    let mut out = Sessions {
        footprints: Vec::new(),
        first_wall: Vec::new(),
        first_overhead: Vec::new(),
    };
    settle().await;
    out.footprints.push((0, Footprint::of(serve.pid())));
    for n in 1..=sessions {
        let session = serve.session(engine).await?;
        let mut events = serve.events(&session).await?;
        let started = Instant::now();
        serve
            .turn(&session, &mut events, "bench turn 0: check the workspace")
            .await?;
        let ended = Instant::now();
        let model = model_part(&busy, started, ended).time;
        out.first_wall.push(ended - started);
        out.first_overhead
            .push((ended - started).saturating_sub(model));
        if n == 1 || n == sessions {
            settle().await;
            out.footprints.push((n, Footprint::of(serve.pid())));
        }
    }
    serve.stop()?;
    Ok(out)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn median(samples: &[Duration]) -> Duration {
    quantile(&mut samples.to_vec(), 0.5)
}

/// The pause between turns in the second timing run.
const PAUSE: Duration = Duration::from_millis(500);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let turns: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(50);
    let k: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(10);
    if turns == 0 || k < 2 {
        bail!("usage: engines [TURNS ≥ 1] [SESSIONS ≥ 2]");
    }
    let claude = claude_binary()?;
    let engines = [Engine::Native, Engine::ClaudeCode];
    let mut back_to_back = Vec::new();
    let mut paused = Vec::new();
    let mut live = Vec::new();
    for engine in engines {
        eprintln!("{}: {turns} turns back to back…", engine.name());
        back_to_back.push(time_turns(engine, turns, Duration::ZERO, &claude).await?);
        eprintln!("{}: {turns} turns {PAUSE:?} apart…", engine.name());
        paused.push(time_turns(engine, turns, PAUSE, &claude).await?);
        eprintln!("{}: {k} live sessions…", engine.name());
        live.push(sessions(engine, k, &claude).await?);
    }

    let line = |label: &str, native: String, claude: String| {
        println!("{label:<46} {native:>24} {claude:>24}");
    };
    println!(
        "agentd engines through `agentd serve`: each turn = text + Bash (sandboxed), then text \
         (2 model calls); medians over {turns} turns of one session after a warm-up turn"
    );
    line("", "native".into(), "claude-code".into());
    for (title, timings) in [
        ("back to back".to_string(), &back_to_back),
        (format!("{} ms between turns", PAUSE.as_millis()), &paused),
    ] {
        println!("{title}:");
        let row = |label: &str, f: &dyn Fn(&Timing) -> String| {
            line(label, f(&timings[0]), f(&timings[1]));
        };
        row("  wall per turn", &|t| ms(median(&t.wall)));
        row("  model server time per turn", &|t| ms(median(&t.model)));
        row("  host overhead per turn", &|t| ms(median(&t.overhead)));
        row("  host overhead per turn, p90", &|t| {
            ms(quantile(&mut t.overhead.clone(), 0.9))
        });
        row("    message → first model call", &|t| {
            ms(median(&t.before))
        });
        row("    tool.started → tool.finished", &|t| {
            ms(median(&t.tool))
        });
        row("    last model call → turn.finished", &|t| {
            ms(median(&t.after))
        });
        row("  model requests per turn", &|t| {
            let total: usize = t.calls.iter().sum();
            format!("{:.1}", total as f64 / t.calls.len().max(1) as f64)
        });
    }
    println!("first turn of a new session (claude-code: the CLI starts), median of {k}:");
    line(
        "  wall",
        ms(median(&live[0].first_wall)),
        ms(median(&live[1].first_wall)),
    );
    line(
        "  host overhead (min – max)",
        format!(
            "{} ({} – {})",
            ms(median(&live[0].first_overhead)),
            ms(quantile(&mut live[0].first_overhead.clone(), 0.0)),
            ms(quantile(&mut live[0].first_overhead.clone(), 1.0))
        ),
        format!(
            "{} ({} – {})",
            ms(median(&live[1].first_overhead)),
            ms(quantile(&mut live[1].first_overhead.clone(), 0.0)),
            ms(quantile(&mut live[1].first_overhead.clone(), 1.0))
        ),
    );
    println!("memory after one turn in each of K live sessions: agentd + the processes below it:");
    let at = |engine: usize, n: usize| {
        live[engine]
            .footprints
            .iter()
            .find(|(m, _)| *m == n)
            .map(|(_, f)| *f)
            .unwrap_or_default()
    };
    for n in [0, 1, k] {
        let cells = |f: &dyn Fn(&Footprint) -> String| (f(&at(0, n)), f(&at(1, n)));
        let (native, claude) = cells(&|f| format!("{} [PSS {}]", mib(f.rss()), mib(f.pss())));
        line(&format!("  K = {n}: RSS total"), native, claude);
        let (native, claude) = cells(&|f| {
            format!(
                "{} + {} × {}",
                mib(f.agentd_rss),
                f.others,
                mib(f.others_rss / f.others.max(1) as u64)
            )
        });
        line("    agentd + processes × RSS each", native, claude);
    }
    let per_session = |engine: usize, pick: &dyn Fn(&Footprint) -> u64| {
        let (one, many) = (at(engine, 1), at(engine, k));
        let delta = pick(&many).saturating_sub(pick(&one));
        mib(delta / (k as u64 - 1))
    };
    line(
        &format!("  per live session, RSS ({k} vs 1)"),
        per_session(0, &Footprint::rss),
        per_session(1, &Footprint::rss),
    );
    line(
        &format!("  per live session, PSS ({k} vs 1)"),
        per_session(0, &Footprint::pss),
        per_session(1, &Footprint::pss),
    );
    Ok(())
}
