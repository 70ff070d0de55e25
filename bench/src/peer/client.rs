//! A minimal HTTP/1.1 and SSE client for the benchmarks (plain tokio, so a
//! client costs little), with what they ask of agentd and the model server:
//! sessions, messages, metrics.

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::processes::now_us;
use std::time::Duration;

/// One keep-alive HTTP/1.1 connection (plain tokio, so the client is cheap).
pub struct Conn {
    reader: tokio::io::BufReader<TcpStream>,
    addr: String,
    buffer: Vec<u8>,
}

impl Conn {
    pub async fn open(addr: &str) -> Result<Self> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        Ok(Self {
            reader: tokio::io::BufReader::new(tcp),
            addr: addr.to_string(),
            buffer: Vec::new(),
        })
    }

    async fn send(&mut self, method: &str, path: &str, body: &str) -> Result<()> {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        self.reader.get_mut().write_all(head.as_bytes()).await?;
        Ok(())
    }

    async fn head(&mut self) -> Result<(u16, usize)> {
        let mut line = String::new();
        self.reader.read_line(&mut line).await?;
        let status = line
            .split_whitespace()
            .nth(1)
            .context("no status line")?
            .parse()?;
        let mut length = 0;
        loop {
            line.clear();
            if self.reader.read_line(&mut line).await? == 0 {
                bail!("connection closed in headers");
            }
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                return Ok((status, length));
            }
            if let Some((name, value)) = trimmed.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse()?;
            }
        }
    }

    pub async fn request(&mut self, method: &str, path: &str, body: &str) -> Result<(u16, String)> {
        self.send(method, path, body).await?;
        let (status, length) = self.head().await?;
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).await?;
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// Turn this connection into the session's event stream.
    pub async fn events(mut self, session: &str) -> Result<Self> {
        self.send("GET", &format!("/v1/sessions/{session}/events"), "")
            .await?;
        let (status, _) = self.head().await?;
        if status != 200 {
            bail!("events: HTTP {status}");
        }
        Ok(self)
    }

    async fn chunk(&mut self) -> Result<Vec<u8>> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).await? == 0 {
            bail!("event stream closed");
        }
        let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)?;
        let mut data = vec![0; size + 2];
        self.reader.read_exact(&mut data).await?;
        data.truncate(size);
        Ok(data)
    }

    /// The next SSE event's data: `(type, at in µs since the epoch)`.
    pub async fn next_event(&mut self) -> Result<(String, i64)> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let block = String::from_utf8_lossy(&block);
                let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) else {
                    continue;
                };
                // Only what the benches read: decoding the whole envelope (a
                // flattened enum, buffered by serde) would cost the client
                // more than the server spends sending it.
                let seen: Seen = serde_json::from_str(data)?;
                return Ok((seen.kind, seen.at.timestamp_micros()));
            }
            let chunk = self.chunk().await?;
            self.buffer.extend_from_slice(&chunk);
        }
    }
}

/// The fields of an event envelope the benches read.
#[derive(serde::Deserialize)]
struct Seen {
    #[serde(rename = "type")]
    kind: String,
    at: chrono::DateTime<chrono::Utc>,
}

/// POST /v1/sessions; returns the new id.
pub async fn create_session(conn: &mut Conn) -> Result<String> {
    let (status, body) = conn.request("POST", "/v1/sessions", "{}").await?;
    if status != 201 {
        bail!("create session: HTTP {status} {body}");
    }
    let value: Value = serde_json::from_str(&body)?;
    Ok(value["id"].as_str().context("no id")?.to_string())
}

/// POST a user message (starts a turn).
pub async fn post_message(conn: &mut Conn, id: &str, text: &str) -> Result<()> {
    post(conn, id, json!({ "content": text })).await
}

/// POST a message that waits behind the session's running turn, if any.
pub async fn post_queued(conn: &mut Conn, id: &str, text: &str) -> Result<()> {
    post(conn, id, json!({ "content": text, "queue": true })).await
}

async fn post(conn: &mut Conn, id: &str, body: Value) -> Result<()> {
    let body = body.to_string();
    let (status, reply) = conn
        .request("POST", &format!("/v1/sessions/{id}/messages"), &body)
        .await?;
    if status != 202 {
        bail!("message: HTTP {status} {reply}");
    }
    Ok(())
}

/// Read `stream` until `turns` turns have finished; the latency of each event.
pub async fn watch(stream: &mut Conn, turns: usize, latencies: &mut Vec<u64>) -> Result<()> {
    let mut finished = 0;
    while finished < turns {
        // Turns send an event a second at the slowest: two minutes of
        // silence is a hang (a lost event, say), not a wait.
        let (kind, at) = tokio::time::timeout(Duration::from_secs(120), stream.next_event())
            .await
            .map_err(|_| {
                anyhow::anyhow!("no event for 2 min ({finished} of {turns} turns finished)")
            })??;
        latencies.push((now_us() - at).max(0) as u64);
        if kind == "turn.finished" {
            finished += 1;
        }
    }
    Ok(())
}

/// The scripted model server's service counters (`GET /_testkit/stats`);
/// `url` is its base URL, `http://host:port`.
pub async fn model_stats(url: &str) -> Result<agentd_testkit::ServiceStats> {
    let addr = url.strip_prefix("http://").unwrap_or(url);
    let (status, body) = Conn::open(addr)
        .await?
        .request("GET", "/_testkit/stats", "")
        .await?;
    if status != 200 {
        bail!("model server stats: HTTP {status} {body}");
    }
    serde_json::from_str(&body).context("model server stats")
}

/// A Prometheus counter or gauge from `/metrics`.
pub async fn metric(addr: &str, name: &str) -> Result<f64> {
    let (_, text) = Conn::open(addr)
        .await?
        .request("GET", "/metrics", "")
        .await?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(f64::NAN))
}

/// A Prometheus histogram from `/metrics`: `(upper bound, cumulative count)`.
pub async fn histogram(addr: &str, name: &str) -> Result<Vec<(f64, f64)>> {
    let (_, text) = Conn::open(addr)
        .await?
        .request("GET", "/metrics", "")
        .await?;
    let prefix = format!("{name}_bucket{{le=\"");
    Ok(text
        .lines()
        .filter_map(|l| {
            let (le, count) = l.strip_prefix(&prefix)?.split_once("\"} ")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, count.parse().ok()?))
        })
        .collect())
}

/// The bucket bound under which fraction `q` of the observations made
/// between two scrapes fall.
pub fn bucket_quantile(before: &[(f64, f64)], after: &[(f64, f64)], q: f64) -> f64 {
    let counts: Vec<(f64, f64)> = after
        .iter()
        .map(|(le, n)| {
            let old = before
                .iter()
                .find(|(b, _)| b == le)
                .map_or(0.0, |(_, n)| *n);
            (*le, n - old)
        })
        .collect();
    let total = counts.last().map_or(0.0, |(_, n)| *n);
    counts
        .iter()
        .find(|(_, n)| *n >= q * total)
        .map_or(f64::NAN, |(le, _)| *le)
}
