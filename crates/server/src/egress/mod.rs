//! The sessions' egress proxies (one per session whose profile has a
//! network allowlist), kept as long as the session so its sandboxes keep
//! the same socket; and the allowlist applied to what agentd reaches
//! itself for a session (WebFetch, HTTP MCP servers).
mod socket_dir;

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agentd_sandbox::EgressBridge;
use agentd_tools::egress::{EgressAllowlist, EgressProxy, NetworkRefusals, ProxyLimits};
use agentd_tools::{McpServerConfig, McpTransport, WebEgress, WebPolicy};

use socket_dir::SocketDir;

#[derive(Clone, Default)]
pub struct EgressProxies {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    proxies: Mutex<HashMap<String, Running>>,
    /// Made on first use; removed at [`EgressProxies::shutdown`].
    dir: Mutex<Option<Arc<SocketDir>>>,
    next: AtomicU64,
}

struct Running {
    list: EgressAllowlist,
    proxy: Arc<EgressProxy>,
    /// Kept until the proxy is gone: its socket is in there.
    _dir: Arc<SocketDir>,
}

impl EgressProxies {
    /// The session's proxy for `list`, started on first use (and again when
    /// the session's list changed); what its sandbox binds and where its
    /// refusals collect.
    pub fn for_session(
        &self,
        session_id: &str,
        list: EgressAllowlist,
    ) -> io::Result<(EgressBridge, NetworkRefusals)> {
        let mut proxies = lock(&self.inner.proxies);
        let proxy = match proxies.get(session_id) {
            Some(running) if running.list == list => running.proxy.clone(),
            _ => {
                let dir = self.dir()?;
                let n = self.inner.next.fetch_add(1, Ordering::Relaxed);
                let (listener, socket) = dir.bind(&format!("{n}.sock"))?;
                let limits = ProxyLimits::default();
                let proxy =
                    EgressProxy::serve(listener, &socket, list.clone(), session_id, limits)?;
                let proxy = Arc::new(proxy);
                let running = Running {
                    list,
                    proxy: proxy.clone(),
                    _dir: dir,
                };
                proxies.insert(session_id.to_string(), running);
                proxy
            }
        };
        let bridge = EgressBridge {
            socket: proxy.socket().to_path_buf(),
        };
        Ok((bridge, proxy.refusals()))
    }

    fn dir(&self) -> io::Result<Arc<SocketDir>> {
        let mut dir = lock(&self.inner.dir);
        match &*dir {
            Some(dir) => Ok(dir.clone()),
            None => {
                let made = Arc::new(SocketDir::create(&std::env::temp_dir())?);
                *dir = Some(made.clone());
                Ok(made)
            }
        }
    }

    /// Stops the session's proxy (its socket goes with it).
    pub fn shutdown_session(&self, session_id: &str) {
        lock(&self.inner.proxies).remove(session_id);
    }

    /// Stops every proxy; the directory of their sockets goes once the
    /// last is gone.
    pub fn shutdown(&self) {
        lock(&self.inner.proxies).clear();
        lock(&self.inner.dir).take();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|err| err.into_inner())
}

/// `web` held to the allowlist: every URL WebFetch fetches (the first and
/// each redirect) is judged by the list as the proxy judges a request, its
/// refusals reported with the proxy's.
pub fn web_within(web: WebPolicy, list: &EgressAllowlist, refusals: NetworkRefusals) -> WebPolicy {
    WebPolicy {
        egress: Some(WebEgress {
            list: Arc::new(list.clone()),
            refusals,
        }),
        ..web
    }
}

/// An MCP server under the allowlist: an HTTP one only when its URL is on
/// the list, and then held to it (its host resolved by the list, every
/// address checked); a stdio one reaches out through the session's proxy.
pub fn mcp_within(mut server: McpServerConfig, list: EgressAllowlist) -> Option<McpServerConfig> {
    if let McpTransport::Http { url, .. } = &server.transport {
        let on_list = url::Url::parse(url)
            .map_err(|e| e.to_string())
            .and_then(|u| list.permits_url(&u));
        if let Err(reason) = on_list {
            tracing::warn!(server = %server.name, %reason, "MCP server left out: not on the profile's network allowlist");
            return None;
        }
    }
    server.egress = Some(Arc::new(list));
    Some(server)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list() -> EgressAllowlist {
        let entries = ["docs.rs".to_string(), "localhost:8080".to_string()];
        EgressAllowlist::parse(&entries, false).unwrap()
    }

    #[tokio::test]
    async fn a_session_keeps_its_proxy_until_its_list_changes_or_it_ends() {
        let proxies = EgressProxies::default();
        let (first, _) = proxies.for_session("s1", list()).unwrap();
        let (again, _) = proxies.for_session("s1", list()).unwrap();
        assert_eq!(first, again);
        let dir = first.socket.parent().unwrap().to_path_buf();
        assert!(dir.starts_with(std::env::temp_dir()));
        let (other, _) = proxies.for_session("s2", list()).unwrap();
        assert_ne!(first, other);
        let narrower = EgressAllowlist::parse(&["docs.rs".to_string()], false).unwrap();
        let (changed, _) = proxies.for_session("s1", narrower).unwrap();
        assert_ne!(first, changed);
        assert!(!first.socket.exists(), "the old list's proxy is gone");
        proxies.shutdown_session("s1");
        assert!(!changed.socket.exists());
        assert!(other.socket.exists());
        proxies.shutdown();
        assert!(!dir.exists());
    }

    #[test]
    fn http_mcp_servers_off_the_list_are_left_out() {
        let http = |url: &str| {
            let transport = McpTransport::Http {
                url: url.to_string(),
                headers: Default::default(),
            };
            McpServerConfig::new("s", transport)
        };
        let kept = mcp_within(http("http://localhost:8080/mcp"), list()).unwrap();
        assert_eq!(kept.egress.as_deref(), Some(&list()));
        assert!(mcp_within(http("https://mcp.example.com/"), list()).is_none());
        let stdio = McpTransport::Stdio {
            command: "server".into(),
            args: Vec::new(),
            env: Default::default(),
            read_only_paths: Vec::new(),
            network: false,
        };
        assert!(mcp_within(McpServerConfig::new("s", stdio), list()).is_some());
    }
}
