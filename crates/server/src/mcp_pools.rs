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
use crate::tool_identity::{Filler, Minter, fill_server, render_server, server_has_placeholder};

/// When filling in a server failed (say the database was down), how soon
/// the next turn tries again.
const RETRY_FILL: chrono::Duration = chrono::Duration::seconds(30);

/// How long past its servers' idle timeout a session's own pool unused is
/// kept (a turn may run long on it).
const STALE_GRACE: chrono::Duration = chrono::Duration::hours(1);

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
    /// When to fill them in again (half the token's validity, or soon when
    /// a server was left out); `None`: no token, nothing expires.
    renew_at: Option<DateTime<Utc>>,
    /// After this, unused, it is stopped (by the next session's use).
    idle_until: DateTime<Utc>,
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
            .map(|s| (s.audience(), s.to_tools_config()))
            .collect();
        let (own, shared): (Vec<_>, Vec<_>) = configs
            .into_iter()
            .partition(|(_, config)| server_has_placeholder(config));
        let mut pools = Vec::new();
        let shared = shared
            .into_iter()
            .map(|(_, config)| render_server(config))
            .collect();
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
        configs: &[(String, McpServerConfig)],
    ) -> Option<McpPool> {
        let now = Utc::now();
        let idle = configs
            .iter()
            .map(|(_, config)| config.idle_timeout)
            .max()
            .and_then(|idle| chrono::Duration::from_std(idle).ok())
            .unwrap_or_default()
            + STALE_GRACE;
        let stale = {
            let mut map = self.own.lock().ok()?;
            let fresh = map.get_mut(&session.id).filter(|own| {
                own.profile == session.profile && own.renew_at.is_none_or(|at| now < at)
            });
            if let Some(own) = fresh {
                own.idle_until = own.idle_until.max(now + idle);
                return Some(own.pool.clone());
            }
            // Other sessions' pools long unused (their session deleted on
            // another node, moved there, or just left).
            let gone: Vec<String> = map
                .iter()
                .filter(|(id, own)| **id == session.id || own.idle_until < now)
                .map(|(id, _)| id.clone())
                .collect();
            gone.iter()
                .filter_map(|id| map.remove(id))
                .collect::<Vec<_>>()
        };
        for stale in stale {
            stale.pool.shutdown().await;
        }
        let mut filler = Filler::new(Minter::of(runtime), &session.owner, &session.id);
        let mut filled = Vec::new();
        let mut left_out = false;
        for (audience, config) in configs {
            match fill_server(&mut filler, config, audience).await {
                Ok(config) => filled.push(config),
                Err(err) => {
                    left_out = true;
                    tracing::warn!(session = %session.id, server = %config.name, "MCP server left out: {err}");
                }
            }
        }
        let filled = within_allowlist(filled, profile);
        let renew_at = match filler.token_expiry() {
            // A server left out is tried again soon, not at the token's half-life.
            _ if left_out => Some(now + RETRY_FILL),
            Some(expiry) => Some(now + (expiry - now) / 2),
            None => None,
        };
        if filled.is_empty() {
            return None;
        }
        let pool = McpPool::new(filled);
        let own = OwnPool {
            pool: pool.clone(),
            profile: session.profile.clone(),
            renew_at,
            idle_until: now + idle,
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
