//! The peer comparison's command line (`USAGE`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

pub struct Args {
    pub smoke: bool,
    pub write: Option<PathBuf>,
    pub agentd: PathBuf,
    /// Another build of agentd whose cold runs go between these (`--compare`).
    pub compare: Option<PathBuf>,
    pub claude: PathBuf,
    pub runs: usize,
    pub turns: usize,
    pub levels: Vec<usize>,
    /// Live sessions (SSE over HTTP/2) one server is to hold (`memory-held`).
    pub held: usize,
    pub claude_procs: usize,
    pub concurrency: Vec<usize>,
    pub tp_turns: usize,
    pub sandbox_iters: usize,
    pub append_events: usize,
    /// The cluster scenario's fan-out load and turns per failover run.
    pub cluster: super::cluster::FanOut,
    pub failover_sessions: usize,
    /// `events`: the event-rate load; `turns5000`: the running-turns load.
    pub events_rate: super::events::RateLoad,
    pub events_running: super::events::RunningLoad,
    /// Scenarios to run (`--only`, for profiling); empty: all.
    pub only: Vec<String>,
    /// The Agent SDK scenario's Python (with the SDK) and driver script.
    pub sdk: super::sdk::Driver,
}

/// Scenario names `--only` takes; `warm-agentd` is agentd's warm turns alone.
const SCENARIOS: &[&str] = &[
    "cold",
    "warm",
    "warm-agentd",
    "memory",
    "memory-held",
    "throughput",
    "sandbox",
    "sdk",
    "cluster",
    "events",
    "turns5000",
];

impl Args {
    pub fn wants(&self, scenario: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|s| s == scenario)
    }

    /// The run's parameters, one line for the recorded block.
    pub fn parameters(&self) -> String {
        format!(
            "cold runs {}, warm turns {}, memory levels {:?}, claude processes {}, \
             held sessions {}, concurrency {:?} × {} turns, sandbox rounds {}, appends {}, \
             events {} sessions × {} turns × {} deltas, running turns {}",
            self.runs,
            self.turns,
            self.levels,
            self.claude_procs,
            self.held,
            self.concurrency,
            self.tp_turns,
            self.sandbox_iters,
            self.append_events,
            self.events_rate.sessions,
            self.events_rate.turns,
            self.events_rate.blocks,
            self.events_running.turns
        )
    }
}

const USAGE: &str = "peer [--smoke] [--write-results [FILE]] [--agentd PATH] [--compare PATH] [--claude PATH] \
    [--runs N] [--turns N] [--levels 1,100,1000,10000] [--held N] [--claude-procs N] \
    [--concurrency 100,1000] [--tp-turns N] [--sandbox N] [--append N] \
    [--cluster-sessions N] [--failover-sessions N] \
    [--events-sessions N] [--events-turns N] [--events-blocks N] [--running-turns N] \
    [--only cold,warm,warm-agentd,memory,memory-held,throughput,sandbox,sdk,cluster,events,turns5000]";

fn list(value: &str) -> Result<Vec<usize>> {
    value
        .split(',')
        .map(|v| v.trim().parse().context("not a number"))
        .collect()
}

pub fn parse_args() -> Result<Args> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest.parent().unwrap_or(manifest).to_path_buf();
    let exe = std::env::current_exe()?;
    let mut args = Args {
        smoke: false,
        write: None,
        agentd: exe.with_file_name("agentd"),
        compare: None,
        claude: root.join(".tools/node_modules/.bin/claude"),
        runs: 10,
        turns: 20,
        levels: vec![1, 100, 1000, 10_000],
        held: 100_000,
        claude_procs: 3,
        concurrency: vec![100, 1000],
        tp_turns: 2,
        sandbox_iters: 200,
        append_events: 64_000,
        cluster: super::cluster::FanOut::SATURATION,
        failover_sessions: 6,
        events_rate: super::events::RateLoad {
            sessions: 64,
            turns: 4,
            blocks: 400,
        },
        events_running: super::events::RunningLoad {
            turns: 5000,
            delay_ms: 1000,
            tokens: 48,
        },
        only: Vec::new(),
        sdk: super::sdk::Driver::in_repo(&root),
    };
    if let Some(bin) = std::env::var_os("AGENTD_CLAUDE_BIN") {
        args.claude = bin.into();
    }
    let mut it = std::env::args().skip(1).peekable();
    while let Some(flag) = it.next() {
        if flag == "--smoke" {
            args.smoke = true;
            args.runs = 1;
            args.turns = 1;
            args.levels = vec![1, 10];
            args.held = 300;
            args.claude_procs = 1;
            args.concurrency = vec![5];
            args.tp_turns = 1;
            args.sandbox_iters = 5;
            args.append_events = 640;
            args.cluster = super::cluster::FanOut::SMOKE;
            args.failover_sessions = 2;
            args.events_rate = super::events::RateLoad {
                sessions: 4,
                turns: 2,
                blocks: 50,
            };
            args.events_running.turns = 20;
            args.events_running.tokens = 3;
            continue;
        }
        if flag == "--write-results" {
            let file = match it.peek() {
                Some(next) if !next.starts_with("--") => it.next().map(PathBuf::from),
                _ => None,
            };
            args.write = Some(file.unwrap_or_else(|| root.join("bench/RESULTS.md")));
            continue;
        }
        let value = it
            .next()
            .with_context(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            // Absolute: the runs start in the scenario's workspace.
            "--agentd" => args.agentd = std::path::absolute(value)?,
            "--compare" => args.compare = Some(std::path::absolute(value)?),
            "--claude" => args.claude = value.into(),
            "--runs" => args.runs = value.parse()?,
            "--turns" => args.turns = value.parse()?,
            "--levels" => args.levels = list(&value)?,
            "--held" => args.held = value.parse()?,
            "--claude-procs" => args.claude_procs = value.parse()?,
            "--concurrency" => args.concurrency = list(&value)?,
            "--tp-turns" => args.tp_turns = value.parse()?,
            "--sandbox" => args.sandbox_iters = value.parse()?,
            "--append" => args.append_events = value.parse()?,
            "--cluster-sessions" => args.cluster.sessions = value.parse()?,
            "--failover-sessions" => args.failover_sessions = value.parse()?,
            "--events-sessions" => args.events_rate.sessions = value.parse()?,
            "--events-turns" => args.events_rate.turns = value.parse()?,
            "--events-blocks" => args.events_rate.blocks = value.parse()?,
            "--running-turns" => args.events_running.turns = value.parse()?,
            "--only" => {
                args.only = value.split(',').map(|s| s.trim().to_string()).collect();
                if let Some(bad) = args.only.iter().find(|s| !SCENARIOS.contains(&s.as_str())) {
                    bail!("unknown scenario {bad}\n{USAGE}");
                }
                if args.wants("memory") && !args.wants("warm") {
                    // The memory scenario reuses the warm `claude` process.
                    args.only.push("warm".into());
                }
            }
            _ => bail!("unknown flag {flag}\n{USAGE}"),
        }
    }
    if args.write.is_some() && !args.only.is_empty() && args.only != ["sdk"] {
        bail!("--write-results records the whole table (or `--only sdk`'s): drop --only");
    }
    if args.compare.is_some() && (args.write.is_some() || !args.wants("cold")) {
        bail!(
            "--compare adds A/B rows to the cold scenario: run that one, without --write-results"
        );
    }
    if let Some(compare) = args.compare.as_ref().filter(|path| !path.exists()) {
        bail!("--compare: no agentd at {}", compare.display());
    }
    let mut needed = vec![("agentd", &args.agentd), ("claude", &args.claude)];
    if args.wants("sdk") {
        needed.push(("the Python Agent SDK's venv", &args.sdk.python));
    }
    for (what, path) in needed {
        if !path.exists() {
            bail!(
                "{what} not found at {}: run `make bench` (builds agentd, installs the CLI \
                 with scripts/install-deps.sh)",
                path.display()
            );
        }
    }
    Ok(args)
}
