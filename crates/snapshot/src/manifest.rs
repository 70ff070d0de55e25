//! What a snapshot records: one entry per captured path, plus the paths it left out.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The state of a workspace at one moment. Paths are workspace-relative with `/`
/// separators; every directory is an entry (so empty ones and dir modes survive).
#[derive(Clone, Serialize, Deserialize, PartialEq, Debug, Default)]
pub struct Manifest {
    pub entries: BTreeMap<String, Entry>,
    /// Paths not captured, with why. A skipped directory covers everything under it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub skipped: BTreeMap<String, SkipReason>,
}

#[derive(Clone, Serialize, Deserialize, PartialEq, Eq, Debug)]
pub struct Entry {
    pub kind: EntryKind,
    /// File length; for a symlink the length of its target; 0 for a dir.
    pub size: u64,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// The stat fingerprint the next snapshot compares against. All zero means
    /// "do not trust" (dirs, or a file modified too close to the snapshot to tell
    /// a later same-tick edit apart): such an entry is re-hashed next time.
    #[serde(default, skip_serializing_if = "Fingerprint::is_zero")]
    pub stat: Fingerprint,
}

#[derive(Clone, Serialize, Deserialize, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A regular file; `hash` is the sha256 hex of its content (the blob's name).
    File {
        hash: String,
    },
    Symlink {
        target: String,
    },
    Dir,
}

#[derive(Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Debug, Default)]
pub struct Fingerprint {
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub inode: u64,
    pub size: u64,
}

impl Fingerprint {
    pub fn is_zero(&self) -> bool {
        *self == Fingerprint::default()
    }
}

/// Why a path is not in a manifest.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Its name is one of the policy's ignored dirs.
    Ignored,
    /// A file over `max_file_bytes`.
    TooLarge { size: u64 },
    /// Past `max_files`; a skipped dir stands for its whole subtree.
    TooManyFiles,
    /// Could not be read (permissions, vanished mid-scan, ...).
    Unreadable { error: String },
    /// A fifo, socket or device.
    Special,
    /// The name or link target is not UTF-8 (the key is the lossy form).
    NonUtf8,
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Ignored => f.write_str("ignored directory"),
            SkipReason::TooLarge { size } => write!(f, "too large ({size} bytes)"),
            SkipReason::TooManyFiles => f.write_str("too many files"),
            SkipReason::Unreadable { error } => write!(f, "unreadable: {error}"),
            SkipReason::Special => f.write_str("special file (fifo, socket or device)"),
            SkipReason::NonUtf8 => f.write_str("name or link target is not UTF-8"),
        }
    }
}

impl Manifest {
    /// Stable content hash (sha256 hex) over every entry and skip, fingerprints
    /// included. Fed field by field, so it does not depend on serde's output.
    pub fn hash(&self) -> String {
        let mut h = Sha256::new();
        let mut put = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        put(b"agentd-manifest-v1");
        for (path, e) in &self.entries {
            put(path.as_bytes());
            match &e.kind {
                EntryKind::File { hash } => {
                    put(b"f");
                    put(hash.as_bytes());
                }
                EntryKind::Symlink { target } => {
                    put(b"l");
                    put(target.as_bytes());
                }
                EntryKind::Dir => put(b"d"),
            }
            let s = &e.stat;
            // The stamps' bits as they are: `as` keeps a negative one's bytes.
            let (mtime, ctime) = (s.mtime_ns as u64, s.ctime_ns as u64);
            let nums = [e.size, u64::from(e.mode), mtime, ctime, s.inode, s.size];
            put(&nums.map(u64::to_le_bytes).concat());
        }
        put(b"skipped");
        for (path, reason) in &self.skipped {
            put(path.as_bytes());
            put(reason.to_string().as_bytes());
        }
        hex(&h.finalize())
    }

    /// Captured entries (files, symlinks and dirs).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Captured paths, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Regular files captured.
    pub fn file_count(&self) -> usize {
        let files = self.entries.values();
        files
            .filter(|e| matches!(e.kind, EntryKind::File { .. }))
            .count()
    }

    /// Whether `path` is a skipped path or lies under a skipped dir.
    pub fn is_skipped(&self, path: &str) -> bool {
        covered(&self.skipped, path)
    }
}

/// Whether `path` equals a key of `set` or lies under one (`key/...`).
pub(crate) fn covered<V>(set: &BTreeMap<String, V>, path: &str) -> bool {
    if set.is_empty() {
        return false;
    }
    let mut end = path.len();
    loop {
        if set.contains_key(&path[..end]) {
            return true;
        }
        match path[..end].rfind('/') {
            Some(i) => end = i,
            None => return false,
        }
    }
}

/// Every proper ancestor of a relative path, nearest first.
pub(crate) fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut end = path.len();
    std::iter::from_fn(move || {
        let i = path[..end].rfind('/')?;
        end = i;
        Some(&path[..i])
    })
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// sha256 hex of `bytes`: the name of a blob.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}
