//! What a process did besides computing, counted by the kernel: thread
//! switches and read/write calls. Unlike wall and CPU time these barely move
//! with the machine's load, so a change in how work is handed between threads
//! or how often the database is read shows in them when timings drown it.

use super::processes::named_value;

/// Counters of one process at one instant.
#[derive(Debug, Clone, Copy, Default)]
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
}

/// Each counter per turn: (`after` − `before`) / `turns`.
#[derive(Debug, Clone, Copy, Default)]
pub struct PerTurn {
    pub voluntary: f64,
    pub involuntary: f64,
    pub reads: f64,
    pub writes: f64,
}

impl Activity {
    /// `pid`'s counters now; zeros for what cannot be read.
    pub fn of(pid: u32) -> Self {
        let (mut voluntary, mut involuntary) = (0, 0);
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for task in tasks.flatten() {
                let status =
                    std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
                voluntary += named_value(&status, "voluntary_ctxt_switches:");
                involuntary += named_value(&status, "nonvoluntary_ctxt_switches:");
            }
        }
        let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
        Self {
            voluntary,
            involuntary,
            reads: named_value(&io, "syscr:"),
            writes: named_value(&io, "syscw:"),
        }
    }

    pub fn per_turn(self, before: Activity, turns: usize) -> PerTurn {
        let n = turns.max(1) as f64;
        let per = |after: u64, before: u64| after.saturating_sub(before) as f64 / n;
        PerTurn {
            voluntary: per(self.voluntary, before.voluntary),
            involuntary: per(self.involuntary, before.involuntary),
            reads: per(self.reads, before.reads),
            writes: per(self.writes, before.writes),
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
        let per = Activity::of(std::process::id()).per_turn(before, 1);
        // Each sleep is a wait; each read of the file at least one read call.
        assert!(per.voluntary >= 20.0, "{per:?}");
        assert!(per.reads >= 20.0, "{per:?}");
    }
}
