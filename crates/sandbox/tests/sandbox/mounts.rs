//! `Policy::mounts`: host directories bound at paths of their own, read-only
//! or writable, by descriptor, each pinned to the directory that was checked.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agentd_sandbox::confined::{self, ConfinedError};
use agentd_sandbox::{Mount, PathGuard, Policy, Sandbox};
use rustix::fs::{CWD, RenameFlags};
use tokio_util::sync::CancellationToken;

use crate::support::{OTHER_SECRET, failed, layout, request, run};

fn mount(host: &Path, path: &str, read_only: bool) -> Mount {
    Mount::pinned(host, Path::new(path), read_only).unwrap()
}

/// What the sandbox answers for `policy` when it refuses to start.
async fn refusal(policy: &Policy) -> String {
    Sandbox
        .exec(
            policy,
            &request("true", Duration::from_secs(20)),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap_err()
        .to_string()
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
async fn a_mount_swapped_for_a_link_after_its_check_is_refused() {
    let l = layout();
    let host = l.root.join("swapped");
    std::fs::create_dir_all(&host).unwrap();
    let mut policy = Policy::new(&l.ws);
    policy.mounts = vec![mount(&host, "/mnt/m", false)];
    // Replaced by a link to the other workspace before the sandbox starts.
    std::fs::remove_dir(&host).unwrap();
    std::os::unix::fs::symlink(&l.other, &host).unwrap();
    let refused = refusal(&policy).await;
    assert!(refused.contains("symbolic link"), "{refused}");
}

#[tokio::test]
async fn a_mount_replaced_by_another_real_directory_is_refused() {
    let l = layout();
    let host = l.root.join("replaced");
    std::fs::create_dir_all(&host).unwrap();
    let mut policy = Policy::new(&l.ws);
    policy.mounts = vec![mount(&host, "/mnt/m", false)];
    // No link anywhere: only the pin tells it is not the checked directory.
    std::fs::rename(&host, l.root.join("moved-away")).unwrap();
    std::fs::create_dir(&host).unwrap();
    let refused = refusal(&policy).await;
    assert!(
        refused.contains("no longer the directory checked"),
        "{refused}"
    );
}

#[tokio::test]
async fn mounts_are_refused_without_the_sandbox() {
    let l = layout();
    let host = l.root.join("plain");
    std::fs::create_dir_all(&host).unwrap();
    let mut policy = Policy::new(&l.ws);
    policy.unsandboxed = true;
    policy.mounts = vec![mount(&host, "/mnt/m", true)];
    let refused = refusal(&policy).await;
    assert!(refused.contains("need the sandbox"), "{refused}");
}

#[tokio::test]
async fn a_mount_over_a_system_dir_or_the_workspace_is_refused() {
    let l = layout();
    let ws = l.ws.to_str().unwrap();
    for path in ["/usr", "/", "/proc/x", ws] {
        let mut policy = Policy::new(&l.ws);
        policy.mounts = vec![mount(&l.other, path, true)];
        let refused = refusal(&policy).await;
        assert!(
            refused.contains("shadow") || refused.contains("replace the sandbox's `/`"),
            "{path}: {refused}"
        );
    }
}

/// A thread exchanging a component of a mount's host path with a link to a
/// secret directory, as fast as it can, while commands start: each one sees
/// the checked directory or is refused, never the secret.
#[tokio::test]
async fn a_component_swapped_for_a_link_never_shows_what_it_leads_to() {
    let l = layout();
    let real = l.root.join("swap/m");
    std::fs::create_dir_all(real.join("data")).unwrap();
    std::fs::write(real.join("data/file.txt"), "public\n").unwrap();
    let secret = l.root.join("secret");
    std::fs::create_dir_all(secret.join("data")).unwrap();
    std::fs::write(secret.join("data/file.txt"), OTHER_SECRET).unwrap();
    let link = l.root.join("swap/link");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let mut policy = Policy::new(&l.ws);
    policy.mounts = vec![mount(&real.join("data"), "/mnt/data", true)];
    let guard = PathGuard::new(&l.ws, &[]).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicUsize::new(0));
    let swapper = {
        let (stop, swaps, real, link) = (stop.clone(), swaps.clone(), real.clone(), link.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if rustix::fs::renameat_with(CWD, &real, CWD, &link, RenameFlags::EXCHANGE).is_ok()
                {
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
                // Longer while the real directory is in place, so commands
                // also start (and finish) between swaps, not only across them.
                let linked = swaps.load(Ordering::Relaxed) % 2 == 1;
                std::thread::sleep(Duration::from_micros(if linked { 300 } else { 6000 }));
            }
        })
    };
    let (mut seen, mut refused, mut read_ok) = (0, 0, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while (seen < 10 || refused < 10) && std::time::Instant::now() < deadline {
        match Sandbox
            .exec(
                &policy,
                &request("cat /mnt/data/file.txt", Duration::from_secs(20)),
                None,
                CancellationToken::new(),
            )
            .await
        {
            Ok(outcome) if !failed(&outcome) => {
                assert_eq!(outcome.stdout, "public\n", "{outcome:?}");
                seen += 1;
            }
            // bubblewrap turns a descriptor back into a path and checks the
            // mount it made against the descriptor: a swap between its
            // steps makes it give up before the command runs.
            Ok(outcome) => {
                assert!(!outcome.stdout.contains(OTHER_SECRET), "{outcome:?}");
                assert!(outcome.stderr.starts_with("bwrap: "), "{outcome:?}");
                refused += 1;
            }
            Err(err) => {
                let err = err.to_string();
                assert!(!err.contains(OTHER_SECRET), "{err}");
                refused += 1;
            }
        }
        // The file tools' root, opened at the same moment as a turn would.
        if let Ok(guard) = guard.clone().with_mounts(&policy.mounts) {
            let file = guard.resolve("/mnt/data/file.txt");
            if let Ok(file) = file {
                let read =
                    guard.confined(&file, |root, rel| confined::read_regular(root, rel, 1024));
                if let Ok(bytes) = read {
                    assert_eq!(bytes, b"public\n");
                    read_ok += 1;
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        swaps.load(Ordering::Relaxed) > 0,
        "the swapper never swapped"
    );
    assert!(seen > 0 && refused > 0, "seen {seen}, refused {refused}");
    assert!(read_ok > 0, "no Read got through");
}

#[test]
fn the_file_tools_guard_maps_mount_paths_and_refuses_writes_on_read_only_ones() {
    let l = layout();
    let (ro, rw) = (l.root.join("ro2"), l.root.join("rw2"));
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::create_dir_all(&rw).unwrap();
    let guard = PathGuard::new(&l.ws, &[])
        .unwrap()
        .with_mounts(&[mount(&ro, "/mnt/ro", true), mount(&rw, "/mnt/rw", false)])
        .unwrap();
    let resolved = guard.resolve("/mnt/ro/a.txt").unwrap();
    assert_eq!(resolved, ro.join("a.txt"));
    assert!(guard.is_read_only(&resolved));
    assert_eq!(guard.display(&resolved), "/mnt/ro/a.txt");
    fn write(root: BorrowedFd<'_>, rel: &Path) -> Result<confined::Written, ConfinedError> {
        confined::write_atomic(root, rel, b"x", true)
    }
    let err = guard.confined_write(&resolved, write).unwrap_err();
    assert!(matches!(err, ConfinedError::ReadOnly), "{err}");
    assert!(!ro.join("a.txt").exists());
    let resolved = guard.resolve("/mnt/rw/a.txt").unwrap();
    guard.confined_write(&resolved, write).unwrap();
    assert_eq!(std::fs::read(rw.join("a.txt")).unwrap(), b"x");
    assert!(!guard.is_read_only(&guard.resolve("a.txt").unwrap()));
    assert!(guard.resolve("/mnt/other/a.txt").is_err());
}

#[test]
fn the_file_tools_guard_refuses_a_mount_that_is_not_the_checked_directory() {
    let l = layout();
    let host = l.root.join("pinned");
    std::fs::create_dir_all(&host).unwrap();
    let checked = mount(&host, "/mnt/p", false);
    std::fs::rename(&host, l.root.join("elsewhere")).unwrap();
    std::fs::create_dir(&host).unwrap();
    let guard = PathGuard::new(&l.ws, &[]).unwrap();
    let err = guard
        .clone()
        .with_mounts(std::slice::from_ref(&checked))
        .unwrap_err();
    assert!(
        err.to_string().contains("no longer the directory checked"),
        "{err}"
    );
    std::fs::remove_dir(&host).unwrap();
    std::os::unix::fs::symlink(l.root.join("elsewhere"), &host).unwrap();
    let err = guard.with_mounts(&[checked]).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
}
