//! The MCP server pools of a runtime: one per profile (profiles may name
//! different servers), made on first use, and one per session for a trusted
//! project's `.mcp.json` servers, made anew when the file changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agentd_tools::McpPool;

use crate::config::ProfileConfig;
use crate::project::Project;
use crate::runtime::Runtime;

/// One MCP pool per profile (profiles may name different servers), made on
/// first use.
#[derive(Clone, Default)]
pub struct McpPools(Arc<Mutex<HashMap<String, McpPool>>>);

impl McpPools {
    pub(crate) fn for_profile(
        &self,
        runtime: &Runtime,
        name: &str,
        profile: &ProfileConfig,
    ) -> Option<McpPool> {
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
            .filter_map(|s| match profile.network.allowlist() {
                Some(list) => crate::egress::mcp_within(s, list),
                None => Some(s),
            })
            .collect();
        if configs.is_empty() {
            return None;
        }
        let mut pools = self.0.lock().ok()?;
        Some(
            pools
                .entry(name.to_string())
                .or_insert_with(|| McpPool::new(configs))
                .clone(),
        )
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
            let mut pools = self.0.lock().ok()?;
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
        let mut pools = self.0.lock().ok()?;
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
            .0
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
    }

    /// Stops every MCP server.
    pub async fn shutdown(&self) {
        let pools: Vec<McpPool> = self
            .0
            .lock()
            .map(|p| p.values().cloned().collect())
            .unwrap_or_default();
        for pool in pools {
            pool.shutdown().await;
        }
    }
}
