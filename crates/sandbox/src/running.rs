//! A started command held with its workspace gate pass until it has ended,
//! even when the future running it is dropped rather than cancelled (a
//! turn's task aborted, a `select!` that went another way), or a serving
//! sandbox whose start failed after its spawn (`served::start_serving`).
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
        if process.reaped() {
            // Its pid may be another's by now: only what it left behind.
            process.kill_leftovers();
        } else {
            process.kill();
        }
        // Without a live runtime (one shutting down drops what is spawned
        // on it) the kill is all there is: the pass goes with it.
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
    use std::time::{Duration, Instant};

    use tokio_util::sync::CancellationToken;

    use crate::race_tests::{RanOn, Spinners, last_tick};
    use crate::{ExecRequest, Policy, Sandbox};

    /// Rounds of: a command in an unpinned sandbox (no cgroup: the case
    /// where only the kill of its PID 1 stops it) appends the time to a file
    /// in a loop; its `exec` future is dropped; a pinned start waits at the
    /// gate; when it gets through, nothing of the command is alive and
    /// nothing is written later. Under load, as on a busy server, where the
    /// kernel's kill lags most.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_command_has_stopped_before_its_pass_goes() {
        let dir = tempfile::tempdir().unwrap();
        let mut policy = Policy::new(dir.path().canonicalize().unwrap());
        policy.limits.processes = None;
        policy.limits.memory_bytes = None;
        let ticks = policy.workspace.join("ticks");
        let marker = format!("dropped-command-{}", std::process::id());
        let request = ExecRequest {
            command: format!(": {marker}; while :; do echo $EPOCHREALTIME >> ticks; done"),
            timeout: Duration::from_secs(60),
            output_cap: 1 << 10,
        };
        let _spinners = Spinners::start(2);
        let mut ran_on = RanOn::default();
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
            let (pass, entered) = ran_on.enter(&policy.workspace, &marker).await;
            assert!(command.await.unwrap_err().is_cancelled());
            ran_on.hold(pass, entered, &ticks).await;
        }
        ran_on.assert_none();
    }
}
