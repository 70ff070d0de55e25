//! Sandbox overhead: wall time of `true` run five ways, interleaved so load
//! drift hits all alike:
//!
//! - `bare`: `bash -c true` spawned directly (tokio, piped output), no sandbox;
//! - `unsandboxed`: `Sandbox::exec` with `sandbox = off` (limits, cgroup, pipes);
//! - `bwrap`: `Sandbox::exec` with the default policy;
//! - `bwrap-nocg`: the same without the process and memory limits, so no
//!   cgroup is made (shows what the per-command cgroup costs);
//! - `bwrap-spare`: the default policy with prestarted spares on, in a second
//!   workspace. Each call takes the spare the previous one left; the
//!   replacement starts in the background after a call, so each round ends
//!   with an untimed wait of [`SPARE_READY_WAIT`]. The capacity is 1 and that
//!   spare holds the place whenever the other variants run, so they stay cold
//!   (checked: the run fails if one of them takes a spare).
//!
//! `cargo run --release -p agentd-sandbox --example exec_latency [iterations]`
//! (default 1000). Prints median and p99 of each and of bwrap minus bare.
use std::process::Stdio;
use std::time::{Duration, Instant};

use agentd_sandbox::{
    ExecRequest, Policy, Sandbox, set_spare_capacity, spares_used, spares_waiting,
};
use tokio_util::sync::CancellationToken;

/// Time for the replacement spare to start before the next round.
const SPARE_READY_WAIT: Duration = Duration::from_millis(20);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(1000);
    let workspace = std::env::temp_dir().join(format!("agentd-latency-{}", std::process::id()));
    let spare_workspace = workspace.join("spare");
    std::fs::create_dir_all(&spare_workspace)?;
    let request = ExecRequest {
        command: "true".into(),
        timeout: Duration::from_secs(10),
        output_cap: 4096,
    };
    let sandboxed = Policy::new(&workspace);
    let mut unsandboxed = Policy::new(&workspace);
    unsandboxed.unsandboxed = true;
    let mut no_cgroup = Policy::new(&workspace);
    no_cgroup.limits.processes = None;
    no_cgroup.limits.memory_bytes = None;
    let spared = Policy::new(&spare_workspace);
    set_spare_capacity(1);
    // Untimed: the first call starts the spare that then holds the one place.
    Sandbox
        .exec(&spared, &request, None, CancellationToken::new())
        .await?;
    while spares_waiting() == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }

    let (mut bare, mut plain, mut bwrap, mut bwrap_nocg, mut bwrap_spare) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut spares_taken = 0;
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
            return Err("bare `bash -c true` failed".into());
        }
        let runs = [
            ("unsandboxed", &unsandboxed, &mut plain),
            ("bwrap", &sandboxed, &mut bwrap),
            ("bwrap-nocg", &no_cgroup, &mut bwrap_nocg),
            ("bwrap-spare", &spared, &mut bwrap_spare),
        ];
        for (label, policy, samples) in runs {
            let used = spares_used();
            let started = Instant::now();
            let outcome = Sandbox
                .exec(policy, &request, None, CancellationToken::new())
                .await?;
            samples.push(started.elapsed());
            if outcome.exit_code != Some(0) {
                return Err(format!("sandboxed `true` failed: {outcome:?}").into());
            }
            let took = spares_used() - used;
            match label {
                "bwrap-spare" => spares_taken += took,
                _ if took > 0 => return Err(format!("{label} took a spare").into()),
                _ => {}
            }
        }
        tokio::time::sleep(SPARE_READY_WAIT).await;
    }
    let (bare_median, bare_p99) = report("bare", &mut bare);
    report("unsandboxed", &mut plain);
    let (median, p99) = report("bwrap", &mut bwrap);
    report("bwrap-nocg", &mut bwrap_nocg);
    report("bwrap-spare", &mut bwrap_spare);
    println!(
        "{:>12}: {spares_taken} of {iterations} bwrap-spare runs took a spare \
         ({} ms untimed wait after each round for the next one to start)",
        "spares",
        SPARE_READY_WAIT.as_millis(),
    );
    println!(
        "{:>12}: median {:.2} ms, p99 {:.2} ms (bwrap minus bare)",
        "overhead",
        ms(median.saturating_sub(bare_median)),
        ms(p99.saturating_sub(bare_p99)),
    );
    set_spare_capacity(0);
    std::fs::remove_dir_all(&workspace)?;
    Ok(())
}

/// Print and return (median, p99).
fn report(label: &str, samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let median = samples[samples.len() / 2];
    let p99 = samples[(samples.len() * 99 / 100).min(samples.len() - 1)];
    println!(
        "{label:>12}: median {:.2} ms, p99 {:.2} ms over {} runs",
        ms(median),
        ms(p99),
        samples.len()
    );
    (median, p99)
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
