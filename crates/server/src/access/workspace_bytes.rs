//! The bytes a user's workspaces hold, for the `workspace_bytes` quota: the
//! workspaces agentd made (`<data dir>/workspaces/<session id>`), walked
//! without following links or leaving the file system. Walks are remembered
//! for a few seconds, so a burst of turns walks once.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use agentd_store::StoreError;

use super::Access;

const REMEMBERED_FOR: Duration = Duration::from_secs(5);
const PAGE: u32 = 200;

type Walks = Mutex<HashMap<(PathBuf, String), (Instant, u64)>>;

fn walks() -> &'static Walks {
    static WALKS: OnceLock<Walks> = OnceLock::new();
    WALKS.get_or_init(Default::default)
}

impl Access<'_> {
    /// Bytes in all of `user`'s workspaces.
    pub async fn workspace_bytes(&self, user: &str) -> Result<u64, StoreError> {
        let key = (self.data_dir.to_path_buf(), user.to_string());
        if let Ok(walks) = walks().lock()
            && let Some((at, bytes)) = walks.get(&key)
            && at.elapsed() < REMEMBERED_FOR
        {
            return Ok(*bytes);
        }
        let root = self.data_dir.join("workspaces");
        let mut dirs = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .store
                .list_sessions(user, cursor.as_deref(), PAGE)
                .await?;
            dirs.extend(page.iter().map(|s| root.join(&s.id)));
            match page.last() {
                Some(last) if page.len() == PAGE as usize => cursor = Some(last.id.clone()),
                _ => break,
            }
        }
        let bytes = tokio::task::spawn_blocking(move || dirs.iter().map(|d| tree_bytes(d)).sum())
            .await
            .unwrap_or(0);
        if let Ok(mut walks) = walks().lock() {
            walks.retain(|_, (at, _)| at.elapsed() < REMEMBERED_FOR);
            walks.insert(key, (Instant::now(), bytes));
        }
        Ok(bytes)
    }
}

/// Bytes of the files under `dir` (allocated blocks, so sparse files count
/// for what they take), on `dir`'s file system only.
fn tree_bytes(dir: &Path) -> u64 {
    let Ok(top) = std::fs::symlink_metadata(dir) else {
        return 0;
    };
    if !top.is_dir() {
        return 0;
    }
    let device = top.dev();
    let mut total = 0u64;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.dev() != device {
                continue;
            }
            total = total.saturating_add(meta.blocks().saturating_mul(512));
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_count_links_do_not_lead_out() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("big"), vec![1u8; 1 << 20]).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/f"), vec![1u8; 64 * 1024]).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        let bytes = tree_bytes(dir.path());
        assert!(bytes >= 64 * 1024, "{bytes}");
        assert!(bytes < 1 << 20, "the link's target is not counted: {bytes}");
        assert_eq!(tree_bytes(&dir.path().join("missing")), 0);
    }
}
