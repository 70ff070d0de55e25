//! The sessions' egress proxies (one per session whose profile has a
//! network allowlist), kept as long as the session so its sandboxes keep
//! the same socket.
use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agentd_sandbox::EgressBridge;
use agentd_tools::egress::{EgressAllowlist, EgressProxy, NetworkRefusals};
use agentd_tools::{McpServerConfig, McpTransport, UrlCheck, UrlVerdict, WebPolicy};

#[derive(Clone, Default)]
pub struct EgressProxies {
    proxies: Arc<Mutex<HashMap<String, Arc<EgressProxy>>>>,
    next: Arc<AtomicU64>,
}

impl EgressProxies {
    /// The session's proxy, started on first use; what its sandbox binds
    /// and where its refusals collect.
    pub fn for_session(
        &self,
        session_id: &str,
        list: EgressAllowlist,
    ) -> io::Result<(EgressBridge, NetworkRefusals)> {
        let mut proxies = self.proxies.lock().unwrap_or_else(|e| e.into_inner());
        let proxy = match proxies.get(session_id) {
            Some(proxy) => proxy.clone(),
            None => {
                let n = self.next.fetch_add(1, Ordering::Relaxed);
                let socket = socket_dir()?.join(format!("{n}.sock"));
                let proxy = Arc::new(EgressProxy::start(&socket, list, session_id)?);
                proxies.insert(session_id.to_string(), proxy.clone());
                proxy
            }
        };
        let bridge = EgressBridge {
            socket: proxy.socket().to_path_buf(),
            forwarder: std::env::current_exe()?,
        };
        Ok((bridge, proxy.refusals()))
    }

    /// Stops the session's proxy (its socket goes with it).
    pub fn shutdown_session(&self, session_id: &str) {
        let mut proxies = self.proxies.lock().unwrap_or_else(|e| e.into_inner());
        proxies.remove(session_id);
    }
}

/// A directory of this process's own, short enough for socket paths (108
/// bytes), open to nobody else: the sockets themselves are bound into the
/// sandboxes, never reached by path.
fn socket_dir() -> io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = std::env::temp_dir().join(format!("agentd-egress-{}", std::process::id()));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => Ok(dir),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(dir),
        Err(err) => Err(err),
    }
}

/// `web` narrowed to the allowlist: a URL off the list is refused (each
/// redirect too), and the list's local entries may be private addresses.
pub fn web_within(web: WebPolicy, list: &EgressAllowlist) -> WebPolicy {
    let mut private: Vec<String> = web.private_hosts.to_vec();
    private.extend(list.local_hosts());
    let (inner, list) = (web.url_check.clone(), list.clone());
    let url_check = UrlCheck::new(move |url| match list.permits_url(url) {
        Ok(()) => inner.check(url),
        Err(reason) => UrlVerdict::Deny(format!("{reason} (the profile's network allowlist)")),
    });
    WebPolicy {
        private_hosts: private.into(),
        url_check,
        ..web
    }
}

/// Whether an MCP server may be used under the allowlist: an HTTP one only
/// when its URL is on the list.
pub fn mcp_within(server: &McpServerConfig, list: &EgressAllowlist) -> bool {
    let McpTransport::Http { url, .. } = &server.transport else {
        return true;
    };
    match url::Url::parse(url)
        .map_err(|e| e.to_string())
        .and_then(|u| list.permits_url(&u))
    {
        Ok(()) => true,
        Err(reason) => {
            tracing::warn!(server = %server.name, %reason, "MCP server left out: not on the profile's network allowlist");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list() -> EgressAllowlist {
        let entries = ["docs.rs".to_string(), "localhost:8080".to_string()];
        EgressAllowlist::parse(&entries, false).unwrap()
    }

    #[test]
    fn web_fetch_is_held_to_the_list() {
        let web = web_within(WebPolicy::default(), &list());
        let check = |url: &str| web.url_check.check(&url::Url::parse(url).unwrap());
        assert_eq!(check("https://docs.rs/tokio"), UrlVerdict::Allow);
        assert_eq!(check("http://localhost:8080/x"), UrlVerdict::Allow);
        assert!(matches!(check("https://example.com/"), UrlVerdict::Deny(_)));
        assert!(matches!(
            check("http://localhost:9090/"),
            UrlVerdict::Deny(_)
        ));
        assert!(matches!(
            check("https://docs.rs:8443/"),
            UrlVerdict::Deny(_)
        ));
        assert!(web.allows_private("localhost") && !web.allows_private("docs.rs"));
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
        assert!(mcp_within(&http("http://localhost:8080/mcp"), &list()));
        assert!(!mcp_within(&http("https://mcp.example.com/"), &list()));
        let stdio = McpTransport::Stdio {
            command: "server".into(),
            args: Vec::new(),
            env: Default::default(),
            read_only_paths: Vec::new(),
            network: false,
        };
        assert!(mcp_within(&McpServerConfig::new("s", stdio), &list()));
    }
}
