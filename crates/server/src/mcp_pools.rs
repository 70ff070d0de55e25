//! The MCP server pools of a runtime: one per profile (profiles may name
//! different servers), made on first use; one per session for the profile's
//! servers whose `env` or `headers` hold `{user}`, `{session}` or
//! `{user_token}` (see `crate::tool_identity`), filled in for that session
//! and made anew with a fresh token once half its validity is gone; and one
//! per session for a trusted project's `.mcp.json` servers, made anew when
//! the file changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agentd_store::SessionRecord;
use agentd_tools::McpPool;
use agentd_tools::mcp::McpServerConfig;
use chrono::{DateTime, Utc};

use crate::config::ProfileConfig;
use crate::project::Project;
use crate::runtime::Runtime;
use crate::tool_identity::{Filler, fill_server, server_has_placeholder};

/// One MCP pool per profile (profiles may name different servers), made on
/// first use, and the sessions' own pools.
#[derive(Clone, Default)]
pub struct McpPools {
    shared: Arc<Mutex<HashMap<String, McpPool>>>,
    /// By session id: the pool of the servers filled in for that session.
    own: Arc<Mutex<HashMap<String, OwnPool>>>,
}

/// A session's pool of filled-in servers.
#[derive(Clone)]
struct OwnPool {
    pool: McpPool,
    profile: String,
    /// When to fill them in again (half the token's validity); `None`: no
    /// token, nothing expires.
    renew_at: Option<DateTime<Utc>>,
}

impl McpPools {
    /// The pools of the profile's servers for `session`: the shared one
    /// (servers without placeholders) and the session's own one (servers
    /// whose `env` or `headers` name the session or its user).
    pub(crate) async fn for_profile(
        &self,
        runtime: &Runtime,
        session: &SessionRecord,
        profile: &ProfileConfig,
    ) -> Vec<McpPool> {
        let configs: Vec<_> = runtime
            .config
            .mcp_servers
            .iter()
            .filter(|s| {
                profile
                    .mcp_servers
                    .as_ref()
                    .is_none_or(|names| names.contains(&s.name))
            })
            .map(|s| s.to_tools_config())
            .collect();
        let (own, shared): (Vec<_>, Vec<_>) = configs.into_iter().partition(server_has_placeholder);
        let mut pools = Vec::new();
        let shared = within_allowlist(shared, profile);
        if !shared.is_empty()
            && let Ok(mut map) = self.shared.lock()
        {
            pools.push(
                map.entry(session.profile.clone())
                    .or_insert_with(|| McpPool::new(shared))
                    .clone(),
            );
        }
        if !own.is_empty()
            && let Some(pool) = self.own_pool(runtime, session, profile, &own).await
        {
            pools.push(pool);
        }
        pools
    }

    /// The session's pool of `configs` filled in: the one made before unless
    /// its profile changed or its token is half gone (then its servers stop
    /// and new ones start with a fresh token). `None` when filling in failed
    /// (logged: the turn runs without those servers).
    async fn own_pool(
        &self,
        runtime: &Runtime,
        session: &SessionRecord,
        profile: &ProfileConfig,
        configs: &[McpServerConfig],
    ) -> Option<McpPool> {
        let now = Utc::now();
        let stale = {
            let mut map = self.own.lock().ok()?;
            match map.get(&session.id) {
                Some(own)
                    if own.profile == session.profile && own.renew_at.is_none_or(|at| now < at) =>
                {
                    return Some(own.pool.clone());
                }
                _ => map.remove(&session.id),
            }
        };
        if let Some(stale) = stale {
            stale.pool.shutdown().await;
        }
        let mut filler = Filler::new(runtime, &session.owner, &session.id);
        let mut filled = Vec::new();
        for config in configs {
            match fill_server(&mut filler, config).await {
                Ok(config) => filled.push(config),
                Err(err) => {
                    tracing::warn!(session = %session.id, server = %config.name, "MCP server left out: {err}");
                }
            }
        }
        let filled = within_allowlist(filled, profile);
        if filled.is_empty() {
            return None;
        }
        let renew_at = filler.token_expiry().map(|expiry| now + (expiry - now) / 2);
        let pool = McpPool::new(filled);
        let own = OwnPool {
            pool: pool.clone(),
            profile: session.profile.clone(),
            renew_at,
        };
        self.own.lock().ok()?.insert(session.id.clone(), own);
        Some(pool)
    }

    /// The pool of a trusted project's `.mcp.json` servers for `session_id`,
    /// made anew when the file changed (the old one's servers stopped).
    pub(crate) async fn for_project(&self, session_id: &str, project: &Project) -> Option<McpPool> {
        if project.mcp_servers.is_empty() {
            return None;
        }
        let key = format!("project:{session_id}:{:x}", project.mcp_fingerprint);
        let prefix = format!("project:{session_id}:");
        let stale: Vec<McpPool> = {
            let mut pools = self.shared.lock().ok()?;
            let stale_keys: Vec<String> = pools
                .keys()
                .filter(|k| k.starts_with(&prefix) && **k != key)
                .cloned()
                .collect();
            stale_keys.iter().filter_map(|k| pools.remove(k)).collect()
        };
        for pool in stale {
            pool.shutdown().await;
        }
        let mut pools = self.shared.lock().ok()?;
        Some(
            pools
                .entry(key)
                .or_insert_with(|| McpPool::new(project.mcp_servers.clone()))
                .clone(),
        )
    }

    /// Stops every MCP server of `session_id`.
    pub async fn shutdown_session(&self, session_id: &str) {
        let prefix = format!("project:{session_id}:");
        let pools: Vec<McpPool> = self
            .shared
            .lock()
            .map(|mut p| {
                // Its project's pool goes from the map, but is stopped below
                // like the rest, gracefully.
                let all = p.values().cloned().collect();
                p.retain(|key, _| !key.starts_with(&prefix));
                all
            })
            .unwrap_or_default();
        for pool in pools {
            pool.shutdown_session(session_id).await;
        }
        let own = self
            .own
            .lock()
            .ok()
            .and_then(|mut own| own.remove(session_id));
        if let Some(own) = own {
            own.pool.shutdown().await;
        }
    }

    /// Stops every MCP server.
    pub async fn shutdown(&self) {
        let mut pools: Vec<McpPool> = self
            .shared
            .lock()
            .map(|p| p.values().cloned().collect())
            .unwrap_or_default();
        if let Ok(own) = self.own.lock() {
            pools.extend(own.values().map(|own| own.pool.clone()));
        }
        for pool in pools {
            pool.shutdown().await;
        }
    }
}

/// The servers a profile's network allowlist lets through (all without one).
fn within_allowlist(
    configs: Vec<McpServerConfig>,
    profile: &ProfileConfig,
) -> Vec<McpServerConfig> {
    configs
        .into_iter()
        .filter_map(|s| match profile.network.allowlist() {
            Some(list) => crate::egress::mcp_within(s, list),
            None => Some(s),
        })
        .collect()
}
