//! What a process did besides computing, counted by the kernel: thread
//! switches and read/write calls. Unlike wall and CPU time these barely move
//! with the machine's load, so a change in how work is handed between threads
//! or how often the database is read shows in them when timings drown it.

use std::collections::BTreeMap;

use super::processes::named_value;

/// Counters of one process at one instant.
#[derive(Debug, Clone, Default)]
pub struct Activity {
    /// Switches away from the CPU because a thread waited (summed over the
    /// threads alive when read).
    pub voluntary: u64,
    /// Switches because a thread was preempted.
    pub involuntary: u64,
    /// Read-like and write-like system calls (`/proc/<pid>/io`: `read`,
    /// `pread64`, `recvfrom`…, and `write`, `pwrite64`, `sendto`…), every
    /// thread the process ever had included.
    pub reads: u64,
    pub writes: u64,
    /// Each thread alive when read, by id: its name, waits and preemptions.
    pub threads: BTreeMap<u64, (String, u64, u64)>,
}

/// Each counter per turn: (`after` − `before`) / `turns`.
#[derive(Debug, Clone, Default)]
pub struct PerTurn {
    pub voluntary: f64,
    pub involuntary: f64,
    pub reads: f64,
    pub writes: f64,
    /// Waits and preemptions per turn by thread name, most waits first:
    /// of the threads alive at the second reading, from the first reading
    /// or their start. Threads that ended in between are not in it.
    pub by_thread: Vec<(String, f64, f64)>,
}

impl Activity {
    /// `pid`'s counters now; zeros for what cannot be read.
    pub fn of(pid: u32) -> Self {
        let (mut voluntary, mut involuntary) = (0, 0);
        let mut threads = BTreeMap::new();
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for task in tasks.flatten() {
                let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                    continue;
                };
                let status =
                    std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
                let waits = named_value(&status, "voluntary_ctxt_switches:");
                let preempted = named_value(&status, "nonvoluntary_ctxt_switches:");
                voluntary += waits;
                involuntary += preempted;
                let name = status
                    .lines()
                    .find_map(|line| line.strip_prefix("Name:"))
                    .unwrap_or("?")
                    .trim()
                    .to_string();
                threads.insert(tid, (name, waits, preempted));
            }
        }
        let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
        Self {
            voluntary,
            involuntary,
            reads: named_value(&io, "syscr:"),
            writes: named_value(&io, "syscw:"),
            threads,
        }
    }

    pub fn per_turn(self, before: &Activity, turns: usize) -> PerTurn {
        let n = turns.max(1) as f64;
        let per = |after: u64, before: u64| after.saturating_sub(before) as f64 / n;
        let mut named = BTreeMap::<String, (u64, u64)>::new();
        for (tid, (name, waits, preempted)) in self.threads {
            let (w0, p0) = before
                .threads
                .get(&tid)
                .map_or((0, 0), |(_, w0, p0)| (*w0, *p0));
            let sum = named.entry(name).or_default();
            sum.0 += waits.saturating_sub(w0);
            sum.1 += preempted.saturating_sub(p0);
        }
        let mut by_thread: Vec<(String, f64, f64)> = named
            .into_iter()
            .map(|(name, (waits, preempted))| (name, per(waits, 0), per(preempted, 0)))
            .collect();
        by_thread.sort_by(|a, b| b.1.total_cmp(&a.1));
        PerTurn {
            voluntary: per(self.voluntary, before.voluntary),
            involuntary: per(self.involuntary, before.involuntary),
            reads: per(self.reads, before.reads),
            writes: per(self.writes, before.writes),
            by_thread,
        }
    }
}

impl PerTurn {
    pub fn switches(&self) -> String {
        format!("{:.0} / {:.0}", self.voluntary, self.involuntary)
    }

    pub fn calls(&self) -> String {
        format!("{:.0} / {:.0}", self.reads, self.writes)
    }

    /// The threads that switched at least once a turn, e.g.
    /// `agentd-turn 142 / 103, sqlx-sqlite-wor 29 / 27`.
    pub fn threads(&self) -> String {
        let shown: Vec<String> = self
            .by_thread
            .iter()
            .filter(|(_, waits, preempted)| waits + preempted >= 1.0)
            .map(|(name, waits, preempted)| format!("{name} {waits:.0} / {preempted:.0}"))
            .collect();
        shown.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_counted() {
        let before = Activity::of(std::process::id());
        for _ in 0..20 {
            std::thread::sleep(std::time::Duration::from_millis(1));
            let _ = std::fs::read_to_string("/proc/self/stat");
        }
        let per = Activity::of(std::process::id()).per_turn(&before, 1);
        // Each sleep is a wait; each read of the file at least one read call.
        assert!(per.voluntary >= 20.0, "{per:?}");
        assert!(per.reads >= 20.0, "{per:?}");
        // The sleeping thread is named among them, with its waits.
        let name = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
        let this = per.by_thread.iter().find(|(n, ..)| n == name.trim());
        assert!(this.is_some_and(|(_, waits, _)| *waits >= 20.0), "{per:?}");
    }
}
