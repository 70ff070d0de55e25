//! Resource exhaustion and leaks against the real bubblewrap: fork and memory
//! bombs, filling the disk, processes outliving the command, secrets in the
//! environment.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentd_sandbox::{Limits, Policy};
use support::{assert_none_left, failed, layout, marker, processes_mentioning, run, run_for};

/// Samples how many processes mention `marker` until dropped; keeps the peak.
struct PeakCounter {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PeakCounter {
    fn start(marker: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicUsize::new(0));
        let (stop2, peak2, marker) = (stop.clone(), peak.clone(), marker.to_string());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                peak2.fetch_max(processes_mentioning(&marker), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        Self {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

#[tokio::test]
async fn a_fork_bomb_is_contained_and_cleaned_up() {
    let l = layout();
    let mut policy = Policy::new(&l.ws);
    policy.limits.processes = Some(64);
    let marker = marker("forkbomb");
    // The classic bomb, then a command that needs a fork of its own.
    let command = format!(": {marker}; f() {{ f | f & }}; f; sleep 30");
    let counter = PeakCounter::start(&marker);
    let started = Instant::now();
    let timeout = Duration::from_secs(4);
    let outcome = run_for(&policy, &command, timeout).await;
    let elapsed = started.elapsed();
    let peak = counter.finish();

    assert!(
        elapsed < timeout + Duration::from_secs(3),
        "took {elapsed:?}"
    );
    assert!(outcome.timed_out || failed(&outcome), "{outcome:?}");
    assert!(
        outcome.stderr.contains("Resource temporarily unavailable"),
        "the process limit never bit: {outcome:?}"
    );
    assert!(peak <= 64, "{peak} processes at once");
    assert_none_left(&marker).await;
    // The host can still start processes.
    assert!(
        std::process::Command::new("true")
            .status()
            .unwrap()
            .success()
    );
}

#[tokio::test]
async fn forking_past_the_limit_fails() {
    let l = layout();
    let mut policy = Policy::new(&l.ws);
    policy.limits.processes = Some(20);
    let marker = marker("forks");
    let command = format!(": {marker}; for i in $(seq 40); do sleep 30 & done");
    let outcome = run_for(&policy, &command, Duration::from_secs(3)).await;
    assert!(
        outcome.stderr.contains("fork"),
        "40 background processes were allowed: {outcome:?}"
    );
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn a_memory_bomb_is_stopped_by_the_default_address_space_limit() {
    let l = layout();
    let outcome = run(
        &Policy::new(&l.ws),
        "python3 -c 'x = bytearray(8 << 30); print(\"allocated\")'",
    )
    .await;
    assert!(failed(&outcome), "{outcome:?}");
    assert!(outcome.stderr.contains("MemoryError"), "{outcome:?}");
    assert!(!outcome.stdout.contains("allocated"));
}

#[tokio::test]
async fn a_streaming_memory_bomb_is_stopped() {
    let l = layout();
    let mut policy = Policy::new(&l.ws);
    policy.limits.address_space_bytes = Some(256 << 20);
    // `tail` keeps the whole newline-free stream in memory.
    let outcome = run(&policy, "head -c 1G /dev/zero | tail > /dev/null").await;
    assert!(failed(&outcome), "{outcome:?}");
    assert!(outcome.stderr.contains("memory exhausted"), "{outcome:?}");
}

#[tokio::test]
async fn filling_the_disk_stops_at_the_file_size_limit() {
    let l = layout();
    let mut policy = Policy::new(&l.ws);
    policy.limits.file_size_bytes = Some(10 << 20);
    let outcome = run(&policy, "head -c 20M /dev/zero > big").await;
    assert!(failed(&outcome), "{outcome:?}");
    let size = std::fs::metadata(l.ws.join("big")).unwrap().len();
    assert!(size <= 10 << 20, "wrote {size} bytes");
    // Under the limit is fine.
    let outcome = run(&policy, "head -c 5M /dev/zero > small").await;
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
}

#[tokio::test]
async fn open_files_and_cpu_limits_apply() {
    let l = layout();
    let mut policy = Policy::new(&l.ws);
    policy.limits.open_files = Some(64);
    policy.limits.cpu_seconds = Some(1);
    let outcome = run(&policy, "ulimit -n; ulimit -Hn; ulimit -t; ulimit -c").await;
    assert_eq!(outcome.stdout, "64\n64\n1\n0\n", "{outcome:?}");
    let started = Instant::now();
    let outcome = run(&policy, "while :; do :; done").await;
    assert!(failed(&outcome) && !outcome.timed_out, "{outcome:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn processes_that_leave_the_session_are_killed() {
    let l = layout();
    let marker = marker("escaped");
    let command = format!("setsid sleep 60 {marker} >/dev/null 2>&1 & disown; echo started");
    let outcome = run(&Policy::new(&l.ws), &command).await;
    assert_eq!(outcome.stdout, "started\n");
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn without_limits_nothing_is_enforced() {
    // The control for the tests above.
    let l = layout();
    let mut policy = Policy::new(&l.ws);
    policy.limits = Limits::unlimited();
    let outcome = run(&policy, "ulimit -n; ulimit -u; ulimit -f").await;
    assert!(outcome.stdout.ends_with("unlimited\n"), "{outcome:?}");
    assert_ne!(outcome.stdout.lines().next(), Some("1024"));
}
