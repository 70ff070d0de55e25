//! Running the real `agentd serve` against the testkit model server, and a
//! small SSE client, for the `serve_*` tests.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::time::Duration;

use agentd_model::scripted::Script;
use agentd_testkit::{ModelServer, RecordedRequest};
use futures::{Stream, StreamExt};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Every wait in these tests is bounded by this.
pub const WAIT: Duration = Duration::from_secs(60);

pub struct Harness {
    pub model: ModelServer,
    pub data_dir: TempDir,
    pub config: PathBuf,
    pub client: reqwest::Client,
    starts: std::sync::atomic::AtomicUsize,
}

impl Harness {
    /// A model server playing `script`, a fresh data dir, and `agentd.toml`
    /// with `toml` (`{URL}` is the model server's URL).
    pub async fn new(script: Value, toml: &str) -> Self {
        let script: Script = serde_json::from_value(script).unwrap();
        let model = ModelServer::start(script).await.unwrap();
        let data_dir = TempDir::new().unwrap();
        let config = data_dir.path().join("agentd.toml");
        let data = data_dir.path().display().to_string();
        let toml = toml.replace("{URL}", &model.url()).replace("{DATA}", &data);
        std::fs::write(&config, toml).unwrap();
        Self {
            model,
            data_dir,
            config,
            // No overall timeout: it would cut event streams. Each wait is
            // bounded by `WAIT` instead.
            client: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
            starts: Default::default(),
        }
    }

    /// Without authentication (loopback only), tools allowed without asking.
    pub async fn open(script: Value) -> Self {
        let toml = "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n";
        Self::new(script, toml).await
    }

    pub fn data(&self) -> &Path {
        self.data_dir.path()
    }

    /// `agentd ARGS` with a clean environment pointing at the model server.
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_in(self.data(), args)
    }

    /// [`Harness::command`] with another data dir (one node of several).
    pub fn command_in(&self, data_dir: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentd"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .env("HOME", data_dir)
            .env("AGENTD_DATA_DIR", data_dir)
            .env("AGENTD_CONFIG", &self.config)
            .env("AGENTD_LOG", "info")
            .env("ANTHROPIC_API_KEY", "test-key")
            .env("ANTHROPIC_BASE_URL", self.model.url())
            .current_dir(data_dir)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .args(args);
        cmd
    }

    /// Run a CLI command to its end: `(exit code, stdout, stderr)`.
    pub async fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let out = tokio::time::timeout(WAIT, self.command(args).output())
            .await
            .expect("agentd took too long")
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// A fresh token for `user` from `agentd tokens create`.
    pub async fn token(&self, user: &str) -> String {
        let (code, stdout, stderr) = self.cli(&["tokens", "create", "--user", user]).await;
        assert_eq!(code, 0, "{stderr}");
        stdout.trim().to_string()
    }

    /// Start `agentd serve` on a free port and wait for its URL.
    pub async fn start(&self) -> Server {
        self.start_with(&["serve", "--bind", "127.0.0.1:0"]).await
    }

    pub async fn start_with(&self, args: &[&str]) -> Server {
        self.start_in(self.data(), args).await
    }

    /// One node of several sharing the config (a cluster on PostgreSQL): its
    /// own data dir `<data>/<name>`.
    pub async fn start_node(&self, name: &str) -> Server {
        let dir = self.data().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        self.start_in(&dir, &["serve", "--bind", "127.0.0.1:0"])
            .await
    }

    /// [`Harness::start`] with these variables in the server's environment.
    pub async fn start_with_env(&self, env: &[(&str, &str)]) -> Server {
        let args = ["serve", "--bind", "127.0.0.1:0"];
        self.start_in_env(self.data(), &args, env).await
    }

    async fn start_in(&self, data_dir: &Path, args: &[&str]) -> Server {
        self.start_in_env(data_dir, args, &[]).await
    }

    async fn start_in_env(&self, data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
        let n = self
            .starts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = self.data().join(format!("server-{n}.log"));
        let mut cmd = self.command_in(data_dir, args);
        cmd.envs(env.iter().copied());
        cmd.stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap());
        let mut child = cmd.spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .expect("no URL from agentd serve")
            .unwrap();
        let Some(line) = first else {
            let status = child.wait().await.unwrap();
            panic!(
                "agentd serve exited ({status}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        };
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_string();
        // Keep reading stdout so the server never writes into a closed pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Server {
            child: Some(child),
            url,
            log,
            client: self.client.clone(),
            token: None,
        }
    }

    pub fn model_requests(&self) -> Vec<RecordedRequest> {
        self.model
            .requests()
            .into_iter()
            .filter(|r| r.path.ends_with("/messages"))
            .collect()
    }
}

pub struct Server {
    /// `None` for another user's view of the same server (see `as_user`).
    child: Option<Child>,
    pub url: String,
    pub log: PathBuf,
    pub client: reqwest::Client,
    /// Sent as `Authorization: Bearer` when set.
    pub token: Option<String>,
}

impl Server {
    pub fn with_token(mut self, token: &str) -> Self {
        self.token = Some(token.to_string());
        self
    }

    /// The same server, called with `token`.
    pub fn as_user(&self, token: &str) -> Server {
        Server {
            child: None,
            url: self.url.clone(),
            log: self.log.clone(),
            client: self.client.clone(),
            token: Some(token.to_string()),
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let builder = self.client.request(method, format!("{}{path}", self.url));
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    /// Send and return `(status, JSON body or Null)`.
    pub async fn send(&self, builder: RequestBuilder) -> (StatusCode, Value) {
        let exchange = async {
            let response = builder.send().await.unwrap();
            let status = response.status();
            (status, response.text().await.unwrap())
        };
        let (status, text) = tokio::time::timeout(WAIT, exchange)
            .await
            .expect("no answer in time");
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        (status, body)
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(self.request(Method::GET, path)).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(self.request(Method::POST, path).json(&body))
            .await
    }

    /// Create a session; its id.
    pub async fn session(&self) -> String {
        let (status, body) = self.post("/v1/sessions", json!({})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["id"].as_str().unwrap().to_string()
    }

    /// Send a message; its turn id.
    pub async fn message(&self, session: &str, content: &str) -> String {
        let (status, body) = self
            .post(
                &format!("/v1/sessions/{session}/messages"),
                json!({"content": content}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        body["turn_id"].as_str().unwrap().to_string()
    }

    /// Open the session's event stream, after `last_event_id` if given.
    pub async fn events(&self, session: &str, last_event_id: Option<u64>) -> EventStream {
        let mut builder = self.request(Method::GET, &format!("/v1/sessions/{session}/events"));
        if let Some(id) = last_event_id {
            builder = builder.header("Last-Event-ID", id.to_string());
        }
        let response = tokio::time::timeout(WAIT, builder.send())
            .await
            .expect("no answer in time")
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        EventStream::new(response)
    }

    /// Every stored event so far (a replay from 0 that stops at `last_seq`).
    pub async fn all_events(&self, session: &str) -> Vec<SseEvent> {
        let (_, info) = self.get(&format!("/v1/sessions/{session}")).await;
        let last = info["last_seq"].as_u64().unwrap();
        let mut stream = self.events(session, None).await;
        let mut events = Vec::new();
        while events.last().is_none_or(|e: &SseEvent| e.id < last) {
            events.push(stream.next().await.expect("replay ended early"));
        }
        events
    }

    /// Wait until the session has no running or queued turn.
    pub async fn wait_idle(&self, session: &str) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let (_, info) = self.get(&format!("/v1/sessions/{session}")).await;
            if info["status"] == "idle" && info["queued_turns"] == 0 {
                return info;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "session stayed busy: {info}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL: no chance to record anything.
    pub async fn kill9(mut self) {
        let child = self.child.as_mut().unwrap();
        child.start_kill().unwrap();
        child.wait().await.unwrap();
    }

    /// The server process's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id().unwrap()
    }

    /// SIGTERM, then the exit code.
    pub async fn terminate(mut self) -> i32 {
        self.signal("TERM").await;
        self.exit_code().await
    }

    /// Send a signal (`TERM`, `USR1`, …) by name.
    pub async fn signal(&mut self, name: &str) {
        let pid = self.child.as_ref().unwrap().id().unwrap().to_string();
        let status = Command::new("kill")
            .args([&format!("-{name}"), &pid])
            .status()
            .await
            .unwrap();
        assert!(status.success());
    }

    /// Wait for the process to exit by itself; its exit code.
    pub async fn exit_code(&mut self) -> i32 {
        let child = self.child.as_mut().unwrap();
        let status = tokio::time::timeout(WAIT, child.wait())
            .await
            .expect("agentd serve did not exit")
            .unwrap();
        status.code().unwrap_or(-1)
    }
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    pub id: u64,
    pub event: String,
    pub data: Value,
}

pub struct EventStream {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: Vec<u8>,
}

impl EventStream {
    pub fn new(response: Response) -> Self {
        Self {
            body: Box::pin(response.bytes_stream()),
            buffer: Vec::new(),
        }
    }

    /// The next event (comments skipped); `None` when the stream ends.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
                if let Some(event) = parse_block(&String::from_utf8(block).unwrap()) {
                    return Some(event);
                }
                continue;
            }
            match tokio::time::timeout(WAIT, self.body.next()).await {
                Ok(Some(Ok(chunk))) => self.buffer.extend_from_slice(&chunk),
                Ok(_) => return None,
                Err(_) => panic!("no event within {WAIT:?}"),
            }
        }
    }

    /// Events up to and including the `count`-th `turn.finished`.
    pub async fn until_finished(&mut self, count: usize) -> Vec<SseEvent> {
        let mut events = Vec::new();
        let mut finished = 0;
        while finished < count {
            let event = self
                .next()
                .await
                .expect("stream ended before turn.finished");
            finished += usize::from(event.event == "turn.finished");
            events.push(event);
        }
        events
    }
}

/// The events of a whole SSE body (comments skipped).
pub fn parse_events(body: &str) -> Vec<SseEvent> {
    body.split("\n\n").filter_map(parse_block).collect()
}

fn parse_block(block: &str) -> Option<SseEvent> {
    let (mut id, mut event, mut data) = (None, None, String::new());
    for line in block.lines() {
        if let Some(v) = line.strip_prefix("id: ") {
            id = Some(v.parse().unwrap());
        } else if let Some(v) = line.strip_prefix("event: ") {
            event = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("data: ") {
            data.push_str(v);
        }
    }
    let data: Value = serde_json::from_str(&data).ok()?;
    let id = id?;
    assert_eq!(data["seq"], id, "SSE id is the envelope's seq");
    assert_eq!(
        data["type"].as_str(),
        event.as_deref(),
        "SSE event is the type"
    );
    Some(SseEvent {
        id,
        event: event?,
        data,
    })
}

/// Seqs are 1, 2, 3, … with no gap and no repeat.
pub fn assert_gapless(events: &[SseEvent]) {
    let seqs: Vec<u64> = events.iter().map(|e| e.id).collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "seqs must be gapless and unique");
}

/// Script text long enough to stream as many chunks.
pub fn words(n: usize) -> String {
    (0..n).map(|i| format!("word{i} ")).collect()
}

/// A URL of the test cluster whose `search_path` is a new, empty schema.
pub async fn fresh_database_url() -> String {
    let base = std::env::var("AGENTD_TEST_POSTGRES_URL").unwrap_or_default();
    assert!(
        !base.is_empty(),
        "AGENTD_TEST_POSTGRES_URL is not set: this test needs a running PostgreSQL. \
         Run it via `make test` (it starts a throwaway cluster), or \
         `eval \"$(scripts/postgres.sh start)\"` and export the URL."
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    // All test modules share one process (and pid): a counter keeps two
    // schemas made in the same nanosecond apart.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let schema = format!("serve_{}_{nanos}_{n}", std::process::id());
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&base)
        .await
        .unwrap();
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::Connection::close(conn).await.unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}options=-c%20search_path%3D{schema}")
}
