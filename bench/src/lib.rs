//! Shared pieces of agentd's benchmarks: timing wrappers and figures.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;

/// `[server]` keys that let one user open as many connections and event
/// streams as a benchmark needs (the defaults suit a server shared by many).
pub const UNCAPPED: &str = "max_connections = 1000000\nmax_streams_per_user = 1000000\n";

/// Peak resident set size of this process, from `/proc/self/status` (VmHWM).
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The value at quantile `q` (0.0–1.0) of `samples`, which it sorts.
pub fn quantile(samples: &mut [Duration], q: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort();
    let index = ((samples.len() - 1) as f64 * q).round() as usize;
    samples[index]
}

/// The `q` quantile of microsecond samples sorted ascending, in ms (NaN
/// when there are none).
pub fn quantile_ms(sorted_us: &[u64], q: f64) -> f64 {
    sorted_us
        .get(((sorted_us.len().saturating_sub(1)) as f64 * q) as usize)
        .map_or(f64::NAN, |us| *us as f64 / 1000.0)
}

pub fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

/// `agentd-model-server` at `server` on `script`, as its own process;
/// returns it and its URL.
pub fn start_model_server(server: &Path, script: &Path) -> anyhow::Result<(Child, String)> {
    if !server.exists() {
        anyhow::bail!(
            "{} not found: build it with `cargo build --release -p agentd-testkit`",
            server.display()
        );
    }
    let mut child = Command::new(server)
        .arg("--script")
        .arg(script)
        .arg("--coalesce")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", server.display()))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http"))
        .context("agentd-model-server printed no URL")?;
    Ok((child, url.trim_end_matches('/').to_string()))
}
