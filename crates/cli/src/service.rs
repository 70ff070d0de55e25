//! The session service on the command line: the same operations the server
//! runs for HTTP (delete, rewind, fork), on the configured store.

use std::path::PathBuf;
use std::sync::Arc;

use agentd_server::config::Config;
use agentd_server::metrics::Metrics;
use agentd_server::paths::{Connections, open_store};
use agentd_server::registry::Registry;
use agentd_server::runtime::Runtime;
use agentd_server::session::SessionService;

/// The session service over the store `config` names, opening `connections`
/// if it is SQLite: [`Connections::One`] for a command of one session or
/// none at a time.
pub async fn open(
    config: Config,
    data_dir: PathBuf,
    connections: Connections,
) -> Result<SessionService, String> {
    let env = |key: &str| std::env::var(key).ok();
    let store = open_store(&data_dir, &config, &env, connections)
        .await
        .map_err(|err| err.to_string())?;
    let runtime = Runtime::new(store, config, data_dir);
    let env = Arc::new(std::env::vars().collect());
    let registry = Registry::new(runtime, env, Arc::new(Metrics::default()));
    Ok(SessionService::new(registry))
}
