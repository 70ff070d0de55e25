//! One `reqwest::Client` per distinct configuration, shared by every model
//! client made from it. The server resolves a session's model at every turn;
//! a fresh client each time paid for its TLS set-up and threw away its
//! pooled connection, so every turn opened a new one.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::ModelError;

/// More distinct configurations than this (say, rotated keys) start over.
const MAX_CLIENTS: usize = 32;

type Key = (String, Option<tokio::runtime::Id>);

fn clients() -> &'static Mutex<HashMap<Key, reqwest::Client>> {
    static CLIENTS: OnceLock<Mutex<HashMap<Key, reqwest::Client>>> = OnceLock::new();
    CLIENTS.get_or_init(Mutex::default)
}

/// The client for `config` (everything `build` puts into it, secrets
/// included; kept in memory only), built on first use. Per Tokio runtime:
/// a pooled connection belongs to the runtime that opened it.
pub(crate) fn shared(
    config: String,
    build: impl FnOnce() -> Result<reqwest::Client, ModelError>,
) -> Result<reqwest::Client, ModelError> {
    let runtime = tokio::runtime::Handle::try_current()
        .ok()
        .map(|handle| handle.id());
    let key = (config, runtime);
    let mut clients = clients().lock().unwrap_or_else(|err| err.into_inner());
    if let Some(client) = clients.get(&key) {
        return Ok(client.clone());
    }
    let client = build()?;
    if clients.len() >= MAX_CLIENTS {
        clients.clear();
    }
    clients.insert(key, client.clone());
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_client_per_configuration() {
        let mut built = 0;
        let mut get = |config: &str| {
            shared(format!("test-{config}"), || {
                built += 1;
                Ok(reqwest::Client::new())
            })
            .unwrap()
        };
        get("a");
        get("a");
        get("b");
        assert_eq!(built, 2);
    }
}
