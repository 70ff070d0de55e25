//! Failover across cluster nodes (issue 29), three nodes on one PostgreSQL
//! with the default `[cluster]` settings, every turn a slow model reply:
//!
//! - kill: `kill -9` the node holding the most running turns; each of its
//!   turns is timed from the kill to its `turn.finished` as a client on a
//!   surviving node sees it;
//! - pause: `SIGSTOP` the node holding the most running turns (of new
//!   sessions) for 2 s, then `SIGCONT`: every turn must end `completed`, none
//!   taken over (finished as interrupted) by another node.
//!
//! The nodes have run for a whole lease timeout before the kill: a node that
//! has not beaten steadily that long takes no other node's leases (the guard
//! against taking over after a database outage).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use sqlx::Row;
use tokio::sync::mpsc;

use crate::client::{Conn, create_session, post_queued};
use crate::cluster::{Nodes, fresh_schema};
use crate::processes;

/// The default `[cluster] lease_timeout_s` (the nodes run with defaults).
const LEASE_TIMEOUT: Duration = Duration::from_secs(4);
/// The GC-like pause no node may be taken over for.
const PAUSE: Duration = Duration::from_secs(2);
const NODES: usize = 3;

pub struct Failover {
    /// Kill to `turn.finished` on a survivor, per turn of the killed node.
    pub kill_to_finished: Vec<Duration>,
    /// Turns the paused node held when stopped.
    pub paused_turns: usize,
    /// Turns (of every node) that ended other than `completed` in the pause run.
    pub not_completed: usize,
    /// Turns of the pause run.
    pub pause_run_turns: usize,
}

impl Failover {
    pub fn slowest(&self) -> Duration {
        self.kill_to_finished
            .iter()
            .max()
            .copied()
            .unwrap_or_default()
    }

    pub fn median(&self) -> Duration {
        agentd_bench::quantile(&mut self.kill_to_finished.clone(), 0.5)
    }
}

/// A model reply of ~`secs` seconds: 3 words per streamed chunk, 250 ms apart.
fn slow_script(secs: u64) -> Value {
    let words = "slow ".repeat(usize::try_from(secs * 4 * 3).unwrap_or(96));
    json!({"replies": [{"repeat": true, "delay_ms": 250,
        "content": [{"type": "text", "text": words}]}]})
}

/// Both runs; `sessions` turns at once in each.
pub async fn run(agentd: &Path, database: &str, root: &Path, sessions: usize) -> Result<Failover> {
    let script = root.join("failover-script.json");
    std::fs::write(&script, slow_script(8).to_string())?;
    let (model, model_url) = processes::start_model_server(agentd, &script)?;
    let outcome = run_with(agentd, database, root, &model_url, sessions).await;
    processes::stop(model);
    outcome
}

async fn run_with(
    agentd: &Path,
    database: &str,
    root: &Path,
    model_url: &str,
    sessions: usize,
) -> Result<Failover> {
    let db = fresh_schema(database, "bench_failover").await?;
    let mut nodes = Nodes::start(agentd, root, "failover", model_url, &db, NODES).await?;
    let started = Instant::now();
    let pg = sqlx::PgPool::connect(&db).await?;

    // Kill.
    let turns = Turns::start(&nodes, &pg, sessions).await?;
    // Survivors take over only after beating steadily for a whole timeout.
    tokio::time::sleep((LEASE_TIMEOUT + Duration::from_secs(1)).saturating_sub(started.elapsed()))
        .await;
    let victim = turns.busiest(&nodes)?;
    let victims = turns.held_by(&nodes.node_id(victim)?);
    let child = nodes.children[victim].take().context("node gone")?;
    let killed = Instant::now();
    processes::stop(child);
    let finished = turns.finished_on_others(victim, &victims).await?;
    // A turn that ended before the kill was no failover: an error, not 0 ms.
    let kill_to_finished = finished
        .iter()
        .map(|at| at.checked_duration_since(killed).filter(|d| !d.is_zero()))
        .collect::<Option<Vec<_>>>()
        .context("a victim's turn finished before the kill (the machine too slow?)")?;

    // Pause, on new sessions over the two nodes left.
    let turns = Turns::start(&nodes, &pg, sessions).await?;
    let paused = turns.busiest(&nodes)?;
    let paused_turns = turns.held_by(&nodes.node_id(paused)?).len();
    let pid = nodes.children[paused].as_ref().context("node gone")?.id();
    signal(pid, libc::SIGSTOP)?;
    tokio::time::sleep(PAUSE).await;
    signal(pid, libc::SIGCONT)?;
    let all: Vec<String> = turns.sessions.clone();
    turns.finished_on_others(usize::MAX, &all).await?;
    let not_completed = not_completed(&pg, &all).await?;
    pg.close().await;
    Ok(Failover {
        kill_to_finished,
        paused_turns,
        not_completed,
        pause_run_turns: all.len(),
    })
}

#[allow(unsafe_code)]
fn signal(pid: u32, signal: libc::c_int) -> Result<()> {
    // SAFETY: kill(2) on a child process this harness started and has not reaped.
    let sent = unsafe { libc::kill(pid as libc::pid_t, signal) };
    if sent != 0 {
        bail!("kill({pid}, {signal}): {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// Turns of the pause run whose `turn.finished` is not `completed`.
async fn not_completed(pg: &sqlx::PgPool, sessions: &[String]) -> Result<usize> {
    let rows = sqlx::query(
        "SELECT data FROM events WHERE type = 'turn.finished' AND session_id = ANY($1)",
    )
    .bind(sessions)
    .fetch_all(pg)
    .await?;
    let mut bad = sessions.len().saturating_sub(rows.len());
    for row in rows {
        let data: String = row.try_get(0)?;
        let event: Value = serde_json::from_str(&data)?;
        if event["status"] != "completed" {
            eprintln!("  turn not completed after the pause: {data}");
            bad += 1;
        }
    }
    Ok(bad)
}

/// One turn running in each of some new sessions, watched from every node.
struct Turns {
    sessions: Vec<String>,
    /// Session → the node running its turn.
    owners: HashMap<String, String>,
    /// `(session, node index, when)` of each `turn.finished` a stream saw.
    finished: mpsc::UnboundedReceiver<(String, usize, Instant)>,
}

impl Turns {
    /// Sessions with a stream on every live node, a turn posted to each
    /// (spread over the nodes), returned once every turn holds a lease.
    async fn start(nodes: &Nodes, pg: &sqlx::PgPool, count: usize) -> Result<Self> {
        let live: Vec<usize> = (0..nodes.addrs.len())
            .filter(|&i| nodes.children[i].is_some())
            .collect();
        let mut conn = Conn::open(&nodes.addrs[live[0]]).await?;
        let (tx, finished) = mpsc::unbounded_channel();
        let mut sessions = Vec::new();
        for s in 0..count {
            let id = create_session(&mut conn).await?;
            for &node in &live {
                let mut stream = Conn::open(&nodes.addrs[node]).await?.events(&id).await?;
                let (tx, id) = (tx.clone(), id.clone());
                tokio::spawn(async move {
                    // A killed node's streams end in an error: nothing to report.
                    while let Ok((kind, _)) = stream.next_event().await {
                        if kind == "turn.finished" {
                            let _ = tx.send((id, node, Instant::now()));
                            return;
                        }
                    }
                });
            }
            let mut poster = Conn::open(&nodes.addrs[live[s % live.len()]]).await?;
            post_queued(&mut poster, &id, "slow turn").await?;
            sessions.push(id);
        }
        let owners = wait_for_leases(pg, &sessions).await?;
        Ok(Self {
            sessions,
            owners,
            finished,
        })
    }

    /// The live node running the most of these turns.
    fn busiest(&self, nodes: &Nodes) -> Result<usize> {
        let mut best = None;
        for i in (0..nodes.addrs.len()).filter(|&i| nodes.children[i].is_some()) {
            let id = nodes.node_id(i)?;
            let held = self.owners.values().filter(|o| **o == id).count();
            if held > 0 && best.is_none_or(|(_, most)| held > most) {
                best = Some((i, held));
            }
        }
        best.map(|(i, _)| i)
            .context("no node runs any of the turns")
    }

    fn held_by(&self, node_id: &str) -> Vec<String> {
        self.owners
            .iter()
            .filter(|(_, owner)| *owner == node_id)
            .map(|(session, _)| session.clone())
            .collect()
    }

    /// When a stream on a node other than `except` first saw each of
    /// `sessions`' `turn.finished`.
    async fn finished_on_others(
        mut self,
        except: usize,
        sessions: &[String],
    ) -> Result<Vec<Instant>> {
        let mut waiting: HashSet<&String> = sessions.iter().collect();
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !waiting.is_empty() {
            let next = tokio::time::timeout_at(deadline, self.finished.recv()).await;
            let Ok(Some((session, node, at))) = next else {
                bail!("{} turn(s) never finished on another node", waiting.len());
            };
            if node != except && waiting.remove(&session) {
                seen.push(at);
            }
        }
        Ok(seen)
    }
}

/// Session → lease owner, once every one of `sessions` holds a lease.
async fn wait_for_leases(
    pg: &sqlx::PgPool,
    sessions: &[String],
) -> Result<HashMap<String, String>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let rows =
            sqlx::query("SELECT session_id, node_id FROM turn_leases WHERE session_id = ANY($1)")
                .bind(sessions)
                .fetch_all(pg)
                .await?;
        if rows.len() == sessions.len() {
            return rows
                .iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                .collect();
        }
        if Instant::now() > deadline {
            bail!("{} of {} turns started", rows.len(), sessions.len());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
