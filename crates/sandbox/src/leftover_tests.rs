//! A command that ended by itself may leave processes behind, which its
//! sandbox's PID 1 kills as it exits. Without a cgroup, the command's gate
//! pass must not go before they are gone.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;

use crate::gate::{self, Side};
use crate::race_tests::{Spinners, alive_with, last_tick};
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
    let (mut late, mut alive) = (Vec::new(), Vec::new());
    for _ in 0..12 {
        let _ = std::fs::remove_file(&ticks);
        let outcome = Sandbox
            .exec(&policy, &request, None, CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
        let entering = gate::enter(&policy.workspace, Side::PinnedStart, false);
        let (pass, _) = tokio::time::timeout(Duration::from_secs(30), entering)
            .await
            .expect("the command's pass never went");
        let entered = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let left = alive_with(&marker);
        if left > 0 {
            alive.push(left);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(pass);
        let last = last_tick(&ticks);
        if last > entered {
            late.push(last - entered);
        }
    }
    assert!(
        late.is_empty() && alive.is_empty(),
        "ran on after the pass went, by (s): {late:?}; processes alive then: {alive:?}"
    );
}
