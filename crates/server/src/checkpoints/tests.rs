//! Checkpoints over a real store and real workspaces.
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::PathBuf;

use rustix::fs::CWD;

use super::*;

/// A chain of checkpoints (a keyframe, then deltas) made from cached
/// manifests records what changed, and reads back cold as it was cached.
#[tokio::test]
async fn cached_manifests_are_the_stored_ones() {
    let (store, session_id) = crate::test_support::store_with_session().await;
    let workspace = tempfile::tempdir().unwrap();
    let mut records = Vec::new();
    for round in 0..4 {
        let file = format!("f{round}.txt");
        std::fs::write(workspace.path().join(&file), "new").unwrap();
        std::fs::write(workspace.path().join("a.txt"), format!("round {round}")).unwrap();
        let record = create_checkpoint(&store, &session_id, None, workspace.path(), round)
            .await
            .unwrap();
        if round > 0 {
            let mut files = record.files.clone();
            files.sort();
            assert_eq!(files, vec!["a.txt".to_string(), file]);
        }
        records.push(record);
    }
    assert!(records[1..].iter().all(|r| r.base_checkpoint_id.is_some()));
    let mut cached = Vec::new();
    for record in &records {
        cached.push(load_manifest(store.as_ref(), record).await.unwrap());
    }
    MANIFESTS.lock().unwrap().clear();
    for (record, cached) in records.iter().zip(&cached) {
        let cold = load_manifest(store.as_ref(), record).await.unwrap();
        assert_eq!(*cold, **cached);
    }
    assert_eq!(cached[3].entries.len(), 5);
}

/// A snapshot with more new blobs than are held back for the checkpoint's
/// transaction (32) stores them as it goes, and restores whole.
#[tokio::test]
async fn a_checkpoint_of_many_new_files_restores_them_all() {
    let (store, session_id) = crate::test_support::store_with_session().await;
    let workspace = tempfile::tempdir().unwrap();
    let content = |i: usize| format!("file {i}\n").repeat(i + 1);
    for i in 0..(MAX_HELD_BLOBS + 8) {
        std::fs::write(workspace.path().join(format!("f{i}.txt")), content(i)).unwrap();
    }
    let record = create_checkpoint(&store, &session_id, None, workspace.path(), 1)
        .await
        .unwrap();
    for i in 0..(MAX_HELD_BLOBS + 8) {
        std::fs::write(workspace.path().join(format!("f{i}.txt")), "changed").unwrap();
    }
    restore_files(
        &store,
        &record,
        Root::open(workspace.path()).unwrap(),
        None,
        false,
    )
    .await
    .unwrap();
    for i in 0..(MAX_HELD_BLOBS + 8) {
        let path = workspace.path().join(format!("f{i}.txt"));
        assert_eq!(std::fs::read_to_string(path).unwrap(), content(i));
    }
}

const MARKER: &[u8] = b"MARKER-51c2: the other side of the swap";

/// Everything under `dir` (names, modes, contents or link targets), links
/// not followed.
fn state(dir: &Path) -> BTreeMap<PathBuf, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let content = if meta.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                target.into_os_string().into_encoded_bytes()
            } else if meta.is_dir() {
                stack.push(path.clone());
                Vec::new()
            } else if meta.is_file() {
                std::fs::read(&path).unwrap()
            } else {
                Vec::new()
            };
            out.insert(path, (meta.mode(), content));
        }
    }
    out
}

/// A fork's copy, the ignored `.git` included, goes by descriptors: while
/// the source's agent flips files and directories (top level and in `.git`)
/// with links to another directory, hundreds of forks never bring its
/// marker over nor write there, and FIFOs on the way block nothing.
#[tokio::test]
async fn a_fork_never_follows_links_swapped_into_its_source() {
    let (store, _) = crate::test_support::store_with_session().await;
    let dir = tempfile::tempdir().unwrap();
    let (source, other) = (dir.path().join("source"), dir.path().join("other"));
    std::fs::create_dir_all(other.join("sub")).unwrap();
    for file in ["marker.txt", "HEAD", "f.txt", "sub/f.txt"] {
        std::fs::write(other.join(file), MARKER).unwrap();
    }
    std::fs::create_dir_all(source.join(".git/objects")).unwrap();
    std::fs::create_dir_all(source.join("d")).unwrap();
    std::fs::write(source.join(".git/HEAD"), "ref: main\n").unwrap();
    std::fs::write(source.join(".git/objects/f.txt"), "object\n").unwrap();
    std::fs::write(source.join("a.txt"), "a\n").unwrap();
    std::fs::write(source.join("d/f.txt"), "d\n").unwrap();
    for (at, to) in [
        (".git/swap_file", other.join("marker.txt")),
        (".git/swap_dir", other.clone()),
        ("swap_file", other.join("marker.txt")),
        ("swap_dir", other.clone()),
    ] {
        symlink(to, source.join(at)).unwrap();
    }
    for fifo in ["pipe", ".git/pipe"] {
        let mode = rustix::fs::Mode::from_raw_mode(0o644);
        rustix::fs::mkfifoat(CWD, source.join(fifo), mode).unwrap();
    }
    let other_before = state(&other);

    let pairs: Vec<(PathBuf, PathBuf)> = [
        (".git/HEAD", ".git/swap_file"),
        (".git/objects", ".git/swap_dir"),
        ("a.txt", "swap_file"),
        ("d", "swap_dir"),
    ]
    .into_iter()
    .map(|(a, b)| (source.join(a), source.join(b)))
    .collect();
    let flipper = agentd_testkit::swapper::Swapper::start(pairs);
    let forks = async {
        for round in 0..150 {
            let target = dir.path().join(format!("fork{round}"));
            std::fs::create_dir(&target).unwrap();
            let reading = Reading {
                root: Root::open(&source).unwrap(),
                as_user: None,
            };
            copy_workspace(&store, &reading, &target, None, None)
                .await
                .unwrap();
            for (path, (_, content)) in state(&target) {
                let leaked = content.windows(MARKER.len()).any(|w| w == MARKER);
                assert!(!leaked, "{path:?} holds the other side's marker");
            }
            assert!(target.join(".git").is_dir());
            std::fs::remove_dir_all(&target).unwrap();
        }
    };
    let done = tokio::time::timeout(std::time::Duration::from_secs(120), forks).await;
    let swaps = flipper.finish();
    done.expect("150 forks in bounded time");
    assert!(swaps > 0, "the flipper never swapped");
    assert_eq!(state(&other), other_before, "the other side was written");
}

/// A fork copies the ignored folders (`.git`, …) from the directory it
/// holds open, not from its path: whoever can rename in the source's parent
/// may have put a link there meanwhile.
#[tokio::test]
async fn a_fork_copies_ignored_folders_from_the_directory_it_holds_open() {
    let (store, _) = crate::test_support::store_with_session().await;
    let dir = tempfile::tempdir().unwrap();
    let (source, moved, other) = (
        dir.path().join("source"),
        dir.path().join("source-moved"),
        dir.path().join("other"),
    );
    std::fs::create_dir_all(source.join(".git")).unwrap();
    std::fs::write(source.join(".git/HEAD"), "ref: main\n").unwrap();
    std::fs::create_dir_all(other.join(".git")).unwrap();
    std::fs::write(other.join(".git/config"), MARKER).unwrap();
    let reading = Reading {
        root: Root::open(&source).unwrap(),
        as_user: None,
    };
    // Between the fork's check and its copy of `.git`: a link where it was.
    std::fs::rename(&source, &moved).unwrap();
    symlink(&other, &source).unwrap();
    let target = dir.path().join("fork");
    std::fs::create_dir(&target).unwrap();
    let copied = copy_workspace(&store, &reading, &target, None, None).await;
    assert!(
        !target.join(".git/config").exists(),
        "the fork copied the .git of the link's target ({copied:?})"
    );
}
