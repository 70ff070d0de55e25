//! The measurements of the peer comparison, one function each (warm turns: `warm.rs`).

use agentd_store::prelude::*;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use agentd_protocol::{DeltaKind, Event};
use agentd_sandbox::{ExecRequest, Policy, Sandbox};
use agentd_store::NewSession;
use agentd_store::sqlite::SqliteStore;
use anyhow::{Result, bail};
use tokio_util::sync::CancellationToken;

use super::client::{Conn, bucket_quantile, create_session, histogram, metric, post_message};
use super::processes::{
    Reaped, agentd_command, claude_command, now_us, seed_workspace, session_workspace, start_serve,
    stop, wait4,
};

/// Paths and model servers shared by the scenarios.
pub struct Ctx {
    pub agentd: PathBuf,
    /// Another build of agentd, run between `agentd`'s cold runs (`--compare`).
    pub compare: Option<PathBuf>,
    pub claude: PathBuf,
    pub root: PathBuf,
    /// Model server whose script uses the absolute workspace path (claude, `agentd run`).
    pub url_abs: String,
    /// Model server whose script uses a relative path (agentd's server sessions).
    pub url_rel: String,
    pub ws: PathBuf,
}

pub fn median(mut v: Vec<Duration>) -> Duration {
    agentd_bench::quantile(&mut v, 0.5)
}

/// Medians of wall time, CPU time (user + sys) and peak RSS of one-shot runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cold {
    pub wall: Duration,
    pub cpu: Duration,
    pub rss_kib: u64,
    /// Thread switches of the run and what it waited for: waits, preemptions.
    pub switches: (u64, u64),
}

/// Who runs a cold one-shot turn; the value is its place in the samples.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Runner {
    Agentd = 0,
    Claude = 1,
    /// agentd with its commands run outside bubblewrap (`sandbox = "off"`):
    /// the same run less the sandbox, to measure what the sandbox costs it.
    AgentdUnsandboxed = 2,
    /// The build given with `--compare`, on a data directory of its own.
    Compared = 3,
}

fn cold_one(ctx: &Ctx, runner: Runner, out: &Path) -> Result<(Duration, Reaped)> {
    seed_workspace(&ctx.ws)?;
    let agentd = runner != Runner::Claude;
    let mut command = if agentd {
        let (dir, config) = match runner {
            Runner::AgentdUnsandboxed => (
                "agentd-cold-unsandboxed",
                "[profiles.default]\nsandbox = \"off\"\n",
            ),
            Runner::Compared => ("agentd-cold-compared", ""),
            _ => ("agentd-cold", ""),
        };
        let data = ctx.root.join(dir);
        std::fs::create_dir_all(&data)?;
        std::fs::write(data.join("agentd.toml"), config)?;
        let exe = match (runner, &ctx.compare) {
            (Runner::Compared, Some(compared)) => compared,
            _ => &ctx.agentd,
        };
        let mut c = agentd_command(exe, &data, &ctx.url_abs);
        c.current_dir(&ctx.ws).args([
            "run",
            "--output-format",
            "stream-json",
            "--permission-mode",
            "bypass",
            "bench turn",
        ]);
        c
    } else {
        let home = ctx.root.join("claude-home");
        let mut c = claude_command(&ctx.claude, &home, &ctx.url_abs, &ctx.ws);
        c.args([
            "-p",
            "bench turn",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
        ]);
        c
    };
    let started = Instant::now();
    let child = command
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(out)?)
        .stderr(std::fs::File::create(out.with_extension("err"))?)
        .spawn()?;
    let reaped = wait4(&child)?;
    let wall = started.elapsed();
    let ok = reaped.success;
    let text = std::fs::read_to_string(out)?;
    let edited = std::fs::read_to_string(ctx.ws.join(super::processes::FILE))?;
    if !ok || !text.contains("BENCH-DONE") || !edited.contains("counter+") {
        bail!(
            "{} run failed (exit ok: {ok}); output in {}",
            if agentd { "agentd" } else { "claude" },
            out.display()
        );
    }
    Ok((wall, reaped))
}

/// The cold scenario's figures, each a median of its runs.
pub struct ColdRuns {
    pub agentd: Cold,
    pub claude: Cold,
    pub unsandboxed: Cold,
    /// With `--compare`: the other build's figures, and the medians of
    /// this build's wall and CPU minus the other's, run by run.
    pub compared: Option<(Cold, SignedMs, SignedMs)>,
}

/// A difference in milliseconds, negative when this build took less.
#[derive(Debug, Clone, Copy)]
pub struct SignedMs(pub f64);

/// `agentd run`, `claude -p` and `agentd run` with its commands outside
/// bubblewrap, interleaved, after one unmeasured run each. With `--compare`
/// the other build runs next to this one, the two swapping places every
/// round: each follows the other as often, and neither follows `claude`.
pub fn cold(ctx: &Ctx, runs: usize) -> Result<ColdRuns> {
    let mut samples: [Vec<(Duration, Reaped)>; 4] = Default::default();
    for round in 0..=runs {
        let order: &[Runner] = match (ctx.compare.is_some(), round % 2) {
            (false, _) => &[Runner::Agentd, Runner::Claude, Runner::AgentdUnsandboxed],
            (true, 0) => &[
                Runner::Agentd,
                Runner::Compared,
                Runner::Claude,
                Runner::AgentdUnsandboxed,
            ],
            (true, _) => &[
                Runner::Compared,
                Runner::Agentd,
                Runner::Claude,
                Runner::AgentdUnsandboxed,
            ],
        };
        for &runner in order {
            let slot = runner as usize;
            let out = ctx.root.join(format!("cold-{slot}.out"));
            let sample = cold_one(ctx, runner, &out)?;
            if round > 0 {
                samples[slot].push(sample);
            }
        }
    }
    let fig = |runs: &[(Duration, Reaped)]| {
        let middle = |mut v: Vec<u64>| {
            v.sort_unstable();
            v.get(v.len() / 2).copied().unwrap_or(0)
        };
        Cold {
            wall: median(runs.iter().map(|(wall, _)| *wall).collect()),
            cpu: median(runs.iter().map(|(_, r)| r.cpu).collect()),
            rss_kib: middle(runs.iter().map(|(_, r)| r.max_rss_kib).collect()),
            switches: (
                middle(runs.iter().map(|(_, r)| r.switches.0).collect()),
                middle(runs.iter().map(|(_, r)| r.switches.1).collect()),
            ),
        }
    };
    let [a, c, unsandboxed, compared] = &samples;
    let compared = ctx.compare.as_ref().map(|_| {
        let ms_of = |runs: &[(Duration, Reaped)], of: fn(&(Duration, Reaped)) -> Duration| {
            runs.iter()
                .map(|run| of(run).as_secs_f64() * 1e3)
                .collect::<Vec<_>>()
        };
        let paired = |of: fn(&(Duration, Reaped)) -> Duration| {
            median_difference(&ms_of(a, of), &ms_of(compared, of))
        };
        (
            fig(compared),
            paired(|(wall, _)| *wall),
            paired(|(_, reaped)| reaped.cpu),
        )
    });
    Ok(ColdRuns {
        agentd: fig(a),
        claude: fig(c),
        unsandboxed: fig(unsandboxed),
        compared,
    })
}

/// The median of `ours[i] − theirs[i]` over the rounds both ran.
fn median_difference(ours: &[f64], theirs: &[f64]) -> SignedMs {
    let mut differences: Vec<f64> = ours.iter().zip(theirs).map(|(o, t)| o - t).collect();
    differences.sort_unstable_by(f64::total_cmp);
    SignedMs(
        differences
            .get(differences.len() / 2)
            .copied()
            .unwrap_or(0.0),
    )
}

pub async fn create_many(addr: &str, n: usize) -> Result<Vec<String>> {
    create_many_on(addr, n, 8).await
}

/// `n` sessions created over `conns` connections at once.
pub async fn create_many_on(addr: &str, n: usize, conns: usize) -> Result<Vec<String>> {
    let conns = conns.min(n.max(1));
    let mut tasks = Vec::new();
    for c in 0..conns {
        let addr = addr.to_string();
        let count = n / conns + usize::from(c < n % conns);
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(&addr).await?;
            let mut ids = Vec::with_capacity(count);
            for _ in 0..count {
                ids.push(create_session(&mut conn).await?);
            }
            anyhow::Ok(ids)
        }));
    }
    let mut ids = Vec::with_capacity(n);
    for task in tasks {
        ids.extend(task.await??);
    }
    Ok(ids)
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Throughput {
    pub turns: usize,
    pub wall: Duration,
    pub events_appended: f64,
    pub deliveries: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Server side, commit to hand-off to the streams: the histogram bucket
    /// bounds (ms) holding the median and the 99th percentile.
    pub publish_p50_ms: f64,
    pub publish_p99_ms: f64,
}

const PUBLISH_DELAY: &str = "agentd_event_publish_delay_seconds";

/// `sessions` sessions, an SSE client each, each running `turns` turns back to back.
pub async fn throughput(ctx: &Ctx, sessions: usize, turns: usize) -> Result<Throughput> {
    let data = ctx.root.join(format!("agentd-tp-{sessions}"));
    std::fs::create_dir_all(&data)?;
    let (server, addr) = start_serve(&ctx.agentd, &data, &ctx.url_rel).await?;
    let outcome = async {
        let ids = create_many(&addr, sessions).await?;
        let mut prepared = Vec::new();
        for id in ids {
            seed_workspace(&session_workspace(&data, &id))?;
            let events = Conn::open(&addr).await?.events(&id).await?;
            let conn = Conn::open(&addr).await?;
            prepared.push((id, conn, events));
        }
        let events0 = metric(&addr, "agentd_events_total").await?;
        let publish0 = histogram(&addr, PUBLISH_DELAY).await?;
        let started = Instant::now();
        let tasks: Vec<_> = prepared
            .into_iter()
            .map(|(id, mut conn, mut events)| {
                tokio::spawn(async move {
                    let mut latencies = Vec::new();
                    for turn in 0..turns {
                        post_message(&mut conn, &id, &format!("bench turn {turn}")).await?;
                        loop {
                            let (kind, at) = events.next_event().await?;
                            latencies.push((now_us() - at).max(0) as u64);
                            if kind == "turn.finished" {
                                break;
                            }
                        }
                    }
                    anyhow::Ok(latencies)
                })
            })
            .collect();
        let mut latencies = gather(tasks).await?;
        let wall = started.elapsed();
        let appended = metric(&addr, "agentd_events_total").await? - events0;
        let publish = histogram(&addr, PUBLISH_DELAY).await?;
        latencies.sort_unstable();
        let q = |p: f64| agentd_bench::quantile_ms(&latencies, p);
        Ok(Throughput {
            turns: sessions * turns,
            wall,
            events_appended: appended,
            deliveries: latencies.len() as u64,
            p50_ms: q(0.5),
            p99_ms: q(0.99),
            max_ms: q(1.0),
            publish_p50_ms: bucket_quantile(&publish0, &publish, 0.5) * 1000.0,
            publish_p99_ms: bucket_quantile(&publish0, &publish, 0.99) * 1000.0,
        })
    }
    .await;
    stop(server);
    outcome
}

/// Every task's latencies, in one list.
pub async fn gather(tasks: Vec<tokio::task::JoinHandle<Result<Vec<u64>>>>) -> Result<Vec<u64>> {
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    Ok(latencies)
}

/// Median and p99 of `bash -c true` bare and under the default sandbox policy.
pub async fn sandbox(root: &Path, iterations: usize) -> Result<[(Duration, Duration); 3]> {
    let request = ExecRequest {
        command: "true".into(),
        timeout: Duration::from_secs(10),
        output_cap: 4096,
    };
    // Separate workspaces: a cold call must never find the other's spare.
    let policy = |name: &str| -> Result<Policy> {
        let workspace = root.join(name);
        std::fs::create_dir_all(&workspace)?;
        Ok(Policy::new(workspace))
    };
    let (cold_policy, spare_policy) = (policy("sandbox-cold")?, policy("sandbox-spare")?);
    let exec = |policy: Policy| {
        let request = request.clone();
        async move {
            let started = Instant::now();
            let outcome = Sandbox
                .exec(&policy, &request, None, CancellationToken::new())
                .await?;
            if outcome.exit_code != Some(0) {
                bail!("sandboxed `true` failed: {outcome:?}");
            }
            Ok(started.elapsed())
        }
    };
    // One place in the pool, held by the spare policy's next spare from the
    // priming call on: a cold call always finds the pool full, so it neither
    // takes a spare nor leaves one.
    agentd_sandbox::set_spare_capacity(1);
    exec(spare_policy.clone()).await?;
    let used_before = agentd_sandbox::spares_used();
    let (mut bare, mut cold, mut spare) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..iterations {
        let started = Instant::now();
        let status = tokio::process::Command::new("bash")
            .args(["-c", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .await?
            .status;
        bare.push(started.elapsed());
        if !status.success() {
            bail!("bare `bash -c true` failed");
        }
        cold.push(exec(cold_policy.clone()).await?);
        // The spare for this call was started after the previous one.
        tokio::time::sleep(Duration::from_millis(20)).await;
        spare.push(exec(spare_policy.clone()).await?);
    }
    agentd_sandbox::set_spare_capacity(0);
    let used = agentd_sandbox::spares_used() - used_before;
    if used != iterations as u64 {
        bail!("{used} of {iterations} spare calls took a spare (and cold ones none)");
    }
    let q = |v: &mut Vec<Duration>| {
        (
            agentd_bench::quantile(v, 0.5),
            agentd_bench::quantile(v, 0.99),
        )
    };
    Ok([q(&mut bare), q(&mut cold), q(&mut spare)])
}

/// Events/s appended to SQLite through the `Store` trait in batches of 64.
pub async fn sqlite_append(root: &Path, events: usize) -> Result<f64> {
    let store = SqliteStore::open(&root.join("append.db")).await?;
    let session = store
        .create_session(NewSession {
            id: None,
            owner: "bench".into(),
            title: None,
            workspace: "/tmp/bench".into(),
            existing_workspace: false,
            model: "bench".into(),
            profile: "default".into(),
        })
        .await?;
    let all: Vec<Event> = (0..events)
        .map(|i| Event::MessageDelta {
            parent_call_id: None,
            turn_id: "t1".into(),
            index: 0,
            kind: DeltaKind::Text,
            text: format!("token {i} of a streamed reply, about forty bytes"),
        })
        .collect();
    let started = Instant::now();
    for chunk in all.chunks(64) {
        store.append_events(&session.id, chunk).await?;
    }
    Ok(events as f64 / started.elapsed().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::median_difference;

    #[test]
    fn the_paired_median_is_ours_minus_theirs_round_by_round() {
        // Each side's own median differs by 10 (30 against 20); the rounds'
        // differences (−1, +1, +11) say this build is 1 ms slower.
        let ours = [10.0, 30.0, 31.0];
        let theirs = [11.0, 29.0, 20.0];
        assert_eq!(median_difference(&ours, &theirs).0, 1.0);
        assert_eq!(median_difference(&theirs, &ours).0, -1.0);
        assert_eq!(median_difference(&[], &[]).0, 0.0);
    }
}
