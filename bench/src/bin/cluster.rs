//! Fan-out across cluster nodes (issue 11): events/s and append-to-delivery
//! latency with streams on every node, one `agentd serve` on PostgreSQL
//! against several on the same database.
//!
//!     cluster [--agentd PATH] [--database URL] [--nodes 1,3] [--sessions N]
//!             [--turns N] [--clients N] [--kib N] [--smoke]
//!
//! Each session has `clients` SSE streams spread over the nodes (client `j` of
//! session `s` on node `(s + j) % nodes`), and its turns are posted round-robin
//! to the nodes, so whoever runs a turn, most streams watch it from another
//! node. Each turn is one model call streaming `kib` KiB of text (one stored
//! event per KiB, coalesced). The database is `--database` or
//! `AGENTD_TEST_POSTGRES_URL` (`bench/cluster.sh` starts a throwaway one).

#[allow(dead_code)]
#[path = "../peer/client.rs"]
mod client;
#[allow(dead_code)]
#[path = "../peer/processes.rs"]
mod processes;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use client::{Conn, create_session, metric};
use processes::{now_us, stop};
use serde_json::json;

struct Args {
    agentd: PathBuf,
    database: String,
    nodes: Vec<usize>,
    sessions: usize,
    turns: usize,
    clients: usize,
    kib: usize,
}

fn args() -> Result<Args> {
    let mut args = Args {
        agentd: PathBuf::from("target/release/agentd"),
        database: std::env::var("AGENTD_TEST_POSTGRES_URL").unwrap_or_default(),
        nodes: vec![1, 3],
        sessions: 30,
        turns: 5,
        clients: 3,
        kib: 32,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--smoke" {
            (args.sessions, args.turns, args.clients, args.kib) = (2, 1, 2, 4);
            continue;
        }
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--agentd" => args.agentd = value.into(),
            "--database" => args.database = value,
            "--nodes" => args.nodes = value.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--sessions" => args.sessions = value.parse()?,
            "--turns" => args.turns = value.parse()?,
            "--clients" => args.clients = value.parse()?,
            "--kib" => args.kib = value.parse()?,
            _ => bail!("unknown flag {flag}"),
        }
    }
    if args.database.is_empty() {
        bail!("no database: pass --database postgres://… or run bench/cluster.sh");
    }
    Ok(args)
}

/// A database URL whose `search_path` is a new, empty schema.
async fn fresh_schema(base: &str, name: &str) -> Result<String> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(base).await?;
    sqlx::query(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
        .execute(&mut conn)
        .await?;
    sqlx::query(&format!("CREATE SCHEMA {name}"))
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    let sep = if base.contains('?') { '&' } else { '?' };
    Ok(format!("{base}{sep}options=-c%20search_path%3D{name}"))
}

/// `agentd serve` as one node; returns it and its `host:port`.
async fn start_node(
    agentd: &Path,
    data: &Path,
    model_url: &str,
    db: &str,
) -> Result<(Child, String)> {
    std::fs::create_dir_all(data)?;
    let database = format!("[database]\nurl = \"{db}\"\n");
    processes::start_serve_with(agentd, data, model_url, &database).await
}

struct Outcome {
    wall: Duration,
    appended: f64,
    deliveries: usize,
    latencies_us: Vec<u64>,
}

async fn run_level(args: &Args, root: &Path, model_url: &str, nodes: usize) -> Result<Outcome> {
    let db = fresh_schema(&args.database, &format!("bench_cluster_{nodes}")).await?;
    let mut children = Vec::new();
    let mut addrs = Vec::new();
    for i in 0..nodes {
        let data = root.join(format!("n{nodes}-{i}"));
        let (child, addr) = start_node(&args.agentd, &data, model_url, &db).await?;
        children.push(child);
        addrs.push(addr);
    }
    let outcome = measure(args, &addrs).await;
    for child in children {
        stop(child);
    }
    outcome
}

async fn measure(args: &Args, addrs: &[String]) -> Result<Outcome> {
    let nodes = addrs.len();
    let mut sessions = Vec::new();
    let mut first = Conn::open(&addrs[0]).await?;
    for _ in 0..args.sessions {
        sessions.push(create_session(&mut first).await?);
    }
    let mut appended0 = 0.0;
    for addr in addrs {
        appended0 += metric(addr, "agentd_events_total").await?;
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (s, id) in sessions.iter().enumerate() {
        // Clients first (each reads until it has seen every turn end).
        let mut readers = Vec::new();
        for j in 0..args.clients {
            let addr = &addrs[(s + j) % nodes];
            let mut stream = Conn::open(addr).await?.events(id).await?;
            let turns = args.turns;
            readers.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut finished = 0;
                while finished < turns {
                    let (kind, at) = stream.next_event().await?;
                    latencies.push((now_us() - at).max(0) as u64);
                    finished += usize::from(kind == "turn.finished");
                }
                anyhow::Ok(latencies)
            }));
        }
        let (id, addrs, turns) = (id.clone(), addrs.to_vec(), args.turns);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut conns = Vec::new();
            for addr in &addrs {
                conns.push(Conn::open(addr).await?);
            }
            for turn in 0..turns {
                // Queued behind the previous turn, on another node each time.
                let conn = &mut conns[(s + turn) % addrs.len()];
                let body = json!({"content": format!("bench turn {turn}"), "queue": true});
                let (status, reply) = conn
                    .request(
                        "POST",
                        &format!("/v1/sessions/{id}/messages"),
                        &body.to_string(),
                    )
                    .await?;
                if status != 202 {
                    bail!("message: HTTP {status} {reply}");
                }
            }
            for reader in readers {
                latencies.extend(reader.await??);
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    let wall = started.elapsed();
    let mut appended = 0.0;
    for addr in addrs {
        appended += metric(addr, "agentd_events_total").await?;
    }
    latencies.sort_unstable();
    Ok(Outcome {
        wall,
        appended: appended - appended0,
        deliveries: latencies.len(),
        latencies_us: latencies,
    })
}

fn quantile_ms(sorted: &[u64], q: f64) -> f64 {
    sorted
        .get(((sorted.len().saturating_sub(1)) as f64 * q) as usize)
        .map_or(f64::NAN, |us| *us as f64 / 1000.0)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = args()?;
    processes::raise_nofile();
    let root = tempfile::tempdir()?;
    let text: String = "The scripted model streams a long reply to fan out. ".repeat(args.kib * 20);
    let script =
        json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": text}]}]});
    let script_file = root.path().join("script.json");
    std::fs::write(&script_file, script.to_string())?;
    let (model, model_url) = processes::start_model_server(&args.agentd, &script_file)?;
    println!(
        "cluster fan-out: {} sessions × {} turns, {} SSE clients each (spread over the nodes), ~{} KiB of text per turn",
        args.sessions, args.turns, args.clients, args.kib
    );
    println!(
        "| nodes | turns | wall | events appended/s | deliveries/s | latency p50 / p99 / max |"
    );
    println!("|---|---|---|---|---|---|");
    let mut result = Ok(());
    for &nodes in &args.nodes {
        match run_level(&args, root.path(), &model_url, nodes).await {
            Ok(o) => println!(
                "| {nodes} | {} | {:.2} s | {:.0} | {:.0} | {:.1} / {:.1} / {:.1} ms |",
                args.sessions * args.turns,
                o.wall.as_secs_f64(),
                o.appended / o.wall.as_secs_f64(),
                o.deliveries as f64 / o.wall.as_secs_f64(),
                quantile_ms(&o.latencies_us, 0.5),
                quantile_ms(&o.latencies_us, 0.99),
                quantile_ms(&o.latencies_us, 1.0),
            ),
            Err(err) => {
                result = Err(err.context(format!("{nodes} node(s)")));
                break;
            }
        }
    }
    stop(model);
    result
}
