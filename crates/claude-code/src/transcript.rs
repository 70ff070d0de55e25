//! The CLI's own session transcript (`CLAUDE_CONFIG_DIR/projects/<cwd>/<id>.jsonl`)
//! kept in the store after each turn and restored into a fresh config dir
//! before `--resume`, so a session resumes on any machine.
//!
//! Storage: the JSONL as a content-addressed blob, and a small pointer blob
//! `{cli_session_id, path, hash}` under the key `claude-code/<session>/<n>`
//! (`n`: the session's turn count after the turn). The newest pointer is found
//! with one `missing_blobs` query over the possible keys. No schema change.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentd_store::{Store, StoreError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pointer {
    pub cli_session_id: String,
    /// The JSONL's path relative to the config dir.
    pub path: PathBuf,
    pub hash: String,
}

fn pointer_key(session_id: &str, n: u64) -> String {
    format!("claude-code/{session_id}/{n}")
}

/// Where the CLI keeps `cli_session_id`'s transcript under `config_dir`.
fn find_jsonl(config_dir: &Path, cli_session_id: &str) -> Option<PathBuf> {
    let file = format!("{cli_session_id}.jsonl");
    let projects = config_dir.join("projects");
    std::fs::read_dir(&projects)
        .ok()?
        .flatten()
        .map(|entry| entry.path().join(&file))
        .find(|path| path.is_file())
}

/// How long a turn's transcript may take to appear after its `result` line.
const WRITE_WAIT: Duration = Duration::from_secs(2);
/// How often the file is looked at meanwhile: with a marker, and without.
const POLL_MARKER: Duration = Duration::from_millis(10);
const POLL_STABLE: Duration = Duration::from_millis(50);

/// Store the transcript after turn `n`.
///
/// The CLI writes a turn's entries some time after its `result` line (~70 ms
/// on an idle machine, more under load), in one go. With a `marker` (the
/// turn's last assistant message id) the file is taken once the marker is in
/// it; without one (a turn that did not end normally), once it stops
/// growing. `running`: false when the CLI has stopped, so it has written all
/// it will.
pub async fn save(
    store: &dyn Store,
    session_id: &str,
    n: u64,
    config_dir: &Path,
    cli_session_id: &str,
    marker: Option<&str>,
    running: bool,
) -> Result<(), String> {
    let (file, data) = written(config_dir, cli_session_id, marker, running).await?;
    let hash = format!("{:x}", Sha256::digest(&data));
    let path = file
        .strip_prefix(config_dir)
        .map_err(|e| e.to_string())?
        .to_path_buf();
    let pointer = Pointer {
        cli_session_id: cli_session_id.to_string(),
        path,
        hash: hash.clone(),
    };
    let pointer = serde_json::to_vec(&pointer).map_err(|e| e.to_string())?;
    let store_err = |e: StoreError| e.to_string();
    store.put_blobs(&[(hash, data)]).await.map_err(store_err)?;
    store
        .put_blobs(&[(pointer_key(session_id, n), pointer)])
        .await
        .map_err(store_err)
}

/// The transcript file and its contents once the turn is in it (bounded by
/// [`WRITE_WAIT`]; after that, what there is).
async fn written(
    config_dir: &Path,
    cli_session_id: &str,
    marker: Option<&str>,
    running: bool,
) -> Result<(PathBuf, Vec<u8>), String> {
    let read = |file: PathBuf| async move {
        let data = tokio::fs::read(&file).await.map_err(|e| e.to_string())?;
        Ok::<_, String>((file, data))
    };
    let quoted = marker.map(|m| format!("\"{m}\""));
    let deadline = tokio::time::Instant::now() + WRITE_WAIT;
    let mut last_len: Option<u64> = None;
    loop {
        let found = find_jsonl(config_dir, cli_session_id);
        if let Some(file) = &found {
            if !running {
                return read(file.clone()).await;
            }
            let len = tokio::fs::metadata(file).await.map(|m| m.len()).ok();
            match &quoted {
                Some(quoted) if len != last_len => {
                    let (file, data) = read(file.clone()).await?;
                    // Only what was added since the last look can hold it.
                    let seen = last_len.unwrap_or(0) as usize;
                    let from = seen.saturating_sub(quoted.len()).min(data.len());
                    if contains(&data[from..], quoted.as_bytes()) {
                        return Ok((file, data));
                    }
                }
                None if len.is_some() && len == last_len => return read(file.clone()).await,
                _ => {}
            }
            last_len = len;
        } else if !running {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            if let Some(file) = found {
                tracing::warn!(file = %file.display(), marker = ?marker, "the CLI's transcript may lack the last turn");
                return read(file).await;
            }
            break;
        }
        let poll = if marker.is_some() {
            POLL_MARKER
        } else {
            POLL_STABLE
        };
        tokio::time::sleep(poll).await;
    }
    Err(format!("the CLI wrote no transcript for {cli_session_id}"))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// The newest stored pointer of a session with at most `turns` turns.
pub async fn latest(
    store: &dyn Store,
    session_id: &str,
    turns: u64,
) -> Result<Option<Pointer>, StoreError> {
    if turns == 0 {
        return Ok(None);
    }
    let keys: Vec<String> = (1..=turns).map(|n| pointer_key(session_id, n)).collect();
    let missing = store.missing_blobs(&keys).await?;
    let Some(key) = keys.iter().rev().find(|k| !missing.contains(k)) else {
        return Ok(None);
    };
    let Some(bytes) = store.get_blob(key).await? else {
        return Ok(None);
    };
    Ok(serde_json::from_slice(&bytes).ok())
}

/// Write the pointer's transcript into `config_dir` where the CLI looks for it.
pub async fn restore(
    store: &dyn Store,
    pointer: &Pointer,
    config_dir: &Path,
) -> Result<(), String> {
    if pointer.path.is_absolute()
        || pointer
            .path
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return Err(format!("bad transcript path {}", pointer.path.display()));
    }
    let data = store
        .get_blob(&pointer.hash)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("transcript blob {} is missing", pointer.hash))?;
    let file = config_dir.join(&pointer.path);
    if let Some(parent) = file.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| e.to_string())?;
    }
    tokio::fs::write(&file, data)
        .await
        .map_err(|e| e.to_string())
}
