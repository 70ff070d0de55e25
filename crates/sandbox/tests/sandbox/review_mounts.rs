//! Red-team review (i24b): a host mount is opened by the root server, so
//! its bind (and the file tools' root) skips the permission checks of the
//! directories above it. A directory the agent's uid could never reach on
//! the host (inside another uid's 0700 directory) becomes readable once it
//! is mounted. These tests state the wanted behaviour and fail today.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use agentd_sandbox::confined::{self, FsIdentity};
use agentd_sandbox::{Mount, PathGuard, Policy};

use crate::support::{layout, run};

const AGENT_UID: u32 = 231_041;
const OTHER_UID: u32 = 231_042;
const SECRET: &str = "bob-private-key";

/// `root/bob` (0700, another uid's) holding `keys` (0755) with a 0644 file:
/// the usual shape of a private home or project directory.
fn private_tree(root: &Path) -> std::path::PathBuf {
    let bob = root.join("bob");
    let keys = bob.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    std::fs::write(keys.join("id"), SECRET).unwrap();
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(keys.join("id"), std::fs::Permissions::from_mode(0o644)).unwrap();
    for path in [&bob, &keys, &keys.join("id")] {
        std::os::unix::fs::chown(path, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
    }
    std::fs::set_permissions(&bob, std::fs::Permissions::from_mode(0o700)).unwrap();
    keys
}

fn agent() -> FsIdentity {
    FsIdentity {
        uid: AGENT_UID,
        gid: AGENT_UID,
    }
}

#[tokio::test]
async fn a_mount_does_not_reach_past_a_parent_the_agent_cannot_enter_bash() {
    if !rustix::process::geteuid().is_root() {
        return;
    }
    let l = layout();
    std::os::unix::fs::chown(&l.ws, Some(AGENT_UID), Some(AGENT_UID)).unwrap();
    let keys = private_tree(&l.root);
    let mut policy = Policy::new(&l.ws);
    policy.run_as = Some(agent());
    // Without the mount, the agent's uid cannot read it (the parent is 0700).
    let direct = run(
        &policy,
        &format!("cat {}/id || echo unreachable", keys.display()),
    )
    .await;
    assert!(!direct.stdout.contains(SECRET), "{direct:?}");

    policy.mounts = vec![Mount::pinned(&keys, Path::new("/mnt/keys"), true).unwrap()];
    let outcome = run(&policy, "cat /mnt/keys/id || echo unreachable").await;
    assert!(
        !outcome.stdout.contains(SECRET),
        "the mount handed the agent's uid a directory it cannot reach on the host: {outcome:?}"
    );
}

#[test]
fn a_mount_does_not_reach_past_a_parent_the_agent_cannot_enter_file_tools() {
    if !rustix::process::geteuid().is_root() {
        return;
    }
    let l = layout();
    let keys = private_tree(&l.root);
    let mount = Mount::pinned(&keys, Path::new("/mnt/keys"), true).unwrap();
    let guard = PathGuard::new(&l.ws, &[])
        .unwrap()
        .with_mounts(&[mount])
        .unwrap()
        .with_identity(Some(agent()));
    let resolved = guard.resolve("/mnt/keys/id").unwrap();
    let read = guard.confined(&resolved, |root, rel| {
        confined::read_regular(root, rel, 1024)
    });
    assert!(
        read.is_err(),
        "Read (as the agent's uid) got a file it cannot reach on the host: {:?}",
        read.map(|b| String::from_utf8_lossy(&b).into_owned())
    );
}
