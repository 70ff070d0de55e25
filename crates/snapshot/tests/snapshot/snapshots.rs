//! Workspace checkpoints on real temp dirs: snapshot, change, restore, compare.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::Path;

use agentd_snapshot::{
    CheckpointError, EntryKind, Manifest, MemoryBlobs, SkipReason, SnapshotPolicy, Snapshotter,
    decode_manifest, encode_manifest,
};

use crate::trees::{age, assert_same_tree, captured, chmod, ignored, sample, tree, write};

#[tokio::test]
async fn restore_undoes_every_kind_of_change() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    sample(ws);
    let before = captured(ws);
    let blobs = MemoryBlobs::new();
    let snap = Snapshotter::default();
    let (manifest, stats) = snap.snapshot(ws, None, &blobs).await.unwrap();
    assert_eq!(stats.files, 9);
    assert_eq!(stats.new_blobs, 8, "two files share one blob");
    assert_eq!(blobs.len(), 8);
    assert_eq!(manifest.len(), before.len());

    write(ws, "README.md", "# changed\n");
    write(ws, "new/a/b/c.txt", "created\n");
    fs::remove_file(ws.join("src/lib.rs")).unwrap();
    chmod(ws, "script.sh", 0o755);
    chmod(ws, "private", 0o755);
    fs::remove_file(ws.join("becomes_link")).unwrap();
    symlink("/etc", ws.join("becomes_link")).unwrap();
    fs::remove_file(ws.join("becomes_file")).unwrap();
    write(ws, "becomes_file", "now a file\n");
    fs::remove_dir_all(ws.join("was_dir")).unwrap();
    write(ws, "was_dir", "a file where a dir was\n");
    fs::create_dir(ws.join("added_empty")).unwrap();
    fs::remove_dir_all(ws.join("empty")).unwrap();
    write(ws, "dup2.txt", "diverged\n");
    fs::remove_file(ws.join("dup1.txt")).unwrap();
    write(ws, "dup1.txt/now/a_dir.txt", "a dir where a file was\n");
    write(ws, ".git/HEAD", "ref: refs/heads/other\n");
    write(ws, "node_modules/pkg2/index.js", "new\n");
    let ignored_now: BTreeMap<_, _> = tree(ws).into_iter().filter(|(p, _)| ignored(p)).collect();

    let changed = snap.restore(ws, &manifest, &blobs).await.unwrap();
    assert_same_tree(&captured(ws), &before);
    let ignored_after: BTreeMap<_, _> = tree(ws).into_iter().filter(|(p, _)| ignored(p)).collect();
    assert_same_tree(&ignored_after, &ignored_now);
    for path in [
        "README.md",
        "new",
        "new/a/b/c.txt",
        "src/lib.rs",
        "script.sh",
        "private",
        "becomes_link",
        "becomes_file",
        "was_dir",
        "was_dir/inner.txt",
        "added_empty",
        "empty",
        "empty/also_empty",
        "dup2.txt",
        "dup1.txt",
        "dup1.txt/now/a_dir.txt",
    ] {
        assert!(
            changed.iter().any(|c| c == path),
            "{path} not in {changed:?}"
        );
    }
    assert!(
        !changed
            .iter()
            .any(|c| c == "src" || c == "src/nested/deep.rs")
    );

    // A second restore has nothing left to do.
    assert_eq!(
        snap.restore(ws, &manifest, &blobs).await.unwrap(),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn unchanged_files_are_not_rehashed() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    for i in 0..50 {
        write(ws, &format!("d{}/f{i}.txt", i % 5), &format!("file {i}\n"));
    }
    age();
    let blobs = MemoryBlobs::new();
    let snap = Snapshotter::default();
    let (m1, s1) = snap.snapshot(ws, None, &blobs).await.unwrap();
    assert_eq!((s1.files, s1.hashed_files, s1.new_blobs), (50, 50, 50));
    assert_eq!(
        s1.changed.len(),
        55,
        "every path is new without a previous manifest"
    );

    let (m2, s2) = snap.snapshot(ws, Some(&m1), &blobs).await.unwrap();
    assert_eq!((s2.hashed_files, s2.new_blobs, s2.new_bytes), (0, 0, 0));
    assert!(s2.changed.is_empty());
    assert_eq!(m2, m1);

    write(ws, "d0/f0.txt", "edited\n");
    write(ws, "d1/f1.txt", "file 2\n"); // content another file already has
    chmod(ws, "d2/f2.txt", 0o755);
    let (m3, s3) = snap.snapshot(ws, Some(&m2), &blobs).await.unwrap();
    assert_eq!(s3.changed, ["d0/f0.txt", "d1/f1.txt", "d2/f2.txt"]);
    assert_eq!(s3.hashed_files, s3.changed.len());
    assert_eq!((s3.new_blobs, s3.new_bytes), (1, 7));
    assert_eq!(m3.len(), m1.len());
}

#[tokio::test]
async fn ignored_dirs_are_neither_captured_nor_touched() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    sample(ws);
    let blobs = MemoryBlobs::new();
    let snap = Snapshotter::default();
    let (manifest, _) = snap.snapshot(ws, None, &blobs).await.unwrap();
    assert!(
        manifest.paths().all(|p| !ignored(p)),
        "{:?}",
        manifest.entries
    );
    for path in [".git", "node_modules", "crate/target"] {
        assert_eq!(
            manifest.skipped.get(path),
            Some(&SkipReason::Ignored),
            "{path}"
        );
    }

    // A new dir holding only an ignored dir stays, with it.
    write(ws, "pkg/node_modules/dep/index.js", "x\n");
    write(ws, "pkg/extra.txt", "goes away\n");
    fs::remove_dir_all(ws.join("crate/target")).unwrap();
    let changed = snap.restore(ws, &manifest, &blobs).await.unwrap();
    assert_eq!(changed, ["pkg/extra.txt"]);
    assert!(ws.join("pkg/node_modules/dep/index.js").is_file());
    assert!(
        !ws.join("crate/target").exists(),
        "restore does not bring ignored dirs back"
    );
    assert_eq!(
        fs::read_to_string(ws.join(".git/HEAD")).unwrap(),
        "ref: refs/heads/main\n"
    );
}

#[tokio::test]
async fn files_over_the_size_cap_are_skipped_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(ws, "small.txt", "small\n");
    write(ws, "big.bin", &"x".repeat(5000));
    write(ws, "shrinks.bin", &"x".repeat(5000));
    let snap = Snapshotter::new(SnapshotPolicy {
        max_file_bytes: 1000,
        ..SnapshotPolicy::default()
    });
    let blobs = MemoryBlobs::new();
    let (manifest, stats) = snap.snapshot(ws, None, &blobs).await.unwrap();
    assert_eq!(stats.files, 1);
    assert_eq!(
        manifest.skipped.get("big.bin"),
        Some(&SkipReason::TooLarge { size: 5000 })
    );
    assert_eq!(blobs.bytes_stored(), 6);

    write(ws, "big.bin", &"y".repeat(6000));
    write(ws, "bigger.bin", &"z".repeat(7000));
    write(
        ws,
        "shrinks.bin",
        "small now, still not the checkpoint's to touch\n",
    );
    write(ws, "small.txt", &"s".repeat(3000)); // captured small, now over the cap
    snap.restore(ws, &manifest, &blobs).await.unwrap();
    assert_eq!(fs::read(ws.join("big.bin")).unwrap(), vec![b'y'; 6000]);
    assert_eq!(fs::read(ws.join("bigger.bin")).unwrap(), vec![b'z'; 7000]);
    assert!(
        fs::read_to_string(ws.join("shrinks.bin"))
            .unwrap()
            .starts_with("small now")
    );
    assert_eq!(fs::read_to_string(ws.join("small.txt")).unwrap(), "small\n");
}

#[tokio::test]
async fn restore_into_an_empty_dir_reproduces_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir(&ws).unwrap();
    sample(&ws);
    chmod(&ws, "src/nested", 0o555); // read-only dir: its contents are written first
    let blobs = MemoryBlobs::new();
    let snap = Snapshotter::default();
    let (manifest, _) = snap.snapshot(&ws, None, &blobs).await.unwrap();
    let encoded = encode_manifest(&manifest, None);
    let decoded = decode_manifest(&encoded, None).unwrap();

    let fork = dir.path().join("fork/deeper");
    snap.restore(&fork, &decoded, &blobs).await.unwrap();
    assert_same_tree(&tree(&fork), &captured(&ws));
    chmod(&ws, "src/nested", 0o755);
    chmod(&fork, "src/nested", 0o755);
}

#[tokio::test]
async fn symlinks_are_recorded_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    write(&outside, "keep.txt", "outside\n");
    write(&ws, "d/f.txt", "inside\n");
    symlink("/etc", ws.join("x")).unwrap();
    symlink(&outside, ws.join("out")).unwrap();
    let blobs = MemoryBlobs::new();
    let snap = Snapshotter::default();
    let (manifest, stats) = snap.snapshot(&ws, None, &blobs).await.unwrap();
    assert_eq!(stats.files, 1, "nothing behind a symlink is read");
    let kind = |p: &str| manifest.entries.get(p).map(|e| e.kind.clone());
    assert_eq!(
        kind("x"),
        Some(EntryKind::Symlink {
            target: "/etc".into()
        })
    );
    assert!(
        manifest
            .paths()
            .all(|p| !p.starts_with("x/") && !p.starts_with("out/"))
    );

    // `d` becomes a symlink to the outside dir: the restore must not write `f.txt`
    // through it, but replace the link with a real dir.
    let before = captured(&ws);
    fs::remove_dir_all(ws.join("d")).unwrap();
    symlink(&outside, ws.join("d")).unwrap();
    fs::remove_file(ws.join("x")).unwrap();
    snap.restore(&ws, &manifest, &blobs).await.unwrap();
    assert_same_tree(&captured(&ws), &before);
    assert_eq!(fs::read_link(ws.join("x")).unwrap(), Path::new("/etc"));
    let outside_now: Vec<_> = tree(&outside).into_keys().collect();
    assert_eq!(outside_now, ["keep.txt"]);
}

#[tokio::test]
async fn delta_encoding_round_trips_and_is_small() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    for i in 0..2000 {
        write(
            ws,
            &format!("dir{}/sub{}/file{i}.txt", i % 20, i % 7),
            &format!("{i}\n"),
        );
    }
    age(); // racy entries would be re-stated, and so re-sent, by the next delta
    let blobs = MemoryBlobs::new();
    let snap = Snapshotter::default();
    let (m1, _) = snap.snapshot(ws, None, &blobs).await.unwrap();
    let full = encode_manifest(&m1, None);
    assert_eq!(decode_manifest(&full, None).unwrap(), m1);

    write(ws, "dir0/sub0/file0.txt", "changed\n");
    fs::remove_file(ws.join("dir1/sub1/file1.txt")).unwrap();
    write(ws, "dir2/new.txt", "new\n");
    let (m2, stats) = snap.snapshot(ws, Some(&m1), &blobs).await.unwrap();
    let delta = encode_manifest(&m2, Some(&m1));
    assert_eq!(stats.manifest_bytes, delta.len() as u64);
    assert!(
        delta.len() < 2048,
        "delta of 3 changes is {} bytes",
        delta.len()
    );
    assert!(
        full.len() > 20 * delta.len(),
        "full {} delta {}",
        full.len(),
        delta.len()
    );
    let decoded = decode_manifest(&delta, Some(&m1)).unwrap();
    assert_eq!(decoded, m2);
    assert_eq!(decoded.hash(), m2.hash());
    assert_ne!(m1.hash(), m2.hash());

    let err = decode_manifest(&delta, None).unwrap_err();
    assert!(err.to_string().contains("needs that base"), "{err}");
    let err = decode_manifest(&delta, Some(&m2)).unwrap_err();
    assert!(err.to_string().contains("was given base"), "{err}");
    assert!(decode_manifest(b"garbage", None).is_err());
}

#[tokio::test]
async fn same_size_edits_within_a_second_are_detected() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let blobs = MemoryBlobs::new();
    let snap = Snapshotter::default();

    // Edited right after the snapshot, same size: within one timestamp tick.
    write(ws, "quick.txt", "aaaa");
    let (m1, _) = snap.snapshot(ws, None, &blobs).await.unwrap();
    write(ws, "quick.txt", "bbbb");
    let (m2, s2) = snap.snapshot(ws, Some(&m1), &blobs).await.unwrap();
    assert_eq!(s2.changed, ["quick.txt"]);

    // Same size, mtime put back to what it was (as `touch -r` or a careful tool
    // would): ctime still moves.
    age();
    let (m3, _) = snap.snapshot(ws, Some(&m2), &blobs).await.unwrap();
    let mtime = fs::metadata(ws.join("quick.txt"))
        .unwrap()
        .modified()
        .unwrap();
    write(ws, "quick.txt", "cccc");
    fs::File::options()
        .write(true)
        .open(ws.join("quick.txt"))
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let (m4, s4) = snap.snapshot(ws, Some(&m3), &blobs).await.unwrap();
    assert_eq!(s4.changed, ["quick.txt"]);
    assert_eq!(s4.hashed_files, 1);
    fs::write(ws.join("quick.txt"), "dddd").unwrap();
    snap.restore(ws, &m4, &blobs).await.unwrap();
    assert_eq!(fs::read_to_string(ws.join("quick.txt")).unwrap(), "cccc");
}

#[tokio::test]
async fn special_and_non_utf8_paths_are_skipped_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(ws, "a.txt", "a\n");
    let _socket = std::os::unix::net::UnixListener::bind(ws.join("sock")).unwrap();
    let odd = ws.join(std::ffi::OsStr::from_bytes(b"odd\xff.txt"));
    fs::write(&odd, "odd\n").unwrap();
    let blobs = MemoryBlobs::new();
    let snap = Snapshotter::default();
    let (manifest, stats) = snap.snapshot(ws, None, &blobs).await.unwrap();
    assert_eq!(stats.files, 1);
    assert_eq!(manifest.skipped.get("sock"), Some(&SkipReason::Special));
    assert_eq!(
        manifest.skipped.get("odd\u{fffd}.txt"),
        Some(&SkipReason::NonUtf8)
    );
    fs::remove_file(ws.join("a.txt")).unwrap();
    assert_eq!(
        snap.restore(ws, &manifest, &blobs).await.unwrap(),
        ["a.txt"]
    );
    assert!(ws.join("sock").exists() && odd.exists());
}

#[tokio::test]
async fn past_max_files_the_rest_is_skipped_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    for i in 0..4 {
        write(ws, &format!("a/f{i}"), "a\n");
        write(ws, &format!("b/f{i}"), "b\n");
    }
    let snap = Snapshotter::new(SnapshotPolicy {
        max_files: 5, // a, b, a/f0, a/f1, a/f2; then b goes back to skipped
        ..SnapshotPolicy::default()
    });
    let blobs = MemoryBlobs::new();
    let (manifest, _) = snap.snapshot(ws, None, &blobs).await.unwrap();
    assert_eq!(
        manifest.paths().collect::<Vec<_>>(),
        ["a", "a/f0", "a/f1", "a/f2"]
    );
    assert_eq!(
        manifest.skipped.get("a/f3"),
        Some(&SkipReason::TooManyFiles)
    );
    assert_eq!(manifest.skipped.get("b"), Some(&SkipReason::TooManyFiles));
    fs::remove_file(ws.join("a/f0")).unwrap();
    assert_eq!(snap.restore(ws, &manifest, &blobs).await.unwrap(), ["a/f0"]);
    assert_eq!(tree(ws).len(), 10);
}

#[tokio::test]
async fn bad_blobs_and_manifests_fail_with_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(ws, "a.txt", "a\n");
    let blobs = MemoryBlobs::new();
    let snap = Snapshotter::default();
    let (manifest, _) = snap.snapshot(ws, None, &blobs).await.unwrap();
    let EntryKind::File { hash } = &manifest.entries["a.txt"].kind else {
        panic!("a.txt is a file");
    };
    fs::remove_file(ws.join("a.txt")).unwrap();

    blobs.overwrite(hash, b"tampered".to_vec());
    let err = snap.restore(ws, &manifest, &blobs).await.unwrap_err();
    assert!(matches!(err, CheckpointError::CorruptBlob { ref path, .. } if path == "a.txt"));
    assert!(
        !ws.join("a.txt").exists(),
        "a corrupt blob is never written"
    );

    blobs.remove(hash);
    let err = snap.restore(ws, &manifest, &blobs).await.unwrap_err();
    assert!(err.to_string().starts_with("a.txt: blob"), "{err}");

    let mut evil: Manifest = manifest.clone();
    let entry = evil.entries["a.txt"].clone();
    evil.entries.insert("../escape.txt".into(), entry);
    let err = snap.restore(ws, &evil, &blobs).await.unwrap_err();
    assert!(err.to_string().contains("../escape.txt"), "{err}");
}
