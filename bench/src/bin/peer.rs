//! agentd side by side with its peer, the `claude` CLI, on the same scripted
//! conversation (bench/RESULTS.md, "Peer comparison"; issue 10):
//! cold one-shot runs, warm turns in one live session, memory per live session,
//! throughput with concurrent sessions, sandboxed Bash and event appends.
//!
//!     cargo build --release -p agentd-cli -p agentd-bench
//!     target/release/peer [--smoke] [--write-results]
//!
//! Both tools talk to `agentd model-server` (the testkit's scripted Anthropic
//! server, zero delay) in its own process; wall times therefore include the
//! model server's own time, the same for both (its CPU per turn is reported).
//! `--smoke` is a tiny run (< 30 s) that checks the harness still works.

#[path = "../peer/scenarios.rs"]
mod scenarios;
#[path = "../peer/util.rs"]
mod util;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use scenarios::Ctx;

struct Args {
    smoke: bool,
    write: Option<PathBuf>,
    agentd: PathBuf,
    claude: PathBuf,
    runs: usize,
    turns: usize,
    levels: Vec<usize>,
    claude_procs: usize,
    concurrency: Vec<usize>,
    tp_turns: usize,
    sandbox_iters: usize,
    append_events: usize,
    /// Scenarios to run (`--only`, for profiling); empty: all.
    only: Vec<String>,
}

/// Scenario names `--only` takes; `warm-agentd` is agentd's warm turns alone.
const SCENARIOS: &[&str] = &[
    "cold",
    "warm",
    "warm-agentd",
    "memory",
    "throughput",
    "sandbox",
];

impl Args {
    fn wants(&self, scenario: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|s| s == scenario)
    }
}

const USAGE: &str = "peer [--smoke] [--write-results [FILE]] [--agentd PATH] [--claude PATH] \
    [--runs N] [--turns N] [--levels 1,100,1000,10000] [--claude-procs N] \
    [--concurrency 100,1000] [--tp-turns N] [--sandbox N] [--append N] \
    [--only cold,warm,warm-agentd,memory,throughput,sandbox]";

fn list(value: &str) -> Result<Vec<usize>> {
    value
        .split(',')
        .map(|v| v.trim().parse().context("not a number"))
        .collect()
}

fn parse_args() -> Result<Args> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest.parent().unwrap_or(manifest).to_path_buf();
    let exe = std::env::current_exe()?;
    let mut args = Args {
        smoke: false,
        write: None,
        agentd: exe.with_file_name("agentd"),
        claude: root.join(".tools/node_modules/.bin/claude"),
        runs: 10,
        turns: 20,
        levels: vec![1, 100, 1000, 10_000],
        claude_procs: 3,
        concurrency: vec![100, 1000],
        tp_turns: 2,
        sandbox_iters: 200,
        append_events: 64_000,
        only: Vec::new(),
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
            args.claude_procs = 1;
            args.concurrency = vec![5];
            args.tp_turns = 1;
            args.sandbox_iters = 5;
            args.append_events = 640;
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
            "--agentd" => args.agentd = value.into(),
            "--claude" => args.claude = value.into(),
            "--runs" => args.runs = value.parse()?,
            "--turns" => args.turns = value.parse()?,
            "--levels" => args.levels = list(&value)?,
            "--claude-procs" => args.claude_procs = value.parse()?,
            "--concurrency" => args.concurrency = list(&value)?,
            "--tp-turns" => args.tp_turns = value.parse()?,
            "--sandbox" => args.sandbox_iters = value.parse()?,
            "--append" => args.append_events = value.parse()?,
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
    if args.write.is_some() && !args.only.is_empty() {
        bail!("--write-results records the whole table: drop --only");
    }
    for (what, path) in [("agentd", &args.agentd), ("claude", &args.claude)] {
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

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

fn kib(k: f64) -> String {
    if k >= 1024.0 * 1024.0 {
        format!("{:.2} GiB", k / 1024.0 / 1024.0)
    } else if k >= 1024.0 {
        format!("{:.1} MiB", k / 1024.0)
    } else {
        format!("{k:.1} KiB")
    }
}

/// agentd / claude as "1/N" (agentd smaller) or "N×" (agentd larger).
fn ratio(agentd: f64, claude: f64) -> String {
    if !(agentd > 0.0 && claude > 0.0) {
        return "–".into();
    }
    let r = agentd / claude;
    if r <= 1.0 {
        format!("1/{:.0}", 1.0 / r)
    } else {
        format!("{r:.1}×")
    }
}

struct Table {
    rows: Vec<[String; 5]>,
    misses: Vec<String>,
}

impl Table {
    fn row(&mut self, cells: [&str; 5]) {
        self.rows.push(cells.map(str::to_string));
    }

    /// A row with a target; `met` is recorded for the summary.
    fn target(&mut self, cells: &[&str; 5], met: bool) {
        let mut cells = cells.map(str::to_string);
        cells[4] = format!("{} {}", cells[4], if met { "✓" } else { "✗ missed" });
        if !met {
            self.misses.push(cells[0].clone());
        }
        self.rows.push(cells);
    }

    fn markdown(&self) -> String {
        let mut out = String::from(
            "| metric | agentd | claude CLI | ratio | target |\n|---|---|---|---|---|\n",
        );
        for r in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                r[0], r[1], r[2], r[3], r[4]
            );
        }
        out
    }
}

fn output(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "?".into())
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "?".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or("?".into(), |k| format!("{:.0} GiB", k / 1024.0 / 1024.0));
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cores} vCPU ({cpu}), {mem}, kernel {}", kernel.trim())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = parse_args()?;
    let begun = Instant::now();
    let load_before = loadavg();
    let nofile = util::raise_nofile();
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().canonicalize()?;
    let ws = root.join("ws");
    util::seed_workspace(&ws)?;
    std::fs::create_dir_all(root.join("claude-home"))?;
    let abs_file = ws.join(util::FILE).display().to_string();
    std::fs::write(root.join("abs.json"), util::script(&abs_file).to_string())?;
    std::fs::write(root.join("rel.json"), util::script(util::FILE).to_string())?;
    let (server_abs, url_abs) = util::start_model_server(&args.agentd, &root.join("abs.json"))?;
    let (server_rel, url_rel) = util::start_model_server(&args.agentd, &root.join("rel.json"))?;
    let (pid_abs, pid_rel) = (server_abs.id(), server_rel.id());
    let ctx = Ctx {
        agentd: args.agentd.clone(),
        claude: args.claude.clone(),
        root: root.clone(),
        url_abs,
        url_rel,
        ws,
    };
    let outcome = run(&args, &ctx, pid_abs, pid_rel, nofile).await;
    util::stop(server_abs);
    util::stop(server_rel);
    let (table, extra) = outcome?;
    let md = table.markdown();
    println!("\n{md}");
    for line in &extra {
        println!("{line}");
    }
    let elapsed = begun.elapsed();
    println!("(whole run: {:.0} s)", elapsed.as_secs_f64());
    if let Some(file) = &args.write {
        write_results(
            file,
            &args,
            &md,
            &extra,
            &table.misses,
            &load_before,
            elapsed,
        )?;
        println!("wrote {}", file.display());
    }
    Ok(())
}

async fn run(
    args: &Args,
    ctx: &Ctx,
    pid_abs: u32,
    pid_rel: u32,
    nofile: u64,
) -> Result<(Table, Vec<String>)> {
    let mut t = Table {
        rows: Vec::new(),
        misses: Vec::new(),
    };
    let mut extra = Vec::new();

    if args.wants("cold") {
        eprintln!("[1/5] cold one-shot: {} runs each, interleaved", args.runs);
        let (a, c) = scenarios::cold(ctx, args.runs)?;
        let wall_ratio = a.wall.as_secs_f64() / c.wall.as_secs_f64();
        t.target(
            &[
                &format!("cold one-shot wall (median of {})", args.runs),
                &ms(a.wall),
                &ms(c.wall),
                &ratio(a.wall.as_secs_f64(), c.wall.as_secs_f64()),
                "≤ 1/10",
            ],
            wall_ratio <= 0.1,
        );
        t.row([
            "cold one-shot CPU, user+sys (median)",
            &ms(a.cpu),
            &ms(c.cpu),
            &ratio(a.cpu.as_secs_f64(), c.cpu.as_secs_f64()),
            "",
        ]);
        t.row([
            "cold one-shot peak RSS (median)",
            &kib(a.rss_kib as f64),
            &kib(c.rss_kib as f64),
            &ratio(a.rss_kib as f64, c.rss_kib as f64),
            "",
        ]);
    }

    let mut claude_proc = None;
    if args.wants("warm") || args.wants("warm-agentd") {
        eprintln!(
            "[2/5] warm turns: {} turns in one live session each",
            args.turns
        );
        let wa = scenarios::warm_agentd(ctx, pid_rel, args.turns).await?;
        let (wc, proc) = if args.wants("warm") {
            let (wc, proc) = scenarios::warm_claude(ctx, pid_abs, args.turns)?;
            (wc, Some(proc))
        } else {
            (scenarios::Warm::default(), None)
        };
        t.target(
            &[
                &format!(
                    "warm turn wall, median of {} (incl. model server)",
                    args.turns
                ),
                &ms(wa.wall),
                &ms(wc.wall),
                &ratio(wa.wall.as_secs_f64(), wc.wall.as_secs_f64()),
                "≤ 1/10",
            ],
            wa.wall.as_secs_f64() <= 0.1 * wc.wall.as_secs_f64(),
        );
        t.row([
            "warm turn host CPU per turn (server / CLI process)",
            &ms(wa.cpu),
            &ms(wc.cpu),
            &ratio(wa.cpu.as_secs_f64(), wc.cpu.as_secs_f64()),
            "",
        ]);
        t.row([
            &format!("process RSS after {} warm turns", args.turns + 1),
            &kib(wa.rss_kib as f64),
            &kib(wc.rss_kib as f64),
            &ratio(wa.rss_kib as f64, wc.rss_kib as f64),
            "",
        ]);
        t.row([
            "  model server CPU per turn (same script, for scale)",
            &ms(wa.model_cpu),
            &ms(wc.model_cpu),
            "",
            "",
        ]);

        claude_proc = proc;
    }

    if !args.wants("memory")
        && let Some(proc) = claude_proc.take()
    {
        proc.stop();
    }
    if let Some(proc) = claude_proc {
        eprintln!("[3/5] memory per live session: agentd at {:?}", args.levels);
        let claude_rss = scenarios::claude_memory(ctx, proc, args.claude_procs)?;
        let claude_per = claude_rss.iter().sum::<u64>() as f64 / claude_rss.len().max(1) as f64;
        let levels: Vec<usize> = args
            .levels
            .iter()
            .copied()
            .filter(|&l| {
                // One socket per stream in this process, one in the server.
                let fits = (l as u64) + 256 <= nofile;
                if !fits {
                    eprintln!("  skipping {l} sessions: open-file limit {nofile}");
                }
                fits
            })
            .collect();
        let (base, rows) = scenarios::agentd_memory(ctx, &levels).await?;
        for (level, rss, per) in &rows {
            let claude_total = claude_per * *level as f64;
            t.target(
                &[
                    &format!("memory per idle live session + SSE, {level} sessions"),
                    &format!("{} (server RSS {})", kib(*per), kib(*rss as f64)),
                    &format!(
                        "{} (×{level} = {}, extrapolated)",
                        kib(claude_per),
                        kib(claude_total)
                    ),
                    &ratio(*per, claude_per),
                    "≤ 1/1000 (≲ 270 KiB)",
                ],
                *per <= claude_per / 1000.0,
            );
        }
        let most = rows.iter().map(|r| r.0).max().unwrap_or(0);
        t.target(
            &[
                "live sessions with SSE held by one process/machine",
                &most.to_string(),
                &format!(
                    "~{:.0} by RAM (extrapolated)",
                    mem_total_kib() as f64 / claude_per.max(1.0)
                ),
                "",
                "10 000",
            ],
            most >= 10_000,
        );
        extra.push(format!(
        "claude: RSS of {} warm process tree(s) after one turn: {:?} KiB (measured); per-session \
         figures beyond that are extrapolated. agentd server base RSS {base} KiB.",
        claude_rss.len(),
        claude_rss
    ));
    }

    if args.wants("throughput") {
        eprintln!(
            "[4/5] throughput: {:?} concurrent sessions",
            args.concurrency
        );
        for &c in &args.concurrency {
            if (c as u64) * 2 + 256 > nofile {
                eprintln!("  skipping {c} sessions: open-file limit {nofile}");
                continue;
            }
            let tp = scenarios::throughput(ctx, c, args.tp_turns).await?;
            let secs = tp.wall.as_secs_f64();
            t.row([
                &format!("turns/s, {c} sessions running turns at once"),
                &format!(
                    "{:.1} ({} turns in {secs:.1} s)",
                    tp.turns as f64 / secs,
                    tp.turns
                ),
                "not measured",
                "",
                "",
            ]);
            let p99_target = if c >= 1000 {
                "p99 < 50 ms"
            } else {
                "(p99 < 50 ms at 1 000)"
            };
            let cells = [
                &format!("event delivery latency p50 / p99, {c} sessions") as &str,
                &format!(
                    "{:.1} / {:.1} ms (max {:.0})",
                    tp.p50_ms, tp.p99_ms, tp.max_ms
                ),
                "not measured",
                "",
                p99_target,
            ];
            if c >= 1000 {
                t.target(&cells, tp.p99_ms < 50.0);
            } else {
                t.row(cells);
            }
            t.row([
                &format!(
                    "  of which commit → hand-off to streams (server), p50 / p99, {c} sessions"
                ),
                &format!(
                    "{} / {} ms",
                    bucket(tp.publish_p50_ms),
                    bucket(tp.publish_p99_ms)
                ),
                "",
                "",
                "",
            ]);
            t.row([
                &format!("events appended / delivered per s, {c} sessions"),
                &format!(
                    "{:.0} / {:.0}",
                    tp.events_appended / secs,
                    tp.deliveries as f64 / secs
                ),
                "",
                "",
                "",
            ]);
        }
    }

    if args.wants("sandbox") {
        eprintln!(
            "[5/5] sandboxed Bash ({} rounds) and SQLite appends",
            args.sandbox_iters
        );
        let [(bare50, bare99), (box50, box99)] =
            scenarios::sandbox(&ctx.root, args.sandbox_iters).await?;
        let over = box50.saturating_sub(bare50);
        let over99 = box99.saturating_sub(bare99);
        t.target(
            &[
                "sandboxed `true` over bare `bash -c true`, median / p99",
                &format!("{} / {}", ms(over), ms(over99)),
                "no sandbox (runs bare)",
                "",
                "< 10 ms",
            ],
            over < Duration::from_millis(10),
        );
        let rate = scenarios::sqlite_append(&ctx.root, args.append_events).await?;
        t.target(
            &[
                "SQLite event appends/s (batches of 64, `Store` trait)",
                &format!("{rate:.0}"),
                "n/a (JSONL transcript)",
                "",
                "> 50 000/s",
            ],
            rate > 50_000.0,
        );
        extra.push(format!(
            "sandbox: bare {} / {} , bwrap {} / {} (median / p99, {} rounds)",
            ms(bare50),
            ms(bare99),
            ms(box50),
            ms(box99),
            args.sandbox_iters
        ));
    }
    Ok((t, extra))
}

/// A histogram bucket bound in ms: "≤ 10", or "> 5000" past the last bound.
fn bucket(ms: f64) -> String {
    if ms.is_finite() {
        format!("≤ {ms}")
    } else {
        "> 5000".into()
    }
}

fn mem_total_kib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

const BEGIN: &str = "<!-- peer:begin (written by target/release/peer --write-results) -->";
const END: &str = "<!-- peer:end -->";

fn write_results(
    file: &Path,
    args: &Args,
    table: &str,
    extra: &[String],
    misses: &[String],
    load_before: &str,
    elapsed: Duration,
) -> Result<()> {
    let agentd = args.agentd.display().to_string();
    let claude = args.claude.display().to_string();
    let mut block = String::new();
    let _ = writeln!(block, "{BEGIN}");
    let _ = writeln!(
        block,
        "Recorded {} by `{}` (whole run {:.0} s).\n",
        output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        std::env::args().collect::<Vec<_>>().join(" "),
        elapsed.as_secs_f64()
    );
    let _ = writeln!(block, "- machine: {}", machine());
    let _ = writeln!(
        block,
        "- load average before / after: {load_before} / {}",
        loadavg()
    );
    let _ = writeln!(
        block,
        "- agentd {} (git {}), claude {}, node {}, {}",
        output(&agentd, &["--version"]).trim_start_matches("agentd "),
        output("git", &["describe", "--always", "--dirty"]),
        output(&claude, &["--version"]),
        output("node", &["--version"]),
        output("bwrap", &["--version"]),
    );
    let _ = writeln!(
        block,
        "- cold runs {}, warm turns {}, memory levels {:?}, claude processes {}, concurrency {:?} × {} turns, sandbox rounds {}, appends {}\n",
        args.runs,
        args.turns,
        args.levels,
        args.claude_procs,
        args.concurrency,
        args.tp_turns,
        args.sandbox_iters,
        args.append_events
    );
    block.push_str(table);
    block.push('\n');
    for line in extra {
        let _ = writeln!(block, "{line}\n");
    }
    if misses.is_empty() {
        block.push_str("All targets met in this run.\n");
    } else {
        let _ = writeln!(block, "Targets missed in this run: {}.", misses.join("; "));
    }
    let _ = writeln!(block, "{END}");

    let text = std::fs::read_to_string(file).unwrap_or_default();
    let new = match (text.find(BEGIN), text.find(END)) {
        (Some(b), Some(e)) if e > b => {
            format!(
                "{}{}{}",
                &text[..b],
                block.trim_end(),
                &text[e + END.len()..]
            )
        }
        _ => format!(
            "{}\n## Peer comparison: agentd vs the `claude` CLI (issue 10)\n\n{block}",
            text.trim_end()
        ),
    };
    std::fs::write(file, new)?;
    Ok(())
}
