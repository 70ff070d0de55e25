//! Fan-out across cluster nodes (issue 11): events/s and append-to-delivery
//! latency with streams on every node, one `agentd serve` on PostgreSQL
//! against several on the same database.
//!
//!     cluster [--agentd PATH] [--database URL] [--nodes 1,3] [--sessions N]
//!             [--turns N] [--clients N] [--kib N] [--smoke]
//!
//! What a run does is described in `bench/src/peer/cluster.rs` (shared with
//! the peer table's cluster rows). The database is `--database` or
//! `AGENTD_TEST_POSTGRES_URL` (`bench/cluster.sh` starts a throwaway one).

#[allow(dead_code)]
#[path = "../peer/client.rs"]
mod client;
#[allow(dead_code)]
#[path = "../peer/cluster.rs"]
mod cluster;
#[allow(dead_code)]
#[path = "../peer/processes.rs"]
mod processes;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use cluster::FanOut;

struct Args {
    agentd: PathBuf,
    database: String,
    nodes: Vec<usize>,
    load: FanOut,
}

fn args() -> Result<Args> {
    let mut args = Args {
        agentd: PathBuf::from("target/release/agentd"),
        database: cluster::database_from_env().unwrap_or_default(),
        nodes: vec![1, 3],
        load: FanOut::SATURATION,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--smoke" {
            args.load = FanOut::SMOKE;
            continue;
        }
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        let load = &mut args.load;
        match flag.as_str() {
            "--agentd" => args.agentd = value.into(),
            "--database" => args.database = value,
            "--nodes" => args.nodes = value.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--sessions" => load.sessions = value.parse()?,
            "--turns" => load.turns = value.parse()?,
            "--clients" => load.clients = value.parse()?,
            "--kib" => load.kib = value.parse()?,
            _ => bail!("unknown flag {flag}"),
        }
    }
    if args.database.is_empty() {
        bail!("no database: pass --database postgres://… or run bench/cluster.sh");
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = args()?;
    processes::raise_nofile();
    let root = tempfile::tempdir()?;
    let load = args.load;
    let script_file = root.path().join("script.json");
    std::fs::write(&script_file, load.script().to_string())?;
    let (model, model_url) = processes::start_model_server(&args.agentd, &script_file)?;
    println!(
        "cluster fan-out: {} sessions × {} turns, {} SSE clients each (spread over the nodes), ~{} KiB of text per turn",
        load.sessions, load.turns, load.clients, load.kib
    );
    println!(
        "| nodes | turns | wall | events appended/s | deliveries/s | latency p50 / p99 / max |"
    );
    println!("|---|---|---|---|---|---|");
    let mut result = Ok(());
    for &nodes in &args.nodes {
        let run = cluster::fan_out(
            &args.agentd,
            &args.database,
            root.path(),
            &model_url,
            nodes,
            &load,
            cluster::Placement::Spread,
        );
        match run.await {
            Ok(o) => println!(
                "| {nodes} | {} | {} |",
                load.sessions * load.turns,
                o.cells()
            ),
            Err(err) => {
                result = Err(err.context(format!("{nodes} node(s)")));
                break;
            }
        }
    }
    processes::stop(model);
    result
}
