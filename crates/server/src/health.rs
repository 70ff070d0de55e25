//! What `/healthz` checks: the database answers a read and takes a write
//! (a full disk still answers reads), and the data dir has free space above
//! `[server] min_free_disk_mb`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::runtime::Runtime;

/// How long each probe may take before it counts as failed.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The outcome of one round of probes.
#[derive(Debug, Default)]
pub struct HealthCheck {
    /// Why a read failed.
    pub read_error: Option<String>,
    /// Why a write failed (unset when the read failed: it was not tried).
    pub write_error: Option<String>,
    /// Free space of the data dir, when it could be measured.
    pub free_disk_bytes: Option<u64>,
    pub min_free_disk_bytes: u64,
}

impl HealthCheck {
    pub async fn run(runtime: &Runtime) -> Self {
        let store = runtime.store.clone();
        let read_error = within(store.ping()).await.err();
        let write_error = match read_error {
            Some(_) => None,
            None => within(store.probe_write()).await.err(),
        };
        Self {
            read_error,
            write_error,
            free_disk_bytes: free_space(runtime.data_dir.clone()).await,
            min_free_disk_bytes: runtime.config.server.min_free_disk_bytes(),
        }
    }

    pub fn disk_low(&self) -> bool {
        self.free_disk_bytes
            .is_some_and(|free| free < self.min_free_disk_bytes)
    }

    /// What failed, by name: `database` (reads), `database_write`, `disk_space`.
    pub fn failing(&self) -> Vec<&'static str> {
        let mut failing = Vec::new();
        if self.read_error.is_some() {
            failing.push("database");
        }
        if self.write_error.is_some() {
            failing.push("database_write");
        }
        if self.disk_low() {
            failing.push("disk_space");
        }
        failing
    }

    /// One sentence per failure, for the `error` field and the log.
    pub fn error(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(err) = &self.read_error {
            parts.push(err.clone());
        }
        if let Some(err) = &self.write_error {
            parts.push(format!("the database takes no writes: {err}"));
        }
        if self.disk_low() {
            parts.push(format!(
                "the data dir has {} MiB free, below min_free_disk_mb = {}",
                self.free_disk_bytes.unwrap_or(0) / (1024 * 1024),
                self.min_free_disk_bytes / (1024 * 1024)
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

async fn within(probe: impl Future<Output = agentd_store::StoreResult<()>>) -> Result<(), String> {
    match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err(format!(
            "the database did not answer within {}s",
            PROBE_TIMEOUT.as_secs()
        )),
    }
}

/// [`Store::probe_write`](agentd_store::Store::probe_write) within
/// [`PROBE_TIMEOUT`].
pub async fn probe_write(store: &dyn agentd_store::Store) -> agentd_store::StoreResult<()> {
    within(store.probe_write())
        .await
        .map_err(agentd_store::StoreError::Database)
}

/// Bytes an unprivileged writer can still use under `dir` (a hung file
/// system counts as unknown, not as full).
async fn free_space(dir: PathBuf) -> Option<u64> {
    let measure = tokio::task::spawn_blocking(move || available(&dir));
    match tokio::time::timeout(PROBE_TIMEOUT, measure).await {
        Ok(Ok(free)) => free,
        _ => None,
    }
}

fn available(dir: &Path) -> Option<u64> {
    let stat = rustix::fs::statvfs(dir).ok()?;
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}
