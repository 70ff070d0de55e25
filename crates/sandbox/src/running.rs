//! A started command held with its workspace gate pass until it has ended,
//! even when the future running it is dropped rather than cancelled (a
//! turn's task aborted, a `select!` that went another way).
use crate::gate::Pass;
use crate::run::Process;

/// Dropped while it still holds the command: the sandbox is killed now, and
/// the pass goes only once the command is reaped and its cgroup is empty,
/// as after a cancel. Dropping the pass with the future would let a start
/// on the other side of the gate overlap what is still dying inside.
pub(crate) struct Running(Option<(Process, Option<Pass>)>);

impl Running {
    pub(crate) fn new(process: Process, pass: Option<Pass>) -> Self {
        Self(Some((process, pass)))
    }

    /// The command, until [`Running::finish`] takes it.
    pub(crate) fn process(&mut self) -> Option<&mut Process> {
        self.0.as_mut().map(|(process, _)| process)
    }

    /// The command and its pass, for the regular end.
    pub(crate) fn finish(mut self) -> Option<(Process, Option<Pass>)> {
        self.0.take()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some((mut process, pass)) = self.0.take() else {
            return;
        };
        process.kill();
        // Without a runtime (it is shutting down) the kill is all there is.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let _ = process.wait().await;
            process.abandon(pass);
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    use tokio_util::sync::CancellationToken;

    use crate::gate::{self, Side};
    use crate::{ExecRequest, Policy, Sandbox};

    /// The latest `$EPOCHREALTIME` written to `ticks`.
    fn last_tick(ticks: &std::path::Path) -> f64 {
        std::fs::read_to_string(ticks)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse::<f64>().ok())
            .fold(0.0, f64::max)
    }

    /// Rounds of: a command in an unpinned sandbox (no cgroup: the case
    /// where only the kill of its PID 1 stops it) appends the time to a file
    /// in a loop; its `exec` future is dropped; a pinned start waits at the
    /// gate; nothing is written after the start got through. Under load, as
    /// on a busy server, where the kernel's kill lags most.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_command_has_stopped_before_its_pass_goes() {
        let dir = tempfile::tempdir().unwrap();
        let mut policy = Policy::new(dir.path().canonicalize().unwrap());
        policy.limits.processes = None;
        policy.limits.memory_bytes = None;
        let ticks = policy.workspace.join("ticks");
        let request = ExecRequest {
            command: "while :; do echo $EPOCHREALTIME >> ticks; done".into(),
            timeout: Duration::from_secs(60),
            output_cap: 1 << 10,
        };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spinners: Vec<_> = (0..2)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let mut late = Vec::new();
        for _ in 0..8 {
            let _ = std::fs::remove_file(&ticks);
            let command = tokio::spawn({
                let (policy, request) = (policy.clone(), request.clone());
                async move {
                    let _ = Sandbox
                        .exec(&policy, &request, None, CancellationToken::new())
                        .await;
                }
            });
            let began = Instant::now();
            while last_tick(&ticks) == 0.0 {
                assert!(began.elapsed() < Duration::from_secs(30), "it never ticked");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            command.abort();
            let (pass, _) = gate::enter(&policy.workspace, Side::PinnedStart, false).await;
            let entered = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            assert!(command.await.unwrap_err().is_cancelled());
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(pass);
            let last = last_tick(&ticks);
            if last > entered {
                late.push(last - entered);
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for spinner in spinners {
            spinner.join().unwrap();
        }
        assert!(
            late.is_empty(),
            "ran on after the pass went, by (s): {late:?}"
        );
    }
}
