//! Shared pieces of agentd's benchmarks: timing wrappers and figures.

use std::time::Duration;

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

pub fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}
