//! Host processes, seen through `/proc`: for tests that check nothing a
//! sandbox started is left behind.
use std::time::Duration;

/// How many processes have `marker` in their command line.
pub fn processes_mentioning(marker: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| {
            std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| {
                cmdline
                    .windows(marker.len())
                    .any(|window| window == marker.as_bytes())
            })
        })
        .count()
}

/// Waits (up to 10 s: killed processes take a moment to be reaped) until
/// no process mentions `marker`; panics naming how many survived.
pub async fn assert_none_left(marker: &str) {
    for _ in 0..500 {
        if processes_mentioning(marker) == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{} processes survived", processes_mentioning(marker));
}
