//! When a write last committed. Before a turn is accepted the server probes
//! that the store takes writes (a full disk still answers reads); when the
//! event writer committed a moment ago, that commit is the answer and the
//! probe's own write transaction is spared (one for every message). A failed
//! commit clears it, so the next message probes again.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How recent a commit stands in for a probe.
pub(crate) const PROBE_FRESH: Duration = Duration::from_millis(250);

/// The instant of the last commit, in µs since the process's first look
/// (0: none since the last failure).
#[derive(Debug, Default)]
pub(crate) struct RecentCommit(AtomicU64);

fn now_us() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    // Never 0, which means "none".
    u64::try_from(start.elapsed().as_micros())
        .unwrap_or(u64::MAX)
        .max(1)
}

impl RecentCommit {
    pub(crate) fn committed(&self) {
        self.0.store(now_us(), Ordering::Release);
    }

    pub(crate) fn failed(&self) {
        self.0.store(0, Ordering::Release);
    }

    /// Whether a write committed within `age`, with none failing since.
    pub(crate) fn within(&self, age: Duration) -> bool {
        let at = self.0.load(Ordering::Acquire);
        let age = u64::try_from(age.as_micros()).unwrap_or(u64::MAX);
        at != 0 && now_us().saturating_sub(at) < age
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_counts_until_it_is_old_or_a_write_fails() {
        let recent = RecentCommit::default();
        assert!(!recent.within(PROBE_FRESH), "nothing committed yet");
        recent.committed();
        assert!(recent.within(PROBE_FRESH));
        recent.failed();
        assert!(!recent.within(PROBE_FRESH), "a failure clears it");
        recent.committed();
        std::thread::sleep(Duration::from_millis(20));
        assert!(!recent.within(Duration::from_millis(10)));
    }
}
