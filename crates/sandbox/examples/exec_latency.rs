//! Wall time of a trivial sandboxed command: `cargo run --release -p agentd-sandbox
//! --example exec_latency [iterations]`. Prints median and p90 for `true`, both
//! under bubblewrap and unsandboxed.
use std::time::{Duration, Instant};

use agentd_sandbox::{ExecRequest, Policy, Sandbox};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(200);
    let workspace = std::env::temp_dir().join(format!("agentd-latency-{}", std::process::id()));
    std::fs::create_dir_all(&workspace)?;
    let request = ExecRequest {
        command: "true".into(),
        timeout: Duration::from_secs(10),
        output_cap: 4096,
    };
    for unsandboxed in [false, true] {
        let mut policy = Policy::new(&workspace);
        policy.unsandboxed = unsandboxed;
        let mut samples = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            let started = Instant::now();
            let outcome = Sandbox
                .exec(&policy, &request, None, CancellationToken::new())
                .await?;
            samples.push(started.elapsed());
            assert_eq!(outcome.exit_code, Some(0));
        }
        samples.sort();
        let label = if unsandboxed { "unsandboxed" } else { "bwrap" };
        println!(
            "{label:>12}: median {:?}, p90 {:?} over {iterations} runs",
            samples[iterations / 2],
            samples[iterations * 9 / 10]
        );
    }
    std::fs::remove_dir_all(&workspace)?;
    Ok(())
}
