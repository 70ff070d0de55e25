//! The peer table's cluster rows (issue 29): cross-node p99 delivery at
//! saturation with 3 nodes ([`crate::cluster`]) and failover of a killed
//! node's turns without false takeovers under a 2 s pause
//! ([`crate::failover`]). Needs PostgreSQL: `bench/peer.sh` starts one.

use anyhow::Result;

use crate::args::Args;
use crate::cluster::{self, FanOut, Placement};
use crate::failover;
use crate::report::{Table, ms};
use crate::scenarios::Ctx;

pub async fn rows(args: &Args, ctx: &Ctx, t: &mut Table, extra: &mut Vec<String>) -> Result<()> {
    let delivery = "cross-node p99 delivery at saturation (3 nodes)";
    let failover_row = "failover of a killed node's turns";
    let failover_target = "≤ 5 s, no false takeovers under a 2 s pause";
    let Some(database) = cluster::database_from_env() else {
        eprintln!("  no AGENTD_TEST_POSTGRES_URL: run bench/peer.sh (it starts PostgreSQL)");
        t.target(
            &[delivery, "not run: no PostgreSQL", "", "", "< 50 ms"],
            false,
        );
        t.target(
            &[
                failover_row,
                "not run: no PostgreSQL",
                "",
                "",
                failover_target,
            ],
            false,
        );
        return Ok(());
    };
    let load = args.cluster;
    let root = ctx.root.join("cluster");
    std::fs::create_dir_all(&root)?;
    let script = root.join("fan-out.json");
    std::fs::write(&script, load.script().to_string())?;
    let (model, model_url) = crate::processes::start_model_server(&ctx.agentd, &script)?;
    // The same load on one node, and on three with nothing relayed: what the
    // nodes sharing this machine cost the tail without the cross-node path.
    let mut levels = Vec::new();
    for (nodes, placement) in [
        (1, Placement::Spread),
        (3, Placement::Spread),
        (3, Placement::Local),
    ] {
        let run = cluster::fan_out(
            &ctx.agentd,
            &database,
            &root,
            &model_url,
            nodes,
            &load,
            placement,
        )
        .await;
        match run {
            Ok(outcome) => levels.push(outcome),
            Err(err) => {
                crate::processes::stop(model);
                return Err(err.context(format!("cluster fan-out, {nodes} node(s), {placement:?}")));
            }
        }
    }
    crate::processes::stop(model);
    let (one, three, local) = (&levels[0], &levels[1], &levels[2]);
    let p99 = three.quantile_ms(0.99);
    t.target(
        &[
            delivery,
            &format!(
                "{p99:.1} ms (p50 {:.1}; 3 nodes, nothing relayed: p99 {:.1}; 1 node: p99 {:.1})",
                three.quantile_ms(0.5),
                local.quantile_ms(0.99),
                one.quantile_ms(0.99)
            ),
            "n/a (no server)",
            "",
            "< 50 ms",
        ],
        p99 < 50.0,
    );
    extra.push(fan_out_line(&load, one, three, local));

    let outcome = failover::run(&ctx.agentd, &database, &root, args.failover_sessions).await?;
    let slowest = outcome.slowest();
    let met = slowest <= std::time::Duration::from_secs(5)
        && outcome.not_completed == 0
        && outcome.paused_turns > 0;
    t.target(
        &[
            failover_row,
            &format!(
                "{} (slowest of {} turns; median {}); 2 s SIGSTOP: {} of {} turns not completed",
                ms(slowest),
                outcome.kill_to_finished.len(),
                ms(outcome.median()),
                outcome.not_completed,
                outcome.pause_run_turns
            ),
            "n/a (no server)",
            "",
            failover_target,
        ],
        met,
    );
    extra.push(format!(
        "failover: 3 nodes, default [cluster] settings (lease_timeout_s 4, a beat every 400 ms), \
         {} sessions with one ~8 s turn each (a slow model reply); kill -9 of the node holding \
         the most, timed to `turn.finished` on a survivor's stream; then {} new sessions, \
         SIGSTOP 2 s of the node holding the most ({} turns), SIGCONT: each turn must end \
         `completed`.",
        args.failover_sessions, args.failover_sessions, outcome.paused_turns
    ));
    Ok(())
}

fn fan_out_line(
    load: &FanOut,
    one: &cluster::Outcome,
    three: &cluster::Outcome,
    local: &cluster::Outcome,
) -> String {
    format!(
        "cluster fan-out: {} sessions × {} turns, {} SSE clients each spread over the nodes, \
         ~{} KiB of text per turn, all nodes and PostgreSQL on this machine. 1 node: {}; \
         3 nodes: {}; 3 nodes with each session's clients and turns on one node (nothing \
         relayed): {} (wall | events appended/s | deliveries/s | latency p50 / p99 / max).",
        load.sessions,
        load.turns,
        load.clients,
        load.kib,
        one.cells(),
        three.cells(),
        local.cells()
    )
}
