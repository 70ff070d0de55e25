//! The HTTP client of an MCP server under a profile's network allowlist:
//! the server's host is resolved by the list (once per connection, every
//! address checked as the egress proxy checks them) and the client connects
//! to exactly those addresses, through no proxy and following no redirect.
use std::sync::Arc;

use reqwest_mcp::dns::{Addrs, Name, Resolve, Resolving};
use url::Url;

use crate::egress::EgressAllowlist;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A client for `url` held to `list`; refuses at once what the list refuses
/// (an address in the URL is checked here: no resolver sees it).
pub(crate) async fn client(
    list: &Arc<EgressAllowlist>,
    url: &str,
) -> Result<reqwest_mcp::Client, String> {
    let parsed = Url::parse(url).map_err(|err| format!("{url}: {err}"))?;
    let host = parsed
        .host_str()
        .ok_or_else(|| format!("{url} has no host"))?;
    let port = parsed
        .port_or_known_default()
        .ok_or_else(|| format!("{url} has no port"))?;
    list.resolve(host, port)
        .await
        .map_err(|err| format!("{url}: {err}"))?;
    super::connection::install_tls_provider();
    reqwest_mcp::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(reqwest_mcp::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(Listed {
            list: list.clone(),
            port,
        }))
        .build()
        .map_err(|err| format!("could not set up the HTTP client: {err}"))
}

/// Resolves names by the list, for the one port the client may reach.
struct Listed {
    list: Arc<EgressAllowlist>,
    port: u16,
}

impl Resolve for Listed {
    fn resolve(&self, name: Name) -> Resolving {
        let (list, port, host) = (self.list.clone(), self.port, name.as_str().to_string());
        Box::pin(async move {
            let addrs = list
                .resolve(&host, port)
                .await
                .map_err(|err| -> BoxError { err.to_string().into() })?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn list(entries: &[&str]) -> Arc<EgressAllowlist> {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        Arc::new(EgressAllowlist::parse(&entries, false).unwrap())
    }

    #[tokio::test]
    async fn names_and_addresses_are_judged_by_the_list() {
        let named = list(&["localhost:8931"]);
        assert!(client(&named, "http://localhost:8931/mcp").await.is_ok());
        let err = client(&named, "http://127.0.0.1:8931/mcp")
            .await
            .unwrap_err();
        assert!(err.contains("not on the network allowlist"), "{err}");
        // A bare name allows its web ports, but not at a loopback address.
        let bare = list(&["localhost"]);
        let err = client(&bare, "https://localhost/mcp").await.unwrap_err();
        assert!(err.contains("loopback"), "{err}");
        let resolver = Listed {
            list: bare,
            port: 443,
        };
        let name: Name = "localhost".parse().unwrap();
        assert!(resolver.resolve(name).await.is_err());
    }
}
