//! Several `agentd serve` nodes on one PostgreSQL: fan-out across nodes
//! (events/s and append-to-delivery latency, the `cluster` binary and the
//! peer table's cross-node row) and, in [`crate::failover`], how fast a
//! killed node's turns end and that a paused one keeps its turns.
//!
//! Fan-out: each session has `clients` SSE streams spread over the nodes
//! (client `j` of session `s` on node `(s + j) % nodes`), and its turns are
//! posted round-robin to the nodes, so whoever runs a turn, most streams
//! watch it from another node ([`Placement::Spread`]; [`Placement::Local`]
//! puts a session's streams and turns on one node, so nothing is relayed:
//! the same nodes and load, less the relay). Each turn is one model call streaming `kib`
//! KiB of text (one stored event per KiB, coalesced). Latency = receipt time
//! − the event's stored `at` (the database clock at insert, ms resolution).

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{Value, json};

use crate::client::{Conn, create_session, metric, post_queued, watch};
use crate::processes::{self, stop};

/// The load of one fan-out run.
#[derive(Debug, Clone, Copy)]
pub struct FanOut {
    pub sessions: usize,
    pub turns: usize,
    pub clients: usize,
    pub kib: usize,
}

impl FanOut {
    /// The recorded load (bench/RESULTS.md, "Cluster"): enough to saturate
    /// the 2 cores with three nodes.
    pub const SATURATION: Self = Self {
        sessions: 30,
        turns: 5,
        clients: 3,
        kib: 32,
    };
    pub const SMOKE: Self = Self {
        sessions: 2,
        turns: 1,
        clients: 2,
        kib: 4,
    };

    /// The scripted model's reply: `kib` KiB of text per turn.
    pub fn script(&self) -> Value {
        let text = "The scripted model streams a long reply to fan out. ".repeat(self.kib * 20);
        json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": text}]}]})
    }
}

/// Where a session's streams and turns go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Stream `j` of session `s` on node `(s + j) % nodes`, turn `t` on node
    /// `(s + t) % nodes`: most deliveries are relayed by another node.
    Spread,
    /// Everything of session `s` on node `s % nodes`: no delivery is relayed.
    Local,
}

pub struct Outcome {
    pub wall: Duration,
    pub appended: f64,
    pub deliveries: usize,
    /// Sorted.
    pub latencies_us: Vec<u64>,
}

impl Outcome {
    /// `| wall | events appended/s | deliveries/s | latency p50 / p99 / max |`
    pub fn cells(&self) -> String {
        let secs = self.wall.as_secs_f64();
        format!(
            "{:.2} s | {:.0} | {:.0} | {:.1} / {:.1} / {:.1} ms",
            secs,
            self.appended / secs,
            self.deliveries as f64 / secs,
            self.quantile_ms(0.5),
            self.quantile_ms(0.99),
            self.quantile_ms(1.0),
        )
    }

    pub fn quantile_ms(&self, q: f64) -> f64 {
        agentd_bench::quantile_ms(&self.latencies_us, q)
    }
}

/// The database of the cluster runs: `AGENTD_TEST_POSTGRES_URL` (set by
/// `bench/cluster.sh` and `bench/peer.sh`, which start a throwaway one).
pub fn database_from_env() -> Option<String> {
    std::env::var("AGENTD_TEST_POSTGRES_URL")
        .ok()
        .filter(|url| !url.is_empty())
}

/// A database URL whose `search_path` is a new, empty schema.
pub async fn fresh_schema(base: &str, name: &str) -> Result<String> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(base).await?;
    // A previous run's nodes, killed, may still have a statement running
    // there (their search indexer's, say): the drop can deadlock with it.
    let mut attempt = 0;
    while let Err(err) = sqlx::query(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
        .execute(&mut conn)
        .await
    {
        attempt += 1;
        if attempt == 5 {
            return Err(err.into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    sqlx::query(&format!("CREATE SCHEMA {name}"))
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    let sep = if base.contains('?') { '&' } else { '?' };
    Ok(format!("{base}{sep}options=-c%20search_path%3D{name}"))
}

/// Nodes of one cluster run; killed when dropped.
pub struct Nodes {
    pub children: Vec<Option<Child>>,
    pub addrs: Vec<String>,
    pub data: Vec<PathBuf>,
}

impl Nodes {
    /// `count` nodes of a cluster on `db`, data dirs `root/<prefix>-<i>`.
    pub async fn start(
        agentd: &Path,
        root: &Path,
        prefix: &str,
        model_url: &str,
        db: &str,
        count: usize,
    ) -> Result<Self> {
        let mut nodes = Self {
            children: Vec::new(),
            addrs: Vec::new(),
            data: Vec::new(),
        };
        for i in 0..count {
            let data = root.join(format!("{prefix}-{i}"));
            std::fs::create_dir_all(&data)?;
            let database = format!("[database]\nurl = \"{db}\"\n");
            let (child, addr) =
                processes::start_serve_with(agentd, &data, model_url, &database).await?;
            nodes.children.push(Some(child));
            nodes.addrs.push(addr);
            nodes.data.push(data);
        }
        Ok(nodes)
    }

    /// The node's cluster id (kept in its data dir).
    pub fn node_id(&self, i: usize) -> Result<String> {
        Ok(std::fs::read_to_string(self.data[i].join("node_id"))?
            .trim()
            .to_string())
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for child in self.children.iter_mut().filter_map(Option::take) {
            stop(child);
        }
    }
}

/// One fan-out run with `nodes` nodes on a fresh schema of `database`.
pub async fn fan_out(
    agentd: &Path,
    database: &str,
    root: &Path,
    model_url: &str,
    nodes: usize,
    load: &FanOut,
    placement: Placement,
) -> Result<Outcome> {
    let name = match placement {
        Placement::Spread => format!("n{nodes}"),
        Placement::Local => format!("n{nodes}_local"),
    };
    let db = fresh_schema(database, &format!("bench_cluster_{name}")).await?;
    let cluster = Nodes::start(agentd, root, &name, model_url, &db, nodes).await?;
    measure(load, &cluster.addrs, placement).await
}

async fn measure(load: &FanOut, addrs: &[String], placement: Placement) -> Result<Outcome> {
    let nodes = addrs.len();
    let node = |s: usize, j: usize| match placement {
        Placement::Spread => (s + j) % nodes,
        Placement::Local => s % nodes,
    };
    let mut sessions = Vec::new();
    let mut first = Conn::open(&addrs[0]).await?;
    for _ in 0..load.sessions {
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
        for j in 0..load.clients {
            let addr = &addrs[node(s, j)];
            let mut stream = Conn::open(addr).await?.events(id).await?;
            let turns = load.turns;
            readers.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                watch(&mut stream, turns, &mut latencies).await?;
                anyhow::Ok(latencies)
            }));
        }
        let turn_nodes: Vec<usize> = (0..load.turns).map(|turn| node(s, turn)).collect();
        let (id, addrs) = (id.clone(), addrs.to_vec());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut conns = Vec::new();
            for addr in &addrs {
                conns.push(Conn::open(addr).await?);
            }
            for (turn, node) in turn_nodes.into_iter().enumerate() {
                // Queued behind the previous turn (spread: on another node each time).
                let conn = &mut conns[node];
                post_queued(conn, &id, &format!("bench turn {turn}")).await?;
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
