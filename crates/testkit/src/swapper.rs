//! The attacker of the race tests: a thread exchanging pairs of paths
//! (`renameat2(RENAME_EXCHANGE)`, a real file or directory with a symlink to
//! somewhere else) as fast as it can until stopped.
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;

use rustix::fs::{CWD, RenameFlags};

/// Stops (and joins) its thread when finished or dropped.
pub struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl Swapper {
    /// Start exchanging each pair, round after round.
    pub fn start(pairs: Vec<(PathBuf, PathBuf)>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicUsize::new(0));
        let (stop_flag, count) = (stop.clone(), swaps.clone());
        let thread = std::thread::spawn(move || {
            while !stop_flag.load(Ordering::Relaxed) {
                for (a, b) in &pairs {
                    if rustix::fs::renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).is_ok() {
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
        Self {
            stop,
            swaps,
            thread: Some(thread),
        }
    }

    /// Stop the thread; how many exchanges it made (a test asserts some, so
    /// it cannot pass without a race).
    pub fn finish(mut self) -> usize {
        self.halt();
        self.swaps.load(Ordering::Relaxed)
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.halt();
    }
}
