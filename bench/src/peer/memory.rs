//! Memory per idle live session (an SSE stream each, one HTTP/1 connection
//! per stream, at each level), and the most live sessions one `agentd serve`
//! holds: 100 000 by default, their streams over HTTP/2 cleartext (many per
//! connection), since one process here may hold at most 20 000 sockets.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use super::client::{Conn, metric};
use super::processes::{rss_kib, start_serve, stop};
use super::report::{Table, kib, mem_total_kib, ratio};
use super::scenarios::{Ctx, create_many, create_many_on};

/// An idle live session's RSS, HTTP/1 at 10 000 sessions (issue 29).
const TARGET_PER_SESSION_KIB: f64 = 16.0;
/// Live sessions one process is to hold (issue 29), within this RSS.
const TARGET_HELD: usize = 100_000;
const TARGET_HELD_RSS_KIB: u64 = 2 * 1024 * 1024;
/// Streams per HTTP/2 connection: the server's default `http2_max_streams`.
const STREAMS_PER_H2_CONN: usize = 256;
/// HTTP/2 connections opening their streams at once.
const H2_CONNS_AT_ONCE: usize = 8;
/// Connections creating sessions at once, for the 100 000.
const CREATING_CONNS: usize = 16;

/// RSS per idle live session (with an SSE client each) at each level.
pub async fn agentd_memory(ctx: &Ctx, levels: &[usize]) -> Result<(u64, Vec<(usize, u64, f64)>)> {
    let data = ctx.root.join("agentd-mem");
    std::fs::create_dir_all(&data)?;
    let (server, addr) = start_serve(&ctx.agentd, &data, &ctx.url_rel).await?;
    let outcome = async {
        let pid = server.id();
        let _ = metric(&addr, "agentd_sessions_live").await?;
        let warm_up_streams = warm_up(&addr).await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let base = rss_kib(pid);
        let mut streams: Vec<Conn> = Vec::new();
        let mut rows = Vec::new();
        for &level in levels {
            let missing = level.saturating_sub(streams.len());
            let ids = create_many(&addr, missing).await?;
            for chunk in ids.chunks(256) {
                streams.extend(open_streams(&addr, chunk).await?);
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            let live = metric(&addr, "agentd_sessions_live").await?;
            let rss = rss_kib(pid);
            let per = rss.saturating_sub(base) as f64 / level as f64;
            eprintln!(
                "  agentd: {level} idle sessions with SSE ({live} live): RSS {rss} KiB, \
                 {per:.1} KiB per session over the {base} KiB base"
            );
            rows.push((level, rss, per));
        }
        drop(streams);
        drop(warm_up_streams);
        Ok((base, rows))
    }
    .await;
    stop(server);
    outcome
}

/// The table's row for one level; `claude_per` is a `claude` process's KiB.
pub fn level_row(t: &mut Table, (level, rss, per): (usize, u64, f64), claude_per: f64) {
    let claude_total = claude_per * level as f64;
    let (target, met) = if level >= 10_000 {
        ("≤ 16 KiB", per <= TARGET_PER_SESSION_KIB)
    } else {
        ("≤ 1/1000 (≲ 270 KiB)", per <= claude_per / 1000.0)
    };
    t.target(
        &[
            &format!("memory per idle live session + SSE, {level} sessions"),
            &format!("{} (server RSS {})", kib(per), kib(rss as f64)),
            &format!(
                "{} (×{level} = {}, extrapolated)",
                kib(claude_per),
                kib(claude_total)
            ),
            &ratio(per, claude_per),
            target,
        ],
        met,
    );
}

/// Warm-up sessions with an SSE stream each, opened eight at once as the
/// levels open theirs and held open through the measurement, so that the base
/// RSS holds the server's one-time lazy start-up (every runtime thread's first
/// allocations, SQLite caches, the first connections) and the levels' sessions
/// are measured on top of live ones, not in memory freed by deleted ones.
async fn warm_up(addr: &str) -> Result<Vec<Conn>> {
    let ids = create_many(addr, WARM_UP_SESSIONS).await?;
    open_streams(addr, &ids).await
}

/// An SSE stream on each of `ids`, opened all at once.
async fn open_streams(addr: &str, ids: &[String]) -> Result<Vec<Conn>> {
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let (addr, id) = (addr.to_string(), id.clone());
            tokio::spawn(async move { Conn::open(&addr).await?.events(&id).await })
        })
        .collect();
    let mut streams = Vec::with_capacity(tasks.len());
    for task in tasks {
        streams.push(task.await??);
    }
    Ok(streams)
}

const WARM_UP_SESSIONS: usize = 8;

/// One process holding `sessions` live sessions with an SSE stream each.
#[derive(Debug, Clone, Copy, Default)]
pub struct Held {
    pub sessions: usize,
    pub connections: usize,
    /// Server RSS (KiB) with the warm-up's streams open, before creating.
    pub base_kib: u64,
    /// Server RSS (KiB) with every stream open.
    pub rss_kib: u64,
    /// `agentd_sessions_live` then.
    pub live: f64,
    pub create: Duration,
    pub open: Duration,
}

/// `sessions` sessions created, an SSE stream opened on each over HTTP/2
/// cleartext and held; the server's RSS then.
pub async fn held_over_h2(ctx: &Ctx, sessions: usize) -> Result<Held> {
    let data = ctx.root.join("agentd-held");
    std::fs::create_dir_all(&data)?;
    let (server, addr) = start_serve(&ctx.agentd, &data, &ctx.url_rel).await?;
    let outcome = async {
        let pid = server.id();
        // Warm-up, as in `agentd_memory`: one connection's worth of streams.
        let ids = create_many(&addr, STREAMS_PER_H2_CONN).await?;
        let warm_up = open_h2(&addr, vec![ids]).await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let base_kib = rss_kib(pid);
        let begun = Instant::now();
        let ids = create_many_on(&addr, sessions, CREATING_CONNS).await?;
        let create = begun.elapsed();
        let begun = Instant::now();
        let chunks: Vec<Vec<String>> = ids
            .chunks(STREAMS_PER_H2_CONN)
            .map(<[String]>::to_vec)
            .collect();
        let connections = chunks.len();
        let streams = open_h2(&addr, chunks).await?;
        let open = begun.elapsed();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let live = metric(&addr, "agentd_sessions_live").await?;
        let held = Held {
            sessions,
            connections,
            base_kib,
            rss_kib: rss_kib(pid),
            live,
            create,
            open,
        };
        eprintln!("  agentd: {held:?}");
        drop(streams);
        drop(warm_up);
        Ok(held)
    }
    .await;
    stop(server);
    outcome
}

/// One HTTP/2 connection per chunk of `ids`, each with an event stream on
/// every session of its chunk; what keeps them open.
async fn open_h2(addr: &str, chunks: Vec<Vec<String>>) -> Result<Vec<H2Streams>> {
    let at_once = std::sync::Arc::new(Semaphore::new(H2_CONNS_AT_ONCE));
    let tasks: Vec<_> = chunks
        .into_iter()
        .map(|ids| {
            let (addr, at_once) = (addr.to_string(), at_once.clone());
            tokio::spawn(async move {
                let _turn = at_once.acquire().await?;
                H2Streams::open(&addr, &ids).await
            })
        })
        .collect();
    let mut held = Vec::with_capacity(tasks.len());
    for task in tasks {
        held.push(task.await??);
    }
    Ok(held)
}

/// Event streams held open on one HTTP/2 connection (h2c, prior knowledge).
struct H2Streams {
    _client: h2::client::SendRequest<Bytes>,
    _bodies: Vec<h2::RecvStream>,
}

impl H2Streams {
    async fn open(addr: &str, ids: &[String]) -> Result<Self> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let (mut client, connection) = h2::client::Builder::new()
            // Heartbeats nobody reads here must not stall the connection.
            .initial_connection_window_size(1 << 30)
            .handshake::<_, Bytes>(tcp)
            .await?;
        tokio::spawn(connection);
        let mut responses = Vec::with_capacity(ids.len());
        for id in ids {
            client = client.ready().await?;
            let request =
                http::Request::get(format!("http://{addr}/v1/sessions/{id}/events")).body(())?;
            responses.push(client.send_request(request, true)?.0);
        }
        let mut bodies = Vec::with_capacity(ids.len());
        for response in responses {
            let response = response.await.context("HTTP/2 event stream")?;
            if response.status() != 200 {
                bail!("events over HTTP/2: HTTP {}", response.status());
            }
            bodies.push(response.into_body());
        }
        Ok(Self {
            _client: client,
            _bodies: bodies,
        })
    }
}

/// The table's row for [`held_over_h2`]; `claude_per` (KiB) when measured.
pub fn held_row(t: &mut Table, extra: &mut Vec<String>, held: &Held, claude_per: Option<f64>) {
    let per = held.rss_kib.saturating_sub(held.base_kib) as f64 / held.sessions.max(1) as f64;
    let claude = claude_per.map_or("not measured".into(), |per| {
        format!(
            "~{:.0} by RAM (extrapolated)",
            mem_total_kib() as f64 / per.max(1.0)
        )
    });
    t.target(
        &[
            "live sessions with SSE held by one process (HTTP/2 streams)",
            &format!(
                "{} (server RSS {}, {} per session)",
                held.sessions,
                kib(held.rss_kib as f64),
                kib(per)
            ),
            &claude,
            "",
            "100 000 (within 2 GiB)",
        ],
        held.sessions >= TARGET_HELD
            // Live sessions include the warm-up connection's streams.
            && held.live >= (held.sessions + STREAMS_PER_H2_CONN) as f64
            && held.rss_kib <= TARGET_HELD_RSS_KIB,
    );
    extra.push(format!(
        "held: {} sessions created over {CREATING_CONNS} HTTP/1 connections in {:.1} s, then \
         an SSE stream on each over {} HTTP/2 cleartext connections ({STREAMS_PER_H2_CONN} \
         streams each, {H2_CONNS_AT_ONCE} connections opening at once) in {:.1} s; {} live; \
         server RSS {} KiB over a {} KiB base (one connection of {STREAMS_PER_H2_CONN} streams \
         held as warm-up).",
        held.sessions,
        held.create.as_secs_f64(),
        held.connections,
        held.open.as_secs_f64(),
        held.live,
        held.rss_kib,
        held.base_kib
    ));
}
