//! Where agentd keeps its data, and opening the store there.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentd_store::Store;
use agentd_store::postgres::PostgresStore;
use agentd_store::postgres::cluster::ClusterStore;
use agentd_store::sqlite::SqliteStore;

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

fn expand_home(path: &Path, env: EnvLookup<'_>) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => PathBuf::from(env("HOME").unwrap_or_else(|| "/".into())).join(rest),
        Err(_) => path.to_path_buf(),
    }
}

/// The store named by `[database] url` (`AGENTD_DATABASE_URL`): `sqlite:…` or
/// `postgres://…`/`postgresql://…`; without one, SQLite at `<data_dir>/agentd.db`.
pub async fn open_store(
    data_dir: &Path,
    config: &Config,
    env: EnvLookup<'_>,
) -> Result<Arc<dyn Store>, ConfigError> {
    Ok(open_server_store(data_dir, config, env).await?.0)
}

/// [`open_store`], plus the cluster tables when the store is PostgreSQL and
/// `[cluster] enabled` is not `false` (`agentd serve` then joins the cluster).
pub async fn open_server_store(
    data_dir: &Path,
    config: &Config,
    env: EnvLookup<'_>,
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
        let store = store.with_event_notifications();
        let cluster = store.cluster();
        return Ok((Arc::new(store), Some(cluster)));
    }
    if config.cluster.enabled == Some(true) {
        return Err(ConfigError::Invalid(
            "[cluster] enabled needs a PostgreSQL [database] url; SQLite is one node".into(),
        ));
    }
    let store = match url {
        None => SqliteStore::open(&data_dir.join("agentd.db"))
            .await
            .map(|s| Arc::new(s) as Arc<dyn Store>),
        Some(url) if url.starts_with("sqlite:") => SqliteStore::open_url(&url)
            .await
            .map(|s| Arc::new(s) as Arc<dyn Store>),
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
