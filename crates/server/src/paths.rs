//! Where agentd keeps its data, and opening the store there.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentd_store::postgres::PostgresStore;
use agentd_store::postgres::cluster::ClusterStore;
pub use agentd_store::sqlite::Connections;
use agentd_store::sqlite::SqliteStore;
use agentd_store::{SessionRecord, Store};

use crate::config::{Config, ConfigError};
use crate::models::EnvLookup;

/// `--data-dir`/`AGENTD_DATA_DIR` (given as `flag`), else `[server] data_dir`,
/// else `$XDG_DATA_HOME/agentd`, else `~/.local/share/agentd`.
pub fn data_dir(flag: Option<&Path>, config: &Config, env: EnvLookup<'_>) -> PathBuf {
    if let Some(dir) = flag {
        return dir.to_path_buf();
    }
    if let Some(dir) = &config.server.data_dir {
        return expand_home(dir, env);
    }
    if let Some(xdg) = env("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("agentd");
    }
    let home = env("HOME").unwrap_or_else(|| "/".into());
    PathBuf::from(home).join(".local/share/agentd")
}

/// Create `data_dir` (mode 0700) if it is missing. When agentd runs as
/// root its agents work as other uids, which must never reach the database,
/// tokens or other users' workspaces: the data dir must then be root's, and
/// any access it gives the group or others is taken away (it becomes 0700).
/// Workspaces inside it stay reachable: the sandbox is handed them by
/// descriptor.
pub fn prepare_data_dir(data_dir: &Path) -> Result<(), ConfigError> {
    use std::os::unix::fs::DirBuilderExt;

    use rustix::fs::{Mode, OFlags};

    let failed = |err: std::io::Error| {
        ConfigError::Invalid(format!("data dir {}: {err}", data_dir.display()))
    };
    let created = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(data_dir);
    if !rustix::process::geteuid().is_root() {
        // As before: what needs the data dir says so when it cannot have it.
        return Ok(());
    }
    created.map_err(failed)?;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let dir = rustix::fs::open(data_dir, flags, Mode::empty()).map_err(|e| failed(e.into()))?;
    let stat = rustix::fs::fstat(&dir).map_err(|e| failed(e.into()))?;
    if stat.st_uid != 0 {
        return Err(ConfigError::Invalid(format!(
            "data dir {} belongs to uid {}, not root: agentd runs as root and its agents as \
             other uids, which must not reach the database. `chown -R root: {}` it, or \
             choose another --data-dir",
            data_dir.display(),
            stat.st_uid,
            data_dir.display()
        )));
    }
    let mode = stat.st_mode & 0o7777;
    if mode & 0o077 != 0 {
        rustix::fs::fchmod(&dir, Mode::from_raw_mode(mode & 0o700))
            .map_err(|e| failed(e.into()))?;
        tracing::info!(data_dir = %data_dir.display(), "made the data dir private to root (0700)");
    }
    Ok(())
}

fn expand_home(path: &Path, env: EnvLookup<'_>) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => PathBuf::from(env("HOME").unwrap_or_else(|| "/".into())).join(rest),
        Err(_) => path.to_path_buf(),
    }
}

/// The store named by `[database] url` (`AGENTD_DATABASE_URL`): `sqlite:…` or
/// `postgres://…`/`postgresql://…`; without one, SQLite at `<data_dir>/agentd.db`.
/// `connections` is what a SQLite store opens.
pub async fn open_store(
    data_dir: &Path,
    config: &Config,
    env: EnvLookup<'_>,
    connections: Connections,
) -> Result<Arc<dyn Store>, ConfigError> {
    Ok(open_store_with(data_dir, config, env, connections).await?.0)
}

/// [`open_store`], plus the cluster tables when the store is PostgreSQL and
/// `[cluster] enabled` is not `false` (`agentd serve` then joins the cluster).
pub async fn open_server_store(
    data_dir: &Path,
    config: &Config,
    env: EnvLookup<'_>,
) -> Result<(Arc<dyn Store>, Option<ClusterStore>), ConfigError> {
    open_store_with(data_dir, config, env, Connections::Pooled).await
}

async fn open_store_with(
    data_dir: &Path,
    config: &Config,
    env: EnvLookup<'_>,
    connections: Connections,
) -> Result<(Arc<dyn Store>, Option<ClusterStore>), ConfigError> {
    let url = env("AGENTD_DATABASE_URL").or_else(|| config.database.url.clone());
    if let Some(url) = url
        .as_deref()
        .filter(|u| u.starts_with("postgres://") || u.starts_with("postgresql://"))
    {
        let store = PostgresStore::connect(url)
            .await
            .map_err(|err| ConfigError::Invalid(format!("cannot open the database: {err}")))?;
        if config.cluster.enabled == Some(false) {
            // A lone node recovers every running turn at start: never beside a cluster.
            let timeout = std::time::Duration::from_secs(config.cluster.lease_timeout_s);
            let live = store.cluster().live_nodes(timeout).await.map_err(|err| {
                ConfigError::Invalid(format!("cannot read the cluster's nodes: {err}"))
            })?;
            if live > 0 {
                return Err(ConfigError::Invalid(format!(
                    "[cluster] enabled = false, but {live} cluster node(s) use this database: \
                     stop them first, or leave the cluster on"
                )));
            }
            return Ok((Arc::new(store), None));
        }
        let lease_timeout = std::time::Duration::from_secs(config.cluster.lease_timeout_s);
        let store = store
            .with_event_notifications()
            .with_lease_timeout(lease_timeout);
        let cluster = store.cluster();
        return Ok((Arc::new(store), Some(cluster)));
    }
    if config.cluster.enabled == Some(true) {
        return Err(ConfigError::Invalid(
            "[cluster] enabled needs a PostgreSQL [database] url; SQLite is one node".into(),
        ));
    }
    let store = match url {
        None => SqliteStore::open_with_connections(&data_dir.join("agentd.db"), connections)
            .await
            .map(|s| Arc::new(s) as Arc<dyn Store>),
        Some(url) if url.starts_with("sqlite:") => {
            SqliteStore::open_url_with_connections(&url, connections)
                .await
                .map(|s| Arc::new(s) as Arc<dyn Store>)
        }
        Some(url) => {
            return Err(ConfigError::Invalid(format!(
                "unsupported database url (scheme {:?}): expected sqlite://PATH, \
                 sqlite::memory: or postgres://USER@HOST/DB",
                url.split(':').next().unwrap_or_default()
            )));
        }
    };
    let store =
        store.map_err(|err| ConfigError::Invalid(format!("cannot open the database: {err}")))?;
    Ok((store, None))
}

/// The session's workspace when agentd created it: exactly
/// `<data_dir>/workspaces/<id>` (compared canonically). `None` for anything
/// else, e.g. the project directory of an `agentd run` session, which is the
/// user's: only these are removed with their session.
pub fn own_workspace(data_dir: &Path, session: &SessionRecord) -> Option<PathBuf> {
    let root = data_dir.join("workspaces").canonicalize().ok()?;
    let workspace = Path::new(&session.workspace);
    let parent = workspace.parent()?.canonicalize().ok()?;
    let named = workspace
        .file_name()
        .is_some_and(|name| name == session.id.as_str());
    (parent == root && named && !session.id.is_empty()).then(|| root.join(&session.id))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;

    #[test]
    fn a_root_server_s_data_dir_is_root_s_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let made = tmp.path().join("new/data");
        prepare_data_dir(&made).unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&made), 0o700);

        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        prepare_data_dir(&open).unwrap();
        if !rustix::process::geteuid().is_root() {
            assert_eq!(mode(&open), 0o755, "not root: left as it was");
            return;
        }
        assert_eq!(mode(&open), 0o700);
        let theirs = tmp.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(4242), Some(4242)).unwrap();
        let err = prepare_data_dir(&theirs).unwrap_err().to_string();
        assert!(err.contains("uid 4242"), "{err}");
        assert_eq!(std::fs::metadata(&theirs).unwrap().uid(), 4242);
    }
}
