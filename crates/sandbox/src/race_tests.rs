//! Helpers of the race tests: a command keeps writing the time while the
//! gate is taken from the other side, on a machine kept busy.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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
