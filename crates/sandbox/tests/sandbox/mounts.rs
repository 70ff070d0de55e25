//! `Policy::mounts`: host directories bound at paths of their own, read-only
//! or writable, by descriptor.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::time::Duration;

use agentd_sandbox::{Mount, PathGuard, Policy, Sandbox};
use tokio_util::sync::CancellationToken;

use crate::support::{failed, layout, request, run};

fn mount(host: &std::path::Path, path: &str, read_only: bool) -> Mount {
    Mount {
        host: host.to_path_buf(),
        path: path.into(),
        read_only,
    }
}

#[tokio::test]
async fn a_read_only_mount_is_readable_and_unwritable_and_a_writable_one_writable() {
    let l = layout();
    let (ro, rw) = (l.root.join("ro"), l.root.join("rw"));
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::create_dir_all(&rw).unwrap();
    std::fs::write(ro.join("seen.txt"), "from the host\n").unwrap();
    let mut policy = Policy::new(&l.ws);
    policy.mounts = vec![mount(&ro, "/mnt/ro", true), mount(&rw, "/mnt/rw", false)];

    let outcome = run(&policy, "cat /mnt/ro/seen.txt").await;
    assert_eq!(outcome.stdout, "from the host\n", "{outcome:?}");
    let outcome = run(&policy, "echo x > /mnt/ro/new.txt").await;
    assert!(failed(&outcome), "{outcome:?}");
    assert!(outcome.stderr.contains("Read-only"), "{outcome:?}");
    assert!(!ro.join("new.txt").exists());

    let outcome = run(&policy, "echo written > /mnt/rw/new.txt").await;
    assert!(!failed(&outcome), "{outcome:?}");
    assert_eq!(
        std::fs::read_to_string(rw.join("new.txt")).unwrap(),
        "written\n"
    );
}

#[tokio::test]
async fn a_mount_swapped_for_a_link_is_not_followed() {
    let l = layout();
    let host = l.root.join("swapped");
    std::fs::create_dir_all(&host).unwrap();
    let mut policy = Policy::new(&l.ws);
    policy.mounts = vec![mount(&host, "/mnt/m", false)];
    // Replaced by a link to the other workspace before the sandbox starts.
    std::fs::remove_dir(&host).unwrap();
    std::os::unix::fs::symlink(&l.other, &host).unwrap();
    let outcome = run(&policy, "cat /mnt/m/secret.txt").await;
    assert!(failed(&outcome), "{outcome:?}");
    assert!(!outcome.stdout.contains("secret"), "{outcome:?}");
}

#[tokio::test]
async fn a_mount_over_a_system_dir_or_the_workspace_is_refused() {
    let l = layout();
    let ws = l.ws.to_str().unwrap();
    for path in ["/usr", "/", "/proc/x", ws] {
        let mut policy = Policy::new(&l.ws);
        policy.mounts = vec![mount(&l.other, path, true)];
        let refused = Sandbox
            .exec(
                &policy,
                &request("true", Duration::from_secs(20)),
                None,
                CancellationToken::new(),
            )
            .await
            .unwrap_err();
        let refused = refused.to_string();
        assert!(
            refused.contains("shadow") || refused.contains("replace the sandbox's `/`"),
            "{path}: {refused}"
        );
    }
}

#[test]
fn the_file_tools_guard_maps_mount_paths_and_knows_read_only_ones() {
    let l = layout();
    let ro = l.root.join("ro2");
    std::fs::create_dir_all(&ro).unwrap();
    let guard = PathGuard::new(&l.ws, &[])
        .unwrap()
        .with_mounts(&[mount(&ro, "/mnt/ro", true)]);
    let resolved = guard.resolve("/mnt/ro/a.txt").unwrap();
    assert_eq!(resolved, ro.join("a.txt"));
    assert!(guard.is_read_only(&resolved));
    assert_eq!(guard.display(&resolved), "/mnt/ro/a.txt");
    assert!(!guard.is_read_only(&guard.resolve("a.txt").unwrap()));
    assert!(guard.resolve("/mnt/other/a.txt").is_err());
}
