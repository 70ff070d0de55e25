//! Storing manifests compactly: full, or as a delta against a base manifest.
//!
//! Format: the magic `agentd-manifest\x01`, then deflate-compressed JSON of
//! `{"full": Manifest}` or `{"delta": Delta}`. A delta names its base by
//! [`Manifest::hash`], so decoding against the wrong base fails instead of
//! producing a wrong tree.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use serde::{Deserialize, Serialize};

use super::CheckpointError;
use super::manifest::{Entry, Manifest, SkipReason};

const MAGIC: &[u8] = b"agentd-manifest\x01";

/// What changed from `base` to the target.
#[derive(Serialize, Deserialize, Default)]
struct Delta {
    base: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    set: BTreeMap<String, Entry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    remove: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    skip_set: BTreeMap<String, SkipReason>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    skip_remove: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum StoredRef<'a> {
    Full(&'a Manifest),
    Delta(&'a Delta),
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Stored {
    Full(Manifest),
    Delta(Delta),
}

/// Encode `manifest`, as a delta against `base` when one is given and the delta
/// is the smaller of the two (so the result may be a full encoding even with a
/// base; [`decode_manifest`] tells them apart).
pub fn encode_manifest(manifest: &Manifest, base: Option<&Manifest>) -> Vec<u8> {
    if let Some(base) = base {
        let delta = diff(base, manifest);
        let changes = delta.set.len() + delta.remove.len();
        // Past half the entries, a full encoding is about as small and needs no base.
        if changes <= manifest.len() / 2 + 1 {
            return pack(&StoredRef::Delta(&delta));
        }
    }
    pack(&StoredRef::Full(manifest))
}

/// Decode what [`encode_manifest`] made. A delta needs the same `base` it was
/// made against.
pub fn decode_manifest(bytes: &[u8], base: Option<&Manifest>) -> Result<Manifest, CheckpointError> {
    let body = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| CheckpointError::Manifest("not an encoded manifest (bad magic)".into()))?;
    let mut json = Vec::new();
    DeflateDecoder::new(body)
        .read_to_end(&mut json)
        .map_err(|e| CheckpointError::Manifest(format!("decompressing: {e}")))?;
    let stored: Stored = serde_json::from_slice(&json)
        .map_err(|e| CheckpointError::Manifest(format!("parsing: {e}")))?;
    match stored {
        Stored::Full(m) => Ok(m),
        Stored::Delta(delta) => {
            let base = base.ok_or_else(|| {
                CheckpointError::Manifest(format!(
                    "a delta against manifest {} needs that base",
                    delta.base
                ))
            })?;
            let actual = base.hash();
            if actual != delta.base {
                return Err(CheckpointError::Manifest(format!(
                    "a delta against manifest {} was given base {actual}",
                    delta.base
                )));
            }
            Ok(apply(base, delta))
        }
    }
}

fn pack(stored: &StoredRef<'_>) -> Vec<u8> {
    // Serializing plain data into a Vec cannot fail; keep it total anyway.
    let json = serde_json::to_vec(stored).unwrap_or_default();
    let mut out = MAGIC.to_vec();
    let mut enc = DeflateEncoder::new(&mut out, Compression::fast());
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(&json);
    let _ = enc.finish();
    out
}

fn diff(base: &Manifest, target: &Manifest) -> Delta {
    let (set, remove) = diff_maps(&base.entries, &target.entries);
    let (skip_set, skip_remove) = diff_maps(&base.skipped, &target.skipped);
    Delta {
        base: base.hash(),
        set,
        remove,
        skip_set,
        skip_remove,
    }
}

/// Keys of `to` that are new or different, and keys of `from` that are gone.
fn diff_maps<V: Clone + PartialEq>(
    from: &BTreeMap<String, V>,
    to: &BTreeMap<String, V>,
) -> (BTreeMap<String, V>, Vec<String>) {
    let set = to
        .iter()
        .filter(|(k, v)| from.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let remove = from
        .keys()
        .filter(|k| !to.contains_key(*k))
        .cloned()
        .collect();
    (set, remove)
}

fn apply(base: &Manifest, delta: Delta) -> Manifest {
    let mut m = base.clone();
    for path in &delta.remove {
        m.entries.remove(path);
    }
    m.entries.extend(delta.set);
    for path in &delta.skip_remove {
        m.skipped.remove(path);
    }
    m.skipped.extend(delta.skip_set);
    m
}
