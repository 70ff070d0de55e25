//! Event throughput and running turns (issue 29): events appended and delivered
//! to live SSE clients per second (`events`), and with thousands of turns
//! running at once, delivery latency and the server's RSS per running turn
//! (`turns5000`). Both run against a model server of their own, whose script
//! streams many small deltas (`events`) or slow tokens (`turns5000`).

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::args::Args;
use super::client::{Conn, metric, post_message, watch};
use super::processes::{rss_kib, start_model_server, start_serve, stop};
use super::report::{Table, kib};
use super::scenarios::Ctx;

/// The rate scenario's shape: sessions, turns each, deltas per model reply.
#[derive(Debug, Clone, Copy)]
pub struct RateLoad {
    pub sessions: usize,
    pub turns: usize,
    pub blocks: usize,
}

/// The running-turns scenario's shape.
#[derive(Debug, Clone, Copy)]
pub struct RunningLoad {
    pub turns: usize,
    /// Pause between the model's streamed chunks; each token then becomes
    /// an event of its own (the engine coalesces for 50 ms at most).
    pub delay_ms: u64,
    /// Tokens (three words each) per reply.
    pub tokens: usize,
}

/// Text blocks of one word each: the engine sends one `message.delta` per
/// block (a new block flushes the coalescer), so a reply is `blocks` events
/// with no waiting, as fast as the model server streams them.
fn script(load: &RateLoad, running: &RunningLoad) -> Value {
    let blocks: Vec<Value> = (0..load.blocks)
        .map(|i| json!({"type": "text", "text": format!("d{i} ")}))
        .collect();
    let slow = "tok en s ".repeat(running.tokens);
    json!({"replies": [
        {"repeat": true, "when": {"last_user_contains": "events turn"}, "content": blocks},
        {"repeat": true, "when": {"last_user_contains": "slow turn"}, "delay_ms": running.delay_ms,
         "content": [{"type": "text", "text": slow}]},
        {"repeat": true, "content": [{"type": "text", "text": "ok"}]}
    ]})
}

/// What `run` measured, for the table.
#[derive(Debug, Default)]
struct Rate {
    wall: Duration,
    appended: f64,
    delivered: u64,
    p50_ms: f64,
    p99_ms: f64,
}

#[derive(Debug, Default)]
struct Running {
    turns: usize,
    running_peak: f64,
    deliveries: u64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    idle_rss_kib: u64,
    running_rss_kib: u64,
    wall: Duration,
}

/// The scenarios `args` asks for, as rows of `t` (and notes in `extra`).
pub async fn run(args: &Args, ctx: &Ctx, t: &mut Table, extra: &mut Vec<String>) -> Result<()> {
    let script_path = ctx.root.join("events.json");
    std::fs::write(
        &script_path,
        script(&args.events_rate, &args.events_running).to_string(),
    )?;
    let (model, url) = start_model_server(&ctx.agentd, &script_path)?;
    let outcome = async {
        if args.wants("events") {
            let l = args.events_rate;
            eprintln!(
                "[events] {} sessions × {} turns × {} deltas, an SSE client each",
                l.sessions, l.turns, l.blocks
            );
            let rate = rate(ctx, &url, &l).await?;
            let secs = rate.wall.as_secs_f64();
            let (appended, delivered) = (rate.appended / secs, rate.delivered as f64 / secs);
            t.target(
                &[
                    "events appended / delivered to live clients per s, one node, SQLite",
                    &format!(
                        "{appended:.0} / {delivered:.0} ({} sessions streaming at once, p50 / p99 \
                         delivery {:.1} / {:.1} ms)",
                        l.sessions, rate.p50_ms, rate.p99_ms
                    ),
                    "",
                    "",
                    "≥ 50 000",
                ],
                // A delivery lost (fewer delivered than appended) or a missing
                // metric (NaN) is a miss, whatever the rate.
                appended.is_finite() && delivered >= appended && appended >= 50_000.0,
            );
        }
        if args.wants("turns5000") {
            let l = args.events_running;
            eprintln!(
                "[turns5000] {} turns at once, a token every {} ms",
                l.turns, l.delay_ms
            );
            let r = running(ctx, &url, &l).await?;
            t.target(
                &[
                    &format!("p99 delivery with {} running turns", r.turns),
                    &format!(
                        "{:.1} ms (p50 {:.1}, max {:.0}; {} deliveries, {:.0} running at peak)",
                        r.p99_ms, r.p50_ms, r.max_ms, r.deliveries, r.running_peak
                    ),
                    "",
                    "",
                    "< 50 ms",
                ],
                // Only if (nearly) all of them really ran at once.
                r.p99_ms < 50.0 && r.running_peak >= 0.95 * r.turns as f64,
            );
            // Per turn running when sampled (not per turn posted: the first may
            // end before the last starts on a loaded machine).
            let per = r.running_rss_kib.saturating_sub(r.idle_rss_kib) as f64 / r.running_peak;
            t.target(
                &[
                    "server RSS per running turn (native engine)",
                    &format!(
                        "{} (RSS {} idle → {} with {:.0} running)",
                        kib(per),
                        kib(r.idle_rss_kib as f64),
                        kib(r.running_rss_kib as f64),
                        r.running_peak
                    ),
                    "",
                    "",
                    "≤ 1 MiB",
                ],
                per <= 1024.0 && r.running_peak >= 0.95 * r.turns as f64,
            );
            extra.push(format!(
                "events / running turns: the rate row is {} sessions with one SSE client each, \
                 {} turns back to back, each one model reply of {} one-word text blocks (one \
                 `message.delta` each); appended from `agentd_events_total`, delivered = events \
                 parsed by the clients, both over the wall time. The running-turns rows: {} \
                 sessions with an SSE stream each, a turn posted on each (posts over 64 \
                 connections), the model streaming a token every {} ms ({} tokens; the \
                 scenario took {:.0} s), so they run at once (no per-node cap applies without a cluster; RSS per turn is over the turns running when sampled); \
                 latency = receipt − the event's stored `at`; RSS idle = all sessions and \
                 streams open, no turn; RSS running = sampled when `agentd_turns_running` peaks.",
                args.events_rate.sessions,
                args.events_rate.turns,
                args.events_rate.blocks,
                l.turns,
                l.delay_ms,
                l.tokens,
                r.wall.as_secs_f64()
            ));
        }
        anyhow::Ok(())
    }
    .await;
    stop(model);
    outcome
}

/// Quantiles of microsecond latencies, in ms.
fn quantiles(latencies: &mut [u64]) -> impl Fn(f64) -> f64 + '_ {
    latencies.sort_unstable();
    |p: f64| agentd_bench::quantile_ms(latencies, p)
}

/// Sessions, each with its SSE stream open, created over a few connections.
async fn sessions_with_streams(addr: &str, n: usize) -> Result<Vec<(String, Conn)>> {
    let ids = super::scenarios::create_many(addr, n).await?;
    let mut out = Vec::with_capacity(n);
    for chunk in ids.chunks(256) {
        let tasks: Vec<_> = chunk
            .iter()
            .map(|id| {
                let (addr, id) = (addr.to_string(), id.clone());
                tokio::spawn(async move {
                    let events = Conn::open(&addr).await?.events(&id).await?;
                    anyhow::Ok((id, events))
                })
            })
            .collect();
        for task in tasks {
            out.push(task.await??);
        }
    }
    Ok(out)
}

async fn rate(ctx: &Ctx, url: &str, load: &RateLoad) -> Result<Rate> {
    let data = ctx.root.join("agentd-events");
    std::fs::create_dir_all(&data)?;
    let (server, addr) = start_serve(&ctx.agentd, &data, url).await?;
    let outcome = async {
        let prepared = sessions_with_streams(&addr, load.sessions).await?;
        let events0 = metric(&addr, "agentd_events_total").await?;
        let started = Instant::now();
        let turns = load.turns;
        let tasks: Vec<_> = prepared
            .into_iter()
            .map(|(id, mut events)| {
                let addr = addr.clone();
                tokio::spawn(async move {
                    let mut conn = Conn::open(&addr).await?;
                    let mut latencies = Vec::new();
                    for turn in 0..turns {
                        post_message(&mut conn, &id, &format!("events turn {turn}")).await?;
                        watch(&mut events, 1, &mut latencies).await?;
                    }
                    anyhow::Ok(latencies)
                })
            })
            .collect();
        let mut latencies = super::scenarios::gather(tasks).await?;
        let wall = started.elapsed();
        let appended = metric(&addr, "agentd_events_total").await? - events0;
        let delivered = latencies.len() as u64;
        let q = quantiles(&mut latencies);
        Ok(Rate {
            wall,
            appended,
            delivered,
            p50_ms: q(0.5),
            p99_ms: q(0.99),
        })
    }
    .await;
    stop(server);
    outcome
}

/// Connections the running-turns scenario posts its messages over.
const POSTERS: usize = 64;

async fn running(ctx: &Ctx, url: &str, load: &RunningLoad) -> Result<Running> {
    let data = ctx.root.join("agentd-running");
    std::fs::create_dir_all(&data)?;
    let (server, addr) = start_serve(&ctx.agentd, &data, url).await?;
    let pid = server.id();
    let outcome = async {
        let prepared = sessions_with_streams(&addr, load.turns).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let idle_rss_kib = rss_kib(pid);
        let started = Instant::now();
        let (ids, streams): (Vec<String>, Vec<Conn>) = prepared.into_iter().unzip();
        let watchers: Vec<_> = streams
            .into_iter()
            .map(|mut events| {
                tokio::spawn(async move {
                    let mut latencies = Vec::new();
                    watch(&mut events, 1, &mut latencies).await?;
                    anyhow::Ok(latencies)
                })
            })
            .collect();
        let posters: Vec<_> = ids
            .chunks(ids.len().div_ceil(POSTERS).max(1))
            .map(|chunk| {
                let (addr, chunk) = (addr.clone(), chunk.to_vec());
                tokio::spawn(async move {
                    let mut conn = Conn::open(&addr).await?;
                    for id in chunk {
                        post_message(&mut conn, &id, "slow turn").await?;
                    }
                    anyhow::Ok(())
                })
            })
            .collect();
        for poster in posters {
            poster.await??;
        }
        // Sample RSS while the turns run; keep the sample at the most running.
        let (mut running_peak, mut running_rss_kib) = (0.0, 0);
        let mut ended = 0;
        while ended < watchers.len() {
            let now = metric(&addr, "agentd_turns_running").await?;
            if now >= running_peak {
                running_peak = now;
                running_rss_kib = running_rss_kib.max(rss_kib(pid));
            }
            if now == 0.0 {
                break;
            }
            ended = watchers.iter().filter(|w| w.is_finished()).count();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let mut latencies = super::scenarios::gather(watchers).await?;
        let wall = started.elapsed();
        if running_peak < 1.0 {
            bail!("no turn was seen running");
        }
        let deliveries = latencies.len() as u64;
        let q = quantiles(&mut latencies);
        Ok(Running {
            turns: load.turns,
            running_peak,
            deliveries,
            p50_ms: q(0.5),
            p99_ms: q(0.99),
            max_ms: q(1.0),
            idle_rss_kib,
            running_rss_kib,
            wall,
        })
    }
    .await;
    stop(server);
    outcome
}
