//! agentd side by side with its peer, the `claude` CLI, on the same scripted
//! conversation (bench/RESULTS.md, "Peer comparison"; issue 10):
//! cold one-shot runs, warm turns in one live session, memory per live session,
//! throughput with concurrent sessions, sandboxed Bash and event appends; and
//! the Python Agent SDK driving each of them as its CLI (`sdk`, its own block
//! of RESULTS.md, "Agent SDK: agentd as the CLI").
//!
//!     cargo build --release -p agentd-cli -p agentd-bench
//!     target/release/peer [--smoke] [--write-results] [--only sdk]
//!
//! Both tools talk to `agentd-model-server` (the testkit's scripted Anthropic
//! server, zero delay) in its own process. Cold wall times include the model
//! server's own time; warm host time per turn excludes it (wall − the server's
//! busy time over the turn, from its `GET /_testkit/stats`).
//! `--smoke` is a tiny run (< 30 s) that checks the harness still works.
//! `--compare <another agentd>` (its `agentd-sandbox` beside it) runs that
//! build's `agentd run` between this one's in the cold scenario, each on a
//! data directory of its own, and adds its medians and the median of the
//! rounds' differences: an A/B of two builds within one run.

#[path = "../peer/activity.rs"]
mod activity;
#[path = "../peer/args.rs"]
mod args;
#[path = "../peer/client.rs"]
mod client;
#[path = "../peer/cluster.rs"]
mod cluster;
#[path = "../peer/cluster_rows.rs"]
mod cluster_rows;
#[path = "../peer/events.rs"]
mod events;
#[path = "../peer/failover.rs"]
mod failover;
#[path = "../peer/memory.rs"]
mod memory;
#[path = "../peer/processes.rs"]
mod processes;
#[path = "../peer/report.rs"]
mod report;
#[path = "../peer/scenarios.rs"]
mod scenarios;
#[path = "../peer/sdk.rs"]
mod sdk;
#[path = "../peer/warm.rs"]
mod warm;

use std::time::{Duration, Instant};

use anyhow::Result;

use args::{Args, parse_args};
use report::{Table, bucket, kib, loadavg, ms, ratio};
use scenarios::Ctx;

fn main() -> Result<()> {
    // Sandboxed commands start as they do in `agentd serve`: through this
    // executable as the trampoline (see `agentd_sandbox::trampoline`).
    agentd_sandbox::trampoline::run_if_asked();
    agentd_sandbox::trampoline::enable();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(peer())
}

async fn peer() -> Result<()> {
    let args = parse_args()?;
    let begun = Instant::now();
    let load_before = loadavg();
    let nofile = processes::raise_nofile();
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().canonicalize()?;
    let ws = root.join("ws");
    processes::seed_workspace(&ws)?;
    std::fs::create_dir_all(root.join("claude-home"))?;
    let abs_file = ws.join(processes::FILE).display().to_string();
    std::fs::write(
        root.join("abs.json"),
        processes::script(&abs_file).to_string(),
    )?;
    std::fs::write(
        root.join("rel.json"),
        processes::script(processes::FILE).to_string(),
    )?;
    let (server_abs, url_abs) =
        processes::start_model_server(&args.agentd, &root.join("abs.json"))?;
    let (server_rel, url_rel) =
        processes::start_model_server(&args.agentd, &root.join("rel.json"))?;
    let (pid_abs, pid_rel) = (server_abs.id(), server_rel.id());
    let ctx = Ctx {
        agentd: args.agentd.clone(),
        compare: args.compare.clone(),
        claude: args.claude.clone(),
        root: root.clone(),
        url_abs,
        url_rel,
        ws,
    };
    let outcome = run(&args, &ctx, pid_abs, pid_rel, nofile).await;
    processes::stop(server_abs);
    processes::stop(server_rel);
    let peer = outcome?;
    let agent_sdk = if args.wants("sdk") {
        eprintln!(
            "[6/6] Agent SDK: {} cold runs, {} warm turns, with each CLI",
            args.runs, args.turns
        );
        Some(sdk::run(&ctx, &args.sdk, args.runs, args.turns)?)
    } else {
        None
    };
    let elapsed = begun.elapsed();
    let peer = (args.only != ["sdk"]).then_some((&report::PEER, args.parameters(), peer.0, peer.1));
    let agent_sdk = agent_sdk.map(|(table, extra)| {
        let parameters = format!(
            "Python Agent SDK: cold runs {}, warm turns {}",
            args.runs, args.turns
        );
        (&report::SDK, parameters, table, extra)
    });
    for (section, parameters, table, extra) in peer.iter().chain(agent_sdk.iter()) {
        println!("\n{}", table.markdown());
        for line in extra {
            println!("{line}");
        }
        if let Some(file) = &args.write {
            let run = report::Run {
                agentd: &args.agentd,
                claude: &args.claude,
                parameters: parameters.clone(),
                load_before: &load_before,
                elapsed,
            };
            report::write_results(file, section, &run, table, extra)?;
            println!("wrote {}", file.display());
        }
    }
    println!("(whole run: {:.0} s)", elapsed.as_secs_f64());
    Ok(())
}

async fn run(
    args: &Args,
    ctx: &Ctx,
    pid_abs: u32,
    pid_rel: u32,
    nofile: u64,
) -> Result<(Table, Vec<String>)> {
    let mut t = Table::default();
    let mut extra = Vec::new();

    if args.wants("cold") {
        eprintln!("[1/6] cold one-shot: {} runs each, interleaved", args.runs);
        let runs = scenarios::cold(ctx, args.runs)?;
        let (a, c, unsandboxed) = (runs.agentd, runs.claude, runs.unsandboxed);
        let wall_ratio = a.wall.as_secs_f64() / c.wall.as_secs_f64();
        t.target(
            &[
                &format!("cold one-shot wall (median of {})", args.runs),
                &ms(a.wall),
                &ms(c.wall),
                &ratio(a.wall.as_secs_f64(), c.wall.as_secs_f64()),
                "≤ 1/40",
            ],
            wall_ratio <= 1.0 / 40.0,
        );
        // The floor: the same run with its command outside bubblewrap.
        t.row([
            "  the same, commands unsandboxed (`sandbox = \"off\"`): wall",
            &ms(unsandboxed.wall),
            &ms(c.wall),
            &ratio(unsandboxed.wall.as_secs_f64(), c.wall.as_secs_f64()),
            "",
        ]);
        t.row([
            "  what the sandbox adds to the wall",
            &ms(a.wall.saturating_sub(unsandboxed.wall)),
            "",
            "",
            "",
        ]);
        if let (Some((other, wall, cpu)), Some(path)) = (&runs.compared, &args.compare) {
            t.row([
                &format!("  the compared build ({}): wall / CPU", path.display()),
                &format!("{} / {}", ms(other.wall), ms(other.cpu)),
                &ms(c.wall),
                &ratio(other.wall.as_secs_f64(), c.wall.as_secs_f64()),
                "",
            ]);
            t.row([
                "  this build − the compared, median of the rounds' differences: wall / CPU",
                &format!("{} / {}", signed(*wall), signed(*cpu)),
                "",
                "",
                "",
            ]);
        }
        t.row([
            "cold one-shot CPU, user+sys (median)",
            &ms(a.cpu),
            &ms(c.cpu),
            &ratio(a.cpu.as_secs_f64(), c.cpu.as_secs_f64()),
            "",
        ]);
        let switches = |c: &scenarios::Cold| format!("{} / {}", c.switches.0, c.switches.1);
        t.row([
            "  thread switches per run, waits / preemptions (median; what it waited for included)",
            &switches(&a),
            &switches(&c),
            "",
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
            "[2/6] warm turns: {} turns in one live session each",
            args.turns
        );
        let wa = warm::warm_agentd(ctx, pid_rel, args.turns).await?;
        let (wc, proc) = if args.wants("warm") {
            let (wc, proc) = warm::warm_claude(ctx, pid_abs, args.turns).await?;
            (wc, Some(proc))
        } else {
            (warm::Warm::default(), None)
        };
        let n = args.turns;
        let (host_a, host_c) = (wa.host.as_secs_f64(), wc.host.as_secs_f64());
        t.target(
            &[
                &format!("warm host time per turn, median of {n} (wall − model server time)"),
                &ms(wa.host),
                &ms(wc.host),
                &ratio(host_a, host_c),
                "≤ 1/25",
            ],
            host_a <= host_c / 25.0,
        );
        t.row([
            &format!("  warm turn wall, median of {n} (incl. model server)"),
            &ms(wa.wall),
            &ms(wc.wall),
            &ratio(wa.wall.as_secs_f64(), wc.wall.as_secs_f64()),
            "",
        ]);
        let served = |w: &warm::Warm| format!("{} / {:.1}", ms(w.model), w.requests);
        t.row([
            "  model server busy time (median) / requests, per turn",
            &served(&wa),
            &served(&wc),
            "",
            "",
        ]);
        t.row([
            "warm turn host CPU per turn (server / CLI process)",
            &ms(wa.cpu),
            &ms(wc.cpu),
            &ratio(wa.cpu.as_secs_f64(), wc.cpu.as_secs_f64()),
            "",
        ]);
        type Count = fn(&activity::PerTurn) -> String;
        let counts: [(&str, Count); 2] = [
            (
                "  thread switches per turn, waits / preemptions (server / CLI process)",
                activity::PerTurn::switches,
            ),
            (
                "  read / write system calls per turn (server / CLI process)",
                activity::PerTurn::calls,
            ),
        ];
        for (label, count) in counts {
            t.row([label, &count(&wa.activity), &count(&wc.activity), "", ""]);
        }
        t.row([
            "  the server's thread switches per turn by thread, waits / preemptions",
            &wa.activity.threads(),
            "",
            "",
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

        extra.push(
            "warm: host time per turn = wall − the model server's busy time during the turn \
             (`GET /_testkit/stats` read before and after each turn: from a request's handler \
             start to the last body byte handed to hyper, overlapping requests counted once)."
                .into(),
        );
        claude_proc = proc;
    }

    if !args.wants("memory")
        && let Some(proc) = claude_proc.take()
    {
        proc.stop();
    }
    let mut claude_per_session = None;
    if let Some(proc) = claude_proc {
        eprintln!("[3/6] memory per live session: agentd at {:?}", args.levels);
        let claude_rss = warm::claude_memory(ctx, proc, args.claude_procs)?;
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
                    // The target's level must show as missed, not vanish.
                    if l >= 10_000 {
                        t.target(
                            &[
                                &format!("memory per idle live session + SSE, {l} sessions"),
                                &format!("not measured: open-file limit {nofile}"),
                                "",
                                "",
                                "≤ 16 KiB",
                            ],
                            false,
                        );
                    }
                }
                fits
            })
            .collect();
        let (base, rows) = memory::agentd_memory(ctx, &levels).await?;
        for row in rows {
            memory::level_row(&mut t, row, claude_per);
        }
        claude_per_session = Some(claude_per);
        extra.push(format!(
            "memory: agentd's base RSS ({base} KiB) is taken with 8 warm-up sessions live (SSE \
             streams opened at once and held open), so one-time lazy start-up is not counted \
             per session and the levels' sessions are counted on top of live ones. claude: RSS of {} warm process tree(s) after one turn: {:?} \
             KiB (measured); per-session figures beyond that are extrapolated.",
            claude_rss.len(),
            claude_rss
        ));
    }

    if args.wants("memory") || args.wants("memory-held") {
        eprintln!("[3/6] live sessions held: {} over HTTP/2", args.held);
        let held = memory::held_over_h2(ctx, args.held).await?;
        memory::held_row(&mut t, &mut extra, &held, claude_per_session);
    }

    if args.wants("throughput") {
        eprintln!(
            "[4/6] throughput: {:?} concurrent sessions",
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
            "[5/6] sandboxed Bash ({} rounds) and SQLite appends",
            args.sandbox_iters
        );
        let [(bare50, bare99), cold, spare] =
            scenarios::sandbox(&ctx.root, args.sandbox_iters).await?;
        for (label, (box50, box99)) in [
            ("cold: a session's first command", cold),
            ("in a prestarted spare: an active session's next", spare),
        ] {
            let over = box50.saturating_sub(bare50);
            let over99 = box99.saturating_sub(bare99);
            t.target(
                &[
                    &format!("sandboxed `true` over bare `bash -c true`, {label}, median / p99"),
                    &format!("{} / {}", ms(over), ms(over99)),
                    "no sandbox (runs bare)",
                    "",
                    "< 10 ms",
                ],
                over < Duration::from_millis(10),
            );
        }
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
            "sandbox: bare {} / {}, cold bwrap {} / {}, spare {} / {} (median / p99, {} rounds; \
             started through the trampoline as in `agentd serve`; each spare call comes 20 ms \
             after the previous one, untimed, so its spare is ready)",
            ms(bare50),
            ms(bare99),
            ms(cold.0),
            ms(cold.1),
            ms(spare.0),
            ms(spare.1),
            args.sandbox_iters
        ));
    }
    if args.wants("events") || args.wants("turns5000") {
        events::run(args, ctx, &mut t, &mut extra).await?;
    }
    if args.wants("cluster") {
        eprintln!("[cluster] 3 nodes on PostgreSQL: fan-out at saturation, failover");
        cluster_rows::rows(args, ctx, &mut t, &mut extra).await?;
    }
    Ok((t, extra))
}

/// A signed difference in milliseconds: "+1.2 ms", "−0.4 ms".
fn signed(difference: scenarios::SignedMs) -> String {
    let sign = if difference.0 < 0.0 { '−' } else { '+' };
    format!("{sign}{:.1} ms", difference.0.abs())
}
