//! A root server's sandboxes run as the session's user.
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use agentd_sandbox::Policy;
use agentd_sandbox::confined::FsIdentity;

use crate::support::{run, wait_for_spare, workspace};

/// An unprivileged uid no other test uses.
pub const AGENT_UID: u32 = 231_017;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

pub async fn agent_work_runs_as_the_session_user(served: bool) {
    let ws = workspace("agentd-run-as");
    // The workspace sits in a directory only root may enter, as under a
    // server's data dir: the sandbox must still get it (by descriptor).
    let parent = ws.path.parent().unwrap();
    std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(ws.path.join("root-only"), "root secret").unwrap();
    std::fs::set_permissions(
        ws.path.join("root-only"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let identity = FsIdentity {
        uid: AGENT_UID,
        gid: AGENT_UID,
    };
    if is_root() {
        std::os::unix::fs::chown(&ws.path, Some(AGENT_UID), Some(AGENT_UID)).unwrap();
    }
    let mut policy = Policy::new(&ws.path);
    policy.run_as = Some(identity);
    for round in 0..3 {
        let used = agentd_sandbox::spares_used();
        if served && round > 0 {
            wait_for_spare().await;
        }
        let outcome = run(
            &policy,
            "id -u; id -g; id -G; grep CapEff /proc/self/status; touch made; cat root-only || echo denied",
        )
        .await;
        assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
        let lines: Vec<&str> = outcome.stdout.lines().collect();
        let own = rustix::process::geteuid().as_raw().to_string();
        let expected = if is_root() {
            AGENT_UID.to_string()
        } else {
            own.clone()
        };
        assert_eq!(lines[0], expected, "{outcome:?}");
        assert_ne!(lines[0], "0", "agent work never runs as root");
        if is_root() {
            assert_eq!(lines[1], expected);
            assert_eq!(lines[2], expected, "no supplementary groups");
            assert_eq!(lines[3], "CapEff:\t0000000000000000");
            assert_eq!(lines[4], "denied", "a root-only file stays unreadable");
            let made = std::fs::metadata(ws.path.join("made")).unwrap();
            assert_eq!((made.uid(), made.gid()), (AGENT_UID, AGENT_UID));
        }
        let served_now = agentd_sandbox::spares_used() > used;
        assert_eq!(served_now, served && round > 0, "round {round}");
    }
}

/// As the agent's uid the sandbox gets no RLIMIT_NPROC (it would count all of
/// that user's sessions together): its cgroup's `pids.max` still binds it.
pub async fn the_process_limit_binds_the_agents_sandbox() {
    let ws = workspace("agentd-run-as-pids");
    if is_root() {
        std::os::unix::fs::chown(&ws.path, Some(AGENT_UID), Some(AGENT_UID)).unwrap();
    }
    let mut policy = Policy::new(&ws.path);
    policy.run_as = Some(FsIdentity {
        uid: AGENT_UID,
        gid: AGENT_UID,
    });
    policy.limits.processes = Some(16);
    let outcome = crate::support::run_for(
        &policy,
        "for i in $(seq 40); do sleep 30 & done",
        std::time::Duration::from_secs(3),
    )
    .await;
    assert!(
        outcome.stderr.contains("fork"),
        "40 background processes were allowed: {outcome:?}"
    );
}
