//! Checkpoints against an agent that swaps its workspace's files and
//! directories for symlinks while a snapshot or a restore runs (as parallel
//! subagents can): nothing outside the workspace is ever read or written,
//! and a FIFO never blocks either.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_testkit::swapper::Swapper;
use rustix::fs::CWD;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agentd_snapshot::{BlobStore, MemoryBlobs, SkipReason, Snapshotter};
use async_trait::async_trait;

const MARKER: &[u8] = b"MARKER-7f3a: the other side of the swap";

/// A blob store that counts blobs holding the marker.
#[derive(Default)]
struct Watched {
    inner: MemoryBlobs,
    leaks: AtomicUsize,
}

#[async_trait]
impl BlobStore for Watched {
    async fn missing(&self, hashes: &[String]) -> Result<Vec<String>, String> {
        self.inner.missing(hashes).await
    }

    async fn put(&self, blobs: &[(String, Vec<u8>)]) -> Result<(), String> {
        for (_, bytes) in blobs {
            if contains(bytes, MARKER) {
                self.leaks.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.inner.put(blobs).await
    }

    async fn get(&self, hash: &str) -> Result<Option<Vec<u8>>, String> {
        self.inner.get(hash).await
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Everything under `dir` (names, kinds, contents, modes, owners), links
/// not followed.
fn state(dir: &Path) -> BTreeMap<PathBuf, (u32, u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let content = if meta.is_symlink() {
                fs::read_link(&path)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else if meta.is_dir() {
                stack.push(path.clone());
                Vec::new()
            } else {
                fs::read(&path).unwrap()
            };
            out.insert(path, (meta.mode(), meta.uid(), content));
        }
    }
    out
}

/// `ws` with a file and a directory to swap with links to `other`, which
/// holds the marker under the same names.
fn setup(root: &Path) -> (PathBuf, PathBuf) {
    let (ws, other) = (root.join("ws"), root.join("other"));
    fs::create_dir_all(other.join("sub")).unwrap();
    fs::write(other.join("marker.txt"), MARKER).unwrap();
    fs::write(other.join("f.txt"), MARKER).unwrap();
    fs::write(other.join("sub/f.txt"), MARKER).unwrap();
    fs::create_dir_all(ws.join("d/sub")).unwrap();
    fs::write(ws.join("a.txt"), "inside a\n").unwrap();
    fs::write(ws.join("d/f.txt"), "inside d\n").unwrap();
    fs::write(ws.join("d/sub/f.txt"), "inside d/sub\n").unwrap();
    symlink(other.join("marker.txt"), ws.join("swap_file")).unwrap();
    symlink(&other, ws.join("swap_dir")).unwrap();
    (ws, other)
}

/// Hundreds of snapshots and restores while `a.txt` and `d` flip with links
/// to the other directory: no blob ever holds its marker, nothing there
/// changes, and the flipper did swap.
#[tokio::test]
async fn swapped_links_are_never_followed_by_snapshots_or_restores() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, other) = setup(dir.path());
    let other_before = state(&other);
    let blobs = Watched::default();
    let snap = Snapshotter::default();
    let (base, _) = snap.snapshot(&ws, None, &blobs).await.unwrap();

    let flipper = Swapper::start(vec![
        (ws.join("a.txt"), ws.join("swap_file")),
        (ws.join("d"), ws.join("swap_dir")),
    ]);
    let (mut snapshots, mut restores) = (0, 0);
    let work = async {
        for round in 0..300 {
            // No previous manifest: every file is read every time.
            if snap.snapshot(&ws, None, &blobs).await.is_ok() {
                snapshots += 1;
            }
            // Conflicts are expected (a parent is a link now); escapes are not.
            let restored = if round % 2 == 0 {
                snap.restore(&ws, &base, &blobs).await
            } else {
                snap.restore_as(&ws, &base, &blobs, None).await
            };
            if restored.is_ok() {
                restores += 1;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(120), work)
        .await
        .expect("300 rounds in bounded time");
    let swaps = flipper.finish();

    assert!(swaps > 0, "the flipper never swapped");
    assert!(snapshots > 0 && restores > 0, "{snapshots} {restores}");
    assert_eq!(
        blobs.leaks.load(Ordering::Relaxed),
        0,
        "the marker was read"
    );
    assert_eq!(state(&other), other_before, "the other side was written");
    for (path, (_, _, content)) in state(&ws) {
        assert!(!contains(&content, MARKER), "{path:?} holds the marker");
    }
}

/// A FIFO in the workspace, and one swapped in where a file was, neither
/// blocks a snapshot nor a restore: it is skipped or replaced at once.
#[tokio::test]
async fn a_fifo_never_blocks_a_snapshot_or_a_restore() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir(&ws).unwrap();
    fs::write(ws.join("a.txt"), "a\n").unwrap();
    fs::write(ws.join("b.txt"), "b\n").unwrap();
    let fifo = |name: &str| {
        rustix::fs::mkfifoat(CWD, ws.join(name), rustix::fs::Mode::from_raw_mode(0o644)).unwrap()
    };
    fifo("pipe");
    fifo("swap_pipe");
    let blobs = MemoryBlobs::new();
    let snap = Snapshotter::default();
    let bounded = Duration::from_secs(10);
    let (base, _) = tokio::time::timeout(bounded, snap.snapshot(&ws, None, &blobs))
        .await
        .expect("a FIFO does not block a snapshot")
        .unwrap();
    assert_eq!(base.skipped.get("pipe"), Some(&SkipReason::Special));
    assert!(base.entries.contains_key("a.txt"));

    let flipper = Swapper::start(vec![(ws.join("a.txt"), ws.join("swap_pipe"))]);
    for _ in 0..100 {
        let snapshot = tokio::time::timeout(bounded, snap.snapshot(&ws, None, &blobs));
        snapshot.await.expect("no snapshot blocks").unwrap();
        let restore = tokio::time::timeout(bounded, snap.restore(&ws, &base, &blobs));
        let _ = restore.await.expect("no restore blocks");
    }
    assert!(flipper.finish() > 0, "the flipper never swapped");
}

/// A restore as the workspace's user makes what it creates that user's
/// (only a root server can act as another user; otherwise nothing to see).
#[tokio::test]
async fn a_restore_as_an_identity_creates_files_it_owns() {
    if !rustix::process::geteuid().is_root() {
        return;
    }
    let nobody = agentd_sandbox::confined::FsIdentity {
        uid: 65534,
        gid: 65534,
    };
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir(&ws).unwrap();
    fs::write(ws.join("a.txt"), "a\n").unwrap();
    fs::create_dir(ws.join("d")).unwrap();
    fs::write(ws.join("d/b.txt"), "b\n").unwrap();
    let blobs = MemoryBlobs::new();
    let snap = Snapshotter::default();
    let (manifest, _) = snap.snapshot(&ws, None, &blobs).await.unwrap();

    let fork = dir.path().join("fork");
    fs::create_dir(&fork).unwrap();
    std::os::unix::fs::chown(&fork, Some(nobody.uid), Some(nobody.gid)).unwrap();
    snap.restore_as(&fork, &manifest, &blobs, Some(nobody))
        .await
        .unwrap();
    for path in ["a.txt", "d", "d/b.txt"] {
        let meta = fs::symlink_metadata(fork.join(path)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (nobody.uid, nobody.gid), "{path}");
    }
    assert_eq!(fs::read_to_string(fork.join("d/b.txt")).unwrap(), "b\n");

    // What that user may not write is not written for it.
    let locked = dir.path().join("locked");
    fs::create_dir(&locked).unwrap();
    let err = snap
        .restore_as(&locked, &manifest, &blobs, Some(nobody))
        .await;
    assert!(err.is_err(), "wrote into root's directory as nobody");
    assert_eq!(fs::read_dir(&locked).unwrap().count(), 0);
}

/// An agent can nest directories without end (`mkdir 0 1; cd 0` in a loop);
/// the scan holds a descriptor per level still to be read, so it stops at a
/// depth instead of running the server out of descriptors.
#[tokio::test]
async fn a_deep_comb_of_directories_is_cut_off_not_held_open() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    fs::create_dir(&ws).unwrap();
    let mut dir = ws.clone();
    for _ in 0..600 {
        fs::create_dir(dir.join("1")).unwrap();
        dir = dir.join("0");
        fs::create_dir(&dir).unwrap();
    }
    let open_fds = || fs::read_dir("/proc/self/fd").unwrap().count();
    let before = open_fds();
    let peak = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(
                    fs::read_dir("/proc/self/fd").unwrap().count(),
                    Ordering::Relaxed,
                );
                std::thread::sleep(Duration::from_micros(100));
            }
        })
    };
    let blobs = MemoryBlobs::default();
    let (manifest, _) = Snapshotter::default()
        .snapshot(&ws, None, &blobs)
        .await
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let deep = manifest
        .skipped
        .iter()
        .find(|(_, reason)| matches!(reason, SkipReason::Unreadable { error } if error.contains("nested deeper")));
    assert!(deep.is_some(), "{:?}", manifest.skipped);
    let peak = peak.load(Ordering::Relaxed);
    assert!(
        peak < before + 200,
        "{before} descriptors before, {peak} during the scan"
    );
}
