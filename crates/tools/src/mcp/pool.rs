//! [`McpPool`]: every session's MCP servers, and the reaper of idle ones.
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use agentd_sandbox::Policy;
use futures::future::join_all;
use tokio_util::sync::CancellationToken;

use super::names::tool_name;
use super::slot::ServerSlot;
use super::tool::McpTool;
use super::{McpServerConfig, McpTools};
use crate::Tool;

/// Bounds on how often the reaper looks for idle servers.
const MIN_REAP_INTERVAL: Duration = Duration::from_millis(50);
const MAX_REAP_INTERVAL: Duration = Duration::from_secs(30);

/// The MCP servers of every session. Cheap to clone; one per agentd process.
/// Dropping the last clone kills every server it started.
#[derive(Clone)]
pub struct McpPool {
    inner: Arc<Inner>,
}

struct Inner {
    configs: Vec<Arc<McpServerConfig>>,
    sessions: Mutex<HashMap<String, Arc<Vec<Arc<ServerSlot>>>>>,
    reaper_started: AtomicBool,
    stop: CancellationToken,
    closed: AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl std::fmt::Debug for McpPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.inner.configs.iter().map(|c| c.name.as_str()).collect();
        f.debug_struct("McpPool").field("servers", &names).finish()
    }
}

impl McpPool {
    /// A pool for these servers; nothing starts until a session asks.
    pub fn new(configs: Vec<McpServerConfig>) -> Self {
        Self {
            inner: Arc::new(Inner {
                configs: configs.into_iter().map(Arc::new).collect(),
                sessions: Mutex::new(HashMap::new()),
                reaper_started: AtomicBool::new(false),
                stop: CancellationToken::new(),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// The configured servers.
    pub fn configs(&self) -> impl Iterator<Item = &McpServerConfig> {
        self.inner.configs.iter().map(|config| config.as_ref())
    }

    /// The session's MCP tools. The first call for `session_key` starts its
    /// servers (in parallel; stdio ones in the sandbox under `policy`); later
    /// calls answer from the cached tool lists, so servers stopped for
    /// idleness are not started just to list tools. `policy` is kept for
    /// later (re)starts; running servers keep the one they started with.
    /// A server that fails to start is reported in `errors`; listings within
    /// 30 s of that failure report it again instead of retrying.
    pub async fn tools(&self, session_key: &str, policy: &Policy) -> McpTools {
        if self.inner.closed.load(Ordering::Acquire) {
            return McpTools {
                tools: Vec::new(),
                errors: vec!["the MCP servers have been shut down".to_string()],
            };
        }
        self.start_reaper();
        let slots = self.session(session_key, policy);
        let listings = join_all(slots.iter().map(|slot| async move {
            let listing = slot.tools().await;
            (slot, listing)
        }))
        .await;
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        let mut errors = Vec::new();
        let mut names = BTreeSet::new();
        for (slot, listing) in listings {
            let server = &slot.config.name;
            match listing {
                Ok(definitions) => {
                    for definition in definitions {
                        let name = tool_name(server, &definition.name);
                        if !names.insert(name.clone()) {
                            errors.push(format!(
                                "MCP server `{server}`: tool `{}` is left out: \
                                 its name `{name}` is taken",
                                definition.name
                            ));
                            continue;
                        }
                        tools.push(Arc::new(McpTool::new(name, definition, slot.clone())));
                    }
                }
                Err(err) => errors.push(format!("MCP server `{server}` {err}")),
            }
        }
        McpTools { tools, errors }
    }

    /// Stop the session's servers; its tools fail from then on.
    pub async fn shutdown_session(&self, session_key: &str) {
        let slots = self
            .inner
            .sessions
            .lock()
            .ok()
            .and_then(|mut sessions| sessions.remove(session_key));
        if let Some(slots) = slots {
            join_all(slots.iter().map(|slot| slot.shutdown())).await;
        }
    }

    /// Stop every server; the pool hands out no more tools.
    pub async fn shutdown(&self) {
        self.inner.closed.store(true, Ordering::Release);
        self.inner.stop.cancel();
        let sessions: Vec<_> = self
            .inner
            .sessions
            .lock()
            .map(|mut sessions| sessions.drain().map(|(_, slots)| slots).collect())
            .unwrap_or_default();
        join_all(
            sessions
                .iter()
                .flat_map(|slots| slots.iter())
                .map(|slot| slot.shutdown()),
        )
        .await;
    }

    fn session(&self, key: &str, policy: &Policy) -> Arc<Vec<Arc<ServerSlot>>> {
        let Ok(mut sessions) = self.inner.sessions.lock() else {
            return Arc::new(Vec::new());
        };
        if let Some(slots) = sessions.get(key) {
            slots.iter().for_each(|slot| slot.set_policy(policy));
            return slots.clone();
        }
        let slots: Arc<Vec<_>> = Arc::new(
            self.inner
                .configs
                .iter()
                .map(|config| Arc::new(ServerSlot::new(config.clone(), policy.clone())))
                .collect(),
        );
        sessions.insert(key.to_string(), slots.clone());
        slots
    }

    /// Start the idle reaper once, from inside the runtime.
    fn start_reaper(&self) {
        if self.inner.reaper_started.swap(true, Ordering::AcqRel) {
            return;
        }
        let Some(shortest) = self.inner.configs.iter().map(|c| c.idle_timeout).min() else {
            return;
        };
        let interval = (shortest / 4).clamp(MIN_REAP_INTERVAL, MAX_REAP_INTERVAL);
        let stop = self.inner.stop.clone();
        tokio::spawn(reap(Arc::downgrade(&self.inner), interval, stop));
    }
}

/// Every `interval`, stop servers idle past their `idle_timeout`. Ends with
/// the pool.
async fn reap(pool: Weak<Inner>, interval: Duration, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = stop.cancelled() => return,
        }
        let Some(pool) = pool.upgrade() else {
            return;
        };
        let slots: Vec<Arc<ServerSlot>> = pool
            .sessions
            .lock()
            .map(|sessions| sessions.values().flat_map(|s| s.iter().cloned()).collect())
            .unwrap_or_default();
        drop(pool);
        for slot in slots {
            if let Some(connection) = slot.take_if_idle() {
                tracing::info!(server = %slot.config.name, "stopping idle MCP server");
                tokio::spawn(async move { connection.close().await });
            }
        }
    }
}
