//! Which hosts and ports a profile's network allowlist lets out, and which
//! resolved addresses it lets a permitted host be reached at.
use std::net::{IpAddr, SocketAddr};

use super::EgressError;
use crate::web_fetch::non_public;

/// A profile's `network = { allow = […], allow_localhost = … }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressAllowlist {
    entries: Vec<Entry>,
    allow_localhost: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    host: HostPattern,
    /// `None`: ports 80 and 443.
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    Exact(String),
    /// `*.github.com` as `.github.com`: subdomains only.
    Subdomains(String),
}

/// A host and port the list lets out; says which addresses it may resolve to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permit {
    /// Loopback addresses are fine: the entry names `localhost` or a loopback
    /// address with its port.
    loopback: bool,
    /// Any private, loopback or link-local address is fine.
    any_local: bool,
}

impl EgressAllowlist {
    /// Parses `host`, `*.domain` and `host:port` entries (`[v6]:port` for IPv6).
    pub fn parse(entries: &[String], allow_localhost: bool) -> Result<Self, String> {
        let entries = entries
            .iter()
            .map(|entry| parse_entry(entry))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            entries,
            allow_localhost,
        })
    }

    /// Whether `host:port` may be reached at all, before resolving it.
    pub fn permits(&self, host: &str, port: u16) -> Result<Permit, String> {
        let host = normalize(host);
        let entry = self
            .entries
            .iter()
            .filter(|entry| entry.port.map_or(port == 80 || port == 443, |p| p == port))
            .find(|entry| entry.host.matches(&host))
            .ok_or_else(|| format!("{host}:{port} is not on the network allowlist"))?;
        let loopback = entry.port.is_some() && names_loopback(&entry.host);
        Ok(Permit {
            loopback,
            any_local: self.allow_localhost,
        })
    }

    /// Exact hosts that may resolve to local addresses (for `WebFetch`,
    /// which decides that by host alone).
    pub fn local_hosts(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter(|entry| {
                self.allow_localhost || (entry.port.is_some() && names_loopback(&entry.host))
            })
            .filter_map(|entry| match &entry.host {
                HostPattern::Exact(host) => Some(host.clone()),
                HostPattern::Subdomains(_) => None,
            })
            .collect()
    }

    /// Whether `url`'s host and port are on the list (for clients that do
    /// not go through the proxy: `WebFetch`, HTTP MCP servers).
    pub fn permits_url(&self, url: &url::Url) -> Result<(), String> {
        let host = url.host_str().ok_or_else(|| format!("{url} has no host"))?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| format!("{url} has no port"))?;
        self.permits(host, port).map(|_| ())
    }

    /// The addresses `host:port` may be reached at: it must be on the list,
    /// and every address it resolves to (resolved here, once) allowed. The
    /// caller connects to exactly these, so a second lookup that answers
    /// otherwise (DNS rebinding) is never made.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, EgressError> {
        let permit = self.permits(host, port).map_err(EgressError::Refused)?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::net::lookup_host((bare, port))
                .await
                .map_err(|err| {
                    EgressError::Unreachable(format!("could not resolve {host}: {err}"))
                })?
                .collect(),
        };
        if addrs.is_empty() {
            let reason = format!("could not resolve {host}: no addresses");
            return Err(EgressError::Unreachable(reason));
        }
        for addr in &addrs {
            self.check_addr(permit, host, addr.ip())
                .map_err(EgressError::Refused)?;
        }
        Ok(addrs)
    }

    /// Whether a permitted host may be reached at `ip`.
    pub fn check_addr(&self, permit: Permit, host: &str, ip: IpAddr) -> Result<(), String> {
        if is_metadata(ip) {
            // Cloud instance metadata hands out the host's credentials:
            // never, whatever `allow_localhost` says.
            return Err(format!(
                "{host} resolves to {ip}, the cloud metadata address, which is never reachable"
            ));
        }
        let Some(kind) = non_public(ip) else {
            return Ok(());
        };
        if permit.any_local || (permit.loopback && ip.is_loopback()) {
            return Ok(());
        }
        Err(format!(
            "{host} resolves to {ip}, a {kind} address; only allowed with \
             allow_localhost = true or an entry naming localhost with its port"
        ))
    }
}

impl HostPattern {
    fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(exact) => exact == host,
            HostPattern::Subdomains(suffix) => {
                host.ends_with(suffix.as_str()) && host.len() > suffix.len()
            }
        }
    }
}

/// The instance metadata services of the common clouds (AWS, GCP, Azure,
/// OpenStack, and AWS's IPv6 one), also as an IPv4-mapped IPv6 address.
fn is_metadata(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => v4.octets() == [169, 254, 169, 254],
        IpAddr::V6(v6) => v6.segments() == [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254],
    }
}

fn names_loopback(host: &HostPattern) -> bool {
    match host {
        HostPattern::Exact(host) => {
            host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
        }
        HostPattern::Subdomains(_) => false,
    }
}

fn normalize(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

fn parse_entry(entry: &str) -> Result<Entry, String> {
    let bad = || format!("network allowlist entry {entry:?}: expected host, *.domain or host:port");
    let (host, port) = split_port(entry.trim()).ok_or_else(bad)?;
    let host = normalize(host);
    if host.is_empty() || host.contains(['/', '@', ' ']) {
        return Err(bad());
    }
    let host = match host.strip_prefix("*.") {
        Some(domain) if !domain.is_empty() && !domain.contains('*') => {
            HostPattern::Subdomains(format!(".{domain}"))
        }
        None if !host.contains('*') => HostPattern::Exact(host),
        _ => return Err(bad()),
    };
    Ok(Entry { host, port })
}

/// `host`, `host:port`, `[v6]`, `[v6]:port` or a bare IPv6 address.
fn split_port(entry: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = entry.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after.strip_prefix(':') {
            Some(port) => Some((host, Some(port.parse().ok()?))),
            None if after.is_empty() => Some((host, None)),
            None => None,
        };
    }
    match entry.split_once(':') {
        Some((host, port)) if !port.contains(':') => Some((host, Some(port.parse().ok()?))),
        Some(_) => Some((entry, None)),
        None => Some((entry, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str], allow_localhost: bool) -> EgressAllowlist {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        EgressAllowlist::parse(&entries, allow_localhost).unwrap()
    }

    #[test]
    fn bare_hosts_allow_web_ports_and_wildcards_only_subdomains() {
        let list = list(&["pypi.org", "*.github.com"], false);
        assert!(list.permits("pypi.org", 443).is_ok());
        assert!(list.permits("PyPI.org.", 80).is_ok());
        assert!(list.permits("pypi.org", 22).is_err());
        assert!(list.permits("files.pypi.org", 443).is_err());
        assert!(list.permits("api.github.com", 443).is_ok());
        assert!(list.permits("a.b.github.com", 443).is_ok());
        assert!(list.permits("github.com", 443).is_err());
        assert!(list.permits("evilgithub.com", 443).is_err());
    }

    #[test]
    fn ports_restrict_and_names_are_not_addresses() {
        let list = list(&["localhost:8080", "[::1]:9000"], false);
        assert!(list.permits("localhost", 8080).is_ok());
        assert!(list.permits("localhost", 8081).is_err());
        assert!(list.permits("localhost", 443).is_err());
        assert!(list.permits("127.0.0.1", 8080).is_err());
        assert!(list.permits("[::1]", 9000).is_ok());
    }

    #[test]
    fn local_addresses_need_an_explicit_entry_or_the_switch() {
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let private: IpAddr = "10.1.2.3".parse().unwrap();
        let link_local: IpAddr = "169.254.169.254".parse().unwrap();
        let public: IpAddr = "151.101.0.223".parse().unwrap();

        let strict = list(&["pypi.org", "localhost:8080", "localhost"], false);
        let permit = strict.permits("pypi.org", 443).unwrap();
        assert!(strict.check_addr(permit, "pypi.org", public).is_ok());
        assert!(strict.check_addr(permit, "pypi.org", loopback).is_err());
        assert!(strict.check_addr(permit, "pypi.org", private).is_err());
        assert!(strict.check_addr(permit, "pypi.org", link_local).is_err());
        let named = strict.permits("localhost", 8080).unwrap();
        assert!(strict.check_addr(named, "localhost", loopback).is_ok());
        assert!(strict.check_addr(named, "localhost", private).is_err());
        // A bare `localhost` (no port) does not open loopback.
        assert_eq!(strict.local_hosts(), ["localhost"]);
        let bare = strict.permits("localhost", 80).unwrap();
        assert!(strict.check_addr(bare, "localhost", loopback).is_err());

        let open = list(&["intranet.example"], true);
        let permit = open.permits("intranet.example", 443).unwrap();
        assert!(open.check_addr(permit, "intranet.example", private).is_ok());
        assert!(
            open.check_addr(permit, "intranet.example", loopback)
                .is_ok()
        );
        // Instance metadata stays out even then, in every spelling.
        for metadata in ["169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254"] {
            let ip: IpAddr = metadata.parse().unwrap();
            let err = open.check_addr(permit, "intranet.example", ip).unwrap_err();
            assert!(err.contains("metadata"), "{metadata}: {err}");
        }
    }

    #[tokio::test]
    async fn resolving_checks_the_name_and_every_address() {
        let list = list(&["localhost:8080", "127.0.0.1:9000", "pypi.org"], false);
        let addrs = list.resolve("localhost", 8080).await.unwrap();
        assert!(
            !addrs.is_empty()
                && addrs
                    .iter()
                    .all(|a| a.ip().is_loopback() && a.port() == 8080)
        );
        assert_eq!(
            list.resolve("127.0.0.1", 9000).await.unwrap(),
            ["127.0.0.1:9000".parse().unwrap()]
        );
        assert!(list.resolve("127.0.0.1", 8080).await.is_err());
        assert!(list.resolve("localhost", 9000).await.is_err());
        // A name on the list is still refused at a loopback address.
        let strict = super::tests::list(&["localhost"], false);
        let err = strict.resolve("localhost", 80).await.unwrap_err();
        assert!(
            matches!(&err, EgressError::Refused(r) if r.contains("loopback")),
            "{err}"
        );
    }

    #[test]
    fn bad_entries_are_refused() {
        for entry in ["", "*", "a.*.com", "http://x", "host:port", "[::1", "*."] {
            assert!(
                EgressAllowlist::parse(&[entry.to_string()], false).is_err(),
                "{entry:?}"
            );
        }
    }
}
