//! Real directory trees for the snapshot tests: build one, read all of it
//! back (never following symlinks), and compare two.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything observable about one path: content or target, and mode.
#[derive(Debug, PartialEq)]
pub enum Node {
    File { bytes: Vec<u8>, mode: u32 },
    Link(PathBuf),
    Dir { mode: u32 },
    Other,
}

/// The whole tree under `root` (ignored dirs included), never following symlinks.
pub fn tree(root: &Path) -> BTreeMap<String, Node> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Node>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let meta = fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            let ft = meta.file_type();
            let node = if ft.is_symlink() {
                Node::Link(fs::read_link(&path).unwrap())
            } else if ft.is_dir() {
                walk(root, &path, out);
                Node::Dir { mode }
            } else if ft.is_file() {
                let bytes = fs::read(&path).unwrap();
                Node::File { bytes, mode }
            } else {
                Node::Other
            };
            out.insert(rel, node);
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

pub fn ignored(path: &str) -> bool {
    path.split('/')
        .any(|c| matches!(c, ".git" | "node_modules" | "target"))
}

/// The tree without what the default policy ignores.
pub fn captured(root: &Path) -> BTreeMap<String, Node> {
    tree(root)
        .into_iter()
        .filter(|(p, _)| !ignored(p))
        .collect()
}

pub fn assert_same_tree(actual: &BTreeMap<String, Node>, expected: &BTreeMap<String, Node>) {
    let mut diffs = Vec::new();
    for (path, node) in expected {
        match actual.get(path) {
            None => diffs.push(format!("missing {path}")),
            Some(n) if n != node => diffs.push(format!("{path}: {n:?} != {node:?}")),
            Some(_) => {}
        }
    }
    diffs.extend(
        actual
            .keys()
            .filter(|p| !expected.contains_key(*p))
            .map(|p| format!("extra {p}")),
    );
    assert!(diffs.is_empty(), "trees differ:\n{}", diffs.join("\n"));
}

pub fn write(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

pub fn chmod(root: &Path, rel: &str, mode: u32) {
    fs::set_permissions(root.join(rel), fs::Permissions::from_mode(mode)).unwrap();
}

/// Files changed within the racy window (50 ms) of a snapshot are re-hashed by
/// the next one; tests that count hashes let their setup age past it first.
pub fn age() {
    std::thread::sleep(Duration::from_millis(120));
}

pub fn sample(root: &Path) {
    write(root, "README.md", "# hello\n");
    write(root, "src/lib.rs", "pub fn f() {}\n");
    write(root, "src/nested/deep.rs", "// deep\n");
    write(root, "script.sh", "#!/bin/sh\necho hi\n");
    write(root, "becomes_link", "I am a file for now\n");
    write(root, "was_dir/inner.txt", "inside\n");
    write(root, "dup1.txt", "same content\n");
    write(root, "dup2.txt", "same content\n");
    symlink("README.md", root.join("becomes_file")).unwrap();
    symlink("src", root.join("src_link")).unwrap();
    fs::create_dir_all(root.join("empty/also_empty")).unwrap();
    fs::create_dir(root.join("private")).unwrap();
    chmod(root, "private", 0o700);
    write(root, "private/key", "secret\n");
    chmod(root, "private/key", 0o600);
    write(root, ".git/HEAD", "ref: refs/heads/main\n");
    write(root, "node_modules/pkg/index.js", "module.exports = 1;\n");
    write(root, "crate/target/debug/out", "binary\n");
}
