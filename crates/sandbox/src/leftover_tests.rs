//! A command that ended by itself may leave processes behind, which its
//! sandbox's PID 1 kills as it exits. Without a cgroup, the command's gate
//! pass must not go before they are gone.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::race_tests::{RanOn, Spinners};
use crate::{ExecRequest, Policy, Sandbox};

/// Rounds of: a cold sandbox (no cgroup) starts a loop appending the time
/// to a file (in a new session, its output elsewhere), and ends; when a
/// pinned start gets through the gate after it, nothing of the loop is
/// alive and nothing is written later. Under load, where the kernel's kill
/// lags most.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_finished_command_left_has_stopped_before_its_pass_goes() {
    let dir = tempfile::tempdir().unwrap();
    let mut policy = Policy::new(dir.path().canonicalize().unwrap());
    policy.limits.processes = None;
    policy.limits.memory_bytes = None;
    let ticks = policy.workspace.join("ticks");
    let marker = format!("left-behind-{}", std::process::id());
    let request = ExecRequest {
        command: format!(
            "setsid bash -c ': {marker}; while :; do echo $EPOCHREALTIME >> ticks; done' \
             </dev/null >/dev/null 2>&1 & while [ ! -s ticks ]; do :; done; sleep 0.05"
        ),
        timeout: Duration::from_secs(60),
        output_cap: 1 << 10,
    };
    let _spinners = Spinners::start(2);
    let mut ran_on = RanOn::default();
    for _ in 0..12 {
        let _ = std::fs::remove_file(&ticks);
        let outcome = Sandbox
            .exec(&policy, &request, None, CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
        let (pass, entered) = ran_on.enter(&policy.workspace, &marker).await;
        ran_on.hold(pass, entered, &ticks).await;
    }
    ran_on.assert_none();
}
