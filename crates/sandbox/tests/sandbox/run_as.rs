//! `Policy::run_as` without the trampoline (a library user's path: the
//! binds are staged and the user switched between fork and exec).
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use agentd_sandbox::Policy;
use agentd_sandbox::confined::FsIdentity;

use crate::support::{layout, run};

const AGENT_UID: u32 = 231_018;

#[tokio::test]
async fn a_root_servers_sandbox_runs_as_the_session_user() {
    let l = layout();
    let root = rustix::process::geteuid().is_root();
    if root {
        std::os::unix::fs::chown(&l.ws, Some(AGENT_UID), Some(AGENT_UID)).unwrap();
    }
    // Only root may walk into the sessions directory, as into a data dir.
    std::fs::set_permissions(
        l.ws.parent().unwrap(),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    std::fs::create_dir_all(l.ws.join(".git")).unwrap();
    let mut policy = Policy::new(&l.ws);
    policy.run_as = Some(FsIdentity {
        uid: AGENT_UID,
        gid: AGENT_UID,
    });
    let outcome = run(
        &policy,
        "id -u; id -G; touch made; echo x > .git/hooks/pre-commit || echo protected; cat ../other/secret.txt || echo unreachable",
    )
    .await;
    let own = rustix::process::geteuid().as_raw().to_string();
    let expected = if root { AGENT_UID.to_string() } else { own };
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(lines[0], expected, "{outcome:?}");
    assert_eq!(lines[2], "protected", "{outcome:?}");
    assert_eq!(lines[3], "unreachable", "{outcome:?}");
    if root {
        assert_eq!(lines[1], expected);
        assert_eq!(
            std::fs::metadata(l.ws.join("made")).unwrap().uid(),
            AGENT_UID
        );
        // The git protection made its pieces for the agent's user.
        assert_eq!(
            std::fs::metadata(l.ws.join(".git/config")).unwrap().uid(),
            AGENT_UID
        );
    }
}
