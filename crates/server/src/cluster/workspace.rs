//! Session workspaces across nodes. Each node keeps server-made workspaces in
//! its own data dir; the shared truth is the manifest saved (with its file
//! blobs) at every turn end. A node about to run a turn restores the saved
//! state unless it is the one that saved it last. Ignored folders (`.git`,
//! `node_modules`, `target`) and skipped files (see `SnapshotPolicy`) are not
//! carried between nodes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agentd_snapshot::{
    Manifest, SnapshotPolicy, Snapshotter, decode_manifest, encode_manifest, sha256_hex,
};
use agentd_store::SessionRecord;

use super::Cluster;
use crate::checkpoints::StoreBlobs;
use crate::runtime::Runtime;

/// Sessions whose workspace here matches a saved manifest: id → (hash,
/// manifest). The manifest's fingerprints make the next save cheap.
#[derive(Default)]
pub(super) struct Synced {
    map: Mutex<HashMap<String, (String, Arc<Manifest>)>>,
    /// Held while restoring, so two requests never restore into one
    /// workspace at once.
    restoring: tokio::sync::Mutex<()>,
}

/// Entries kept at most; beyond, the map starts over (a forgotten session
/// costs one restore check on its next turn, nothing more).
const SYNCED_MAX: usize = 4096;

impl Synced {
    fn get(&self, session_id: &str) -> Option<(String, Arc<Manifest>)> {
        self.map.lock().ok()?.get(session_id).cloned()
    }

    fn set(&self, session_id: &str, hash: String, manifest: Arc<Manifest>) {
        if let Ok(mut map) = self.map.lock() {
            if map.len() >= SYNCED_MAX {
                map.clear();
            }
            map.insert(session_id.to_string(), (hash, manifest));
        }
    }
}

/// A workspace agentd made for a server session lives in each node's own data
/// dir: point `session` at this node's. Workspaces given by path (`agentd
/// run`) are the user's and stay as they are.
pub fn localize(data_dir: &Path, session: &mut SessionRecord) {
    if let Some(local) = local_workspace(data_dir, session) {
        session.workspace = local.display().to_string();
    }
}

fn local_workspace(data_dir: &Path, session: &SessionRecord) -> Option<PathBuf> {
    let path = Path::new(&session.workspace);
    let managed = path.file_name().is_some_and(|n| n == session.id.as_str())
        && path
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|n| n == "workspaces");
    if !managed {
        return None;
    }
    let data_dir = data_dir
        .canonicalize()
        .unwrap_or_else(|_| data_dir.to_path_buf());
    Some(data_dir.join("workspaces").join(&session.id))
}

fn snapshotter() -> Snapshotter {
    Snapshotter::new(SnapshotPolicy::default())
}

pub(super) async fn prepare(
    cluster: &Cluster,
    runtime: &Runtime,
    session: &mut SessionRecord,
) -> anyhow::Result<()> {
    let managed = local_workspace(&runtime.data_dir, session).is_some();
    localize(&runtime.data_dir, session);
    let local = PathBuf::from(&session.workspace);
    if managed && !local.exists() {
        let root = runtime.data_dir.join("workspaces");
        let id = session.id.clone();
        tokio::task::spawn_blocking(move || agentd_sandbox::create_workspace(&root, &id))
            .await?
            .map_err(|e| anyhow::anyhow!("creating the workspace: {e}"))?;
    }
    let saved = cluster.store().workspace(&session.id).await?;
    let Some(hash) = saved else {
        return Ok(());
    };
    let synced = &cluster.inner.workspaces;
    let _restoring = synced.restoring.lock().await;
    if synced.get(&session.id).is_some_and(|(h, _)| h == hash) {
        return Ok(());
    }
    let store = &runtime.store;
    let bytes = store.get_blob(&hash).await?.ok_or_else(|| {
        anyhow::anyhow!("the saved workspace {hash} is missing from the blob store")
    })?;
    let manifest = decode_manifest(&bytes, None)?;
    // Written as the owner's agent user, by descriptors (see the engine's
    // checkpoint module): the files are the agent's, and no link it made
    // is followed.
    let identity = runtime.agent_identity(&session.owner).await?;
    if let Some(identity) = identity {
        crate::workspace_owner::hand_over_before_turn(
            &session.id,
            &local,
            &runtime.data_dir,
            identity,
        )
        .await?;
    }
    let changed = snapshotter()
        .restore_as(&local, &manifest, &StoreBlobs(store.clone()), identity)
        .await
        .map_err(|e| anyhow::anyhow!("restoring the workspace: {e}"))?;
    tracing::info!(session_id = %session.id, files = changed.len(), "restored the workspace saved by another node");
    synced.set(&session.id, hash, Arc::new(manifest));
    Ok(())
}

/// Snapshot this node's copy and make it the shared state; with
/// `lease_turn`, only while this node holds that turn's lease.
pub(super) async fn save(
    cluster: &Cluster,
    runtime: &Runtime,
    session_id: &str,
    lease_turn: Option<&str>,
) -> anyhow::Result<()> {
    let store = &runtime.store;
    let Some(mut session) = store.get_session(session_id).await? else {
        return Ok(());
    };
    localize(&runtime.data_dir, &mut session);
    let local = PathBuf::from(&session.workspace);
    if !local.is_dir() {
        return Ok(());
    }
    let synced = &cluster.inner.workspaces;
    let previous = synced.get(session_id);
    let blobs = StoreBlobs(store.clone());
    let (manifest, _) = snapshotter()
        .snapshot(&local, previous.as_ref().map(|(_, m)| m.as_ref()), &blobs)
        .await?;
    let bytes = encode_manifest(&manifest, None);
    let hash = sha256_hex(&bytes);
    if previous.as_ref().is_none_or(|(h, _)| *h != hash) {
        store.put_blobs(&[(hash.clone(), bytes)]).await?;
        let saved = cluster
            .store()
            .save_workspace(session_id, &hash, cluster.node_id(), lease_turn)
            .await?;
        if !saved {
            // Another node took the turn over: its state wins.
            tracing::warn!(
                session_id,
                "lost the turn's lease; the workspace was not saved"
            );
            return Ok(());
        }
    }
    synced.set(session_id, hash, Arc::new(manifest));
    Ok(())
}
