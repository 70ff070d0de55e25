//! Sandbox overhead: wall time of `true` run three ways, interleaved so load
//! drift hits all alike:
//!
//! - `bare`: `bash -c true` spawned directly (tokio, piped output), no sandbox;
//! - `unsandboxed`: `Sandbox::exec` with `sandbox = off` (limits, cgroup, pipes);
//! - `bwrap`: `Sandbox::exec` with the default policy;
//! - `bwrap-nocg`: the same without the process and memory limits, so no
//!   cgroup is made (shows what the per-command cgroup costs).
//!
//! `cargo run --release -p agentd-sandbox --example exec_latency [iterations]`
//! (default 1000). Prints median and p99 of each and of bwrap minus bare.
use std::process::Stdio;
use std::time::{Duration, Instant};

use agentd_sandbox::{ExecRequest, Policy, Sandbox};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(1000);
    let workspace = std::env::temp_dir().join(format!("agentd-latency-{}", std::process::id()));
    std::fs::create_dir_all(&workspace)?;
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

    let (mut bare, mut plain, mut bwrap, mut bwrap_nocg) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
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
            (&unsandboxed, &mut plain),
            (&sandboxed, &mut bwrap),
            (&no_cgroup, &mut bwrap_nocg),
        ];
        for (policy, samples) in runs {
            let started = Instant::now();
            let outcome = Sandbox
                .exec(policy, &request, None, CancellationToken::new())
                .await?;
            samples.push(started.elapsed());
            if outcome.exit_code != Some(0) {
                return Err(format!("sandboxed `true` failed: {outcome:?}").into());
            }
        }
    }
    let (bare_median, bare_p99) = report("bare", &mut bare);
    report("unsandboxed", &mut plain);
    let (median, p99) = report("bwrap", &mut bwrap);
    report("bwrap-nocg", &mut bwrap_nocg);
    println!(
        "{:>12}: median {:.2} ms, p99 {:.2} ms (bwrap minus bare)",
        "overhead",
        ms(median.saturating_sub(bare_median)),
        ms(p99.saturating_sub(bare_p99)),
    );
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
