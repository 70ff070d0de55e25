//! Helpers of the race tests: a command keeps writing the time while the
//! gate is taken from the other side, on a machine kept busy.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::gate::{self, Side};

/// What of a command ran on after its pass went, over a race test's rounds.
#[derive(Default)]
pub(crate) struct RanOn {
    /// How long after the other side got through `ticks` was written (s).
    late: Vec<f64>,
    /// Processes of the command alive when it got through.
    alive: Vec<usize>,
}

impl RanOn {
    /// Get through the gate as a pinned start (so after the command's pass
    /// went), note what of `marker` is alive then, and return the pass and
    /// the time it came.
    pub(crate) async fn enter(
        &mut self,
        workspace: &std::path::Path,
        marker: &str,
    ) -> (gate::Pass, f64) {
        let entering = gate::enter(workspace, Side::PinnedStart, false);
        let (pass, _) = tokio::time::timeout(Duration::from_secs(30), entering)
            .await
            .expect("the command's pass never went");
        let entered = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let left = alive_with(marker);
        if left > 0 {
            self.alive.push(left);
        }
        (pass, entered)
    }

    /// Hold `pass` a while, then note whether `ticks` was written after
    /// `entered`.
    pub(crate) async fn hold(&mut self, pass: gate::Pass, entered: f64, ticks: &std::path::Path) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(pass);
        let last = last_tick(ticks);
        if last > entered {
            self.late.push(last - entered);
        }
    }

    pub(crate) fn assert_none(&self) {
        assert!(
            self.late.is_empty() && self.alive.is_empty(),
            "ran on after the pass went, by (s): {:?}; processes alive then: {:?}",
            self.late,
            self.alive
        );
    }
}

/// The latest `$EPOCHREALTIME` written to `ticks`.
pub(crate) fn last_tick(ticks: &std::path::Path) -> f64 {
    std::fs::read_to_string(ticks)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse::<f64>().ok())
        .fold(0.0, f64::max)
}

/// Processes alive (not zombies) whose command line holds `marker`.
pub(crate) fn alive_with(marker: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            let dir = entry.path();
            let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            !zombie && String::from_utf8_lossy(&cmdline).contains(marker)
        })
        .count()
}

/// Busy threads for the test's length, stopped however it ends.
pub(crate) struct Spinners(Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>);

impl Spinners {
    pub(crate) fn start(count: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..count)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Self(stop, threads)
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        self.1.drain(..).for_each(|thread| {
            let _ = thread.join();
        });
    }
}
