//! Which addresses a fetch may connect to. The host is resolved here, vetted,
//! and the HTTP client is then pinned to exactly the vetted addresses, so a
//! DNS answer that changes between the check and the connect is never used.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use url::{Host, Url};

use super::{WebEgress, WebPolicy};
use crate::egress::{EgressError, Refusal};

/// The addresses a URL's host may be reached at.
#[derive(Debug, Clone)]
pub(crate) struct Vetted {
    /// The host name the client will ask its resolver for; `None` for an IP literal.
    pub domain: Option<String>,
    pub addrs: Vec<SocketAddr>,
}

/// Resolve `url`'s host and refuse it if any address is not public, unless the
/// host is one the policy lets reach private addresses; under a network
/// allowlist, as the list says.
pub(crate) async fn vet(url: &Url, policy: &WebPolicy) -> Result<Vetted, String> {
    let port = url
        .port_or_known_default()
        .ok_or_else(|| format!("{url} has no port"))?;
    if let Some(egress) = &policy.egress {
        return vet_listed(url, port, egress).await;
    }
    let (domain, addrs) = match url.host() {
        None => return Err(format!("{url} has no host")),
        Some(Host::Ipv4(ip)) => (None, vec![SocketAddr::new(IpAddr::V4(ip), port)]),
        Some(Host::Ipv6(ip)) => (None, vec![SocketAddr::new(IpAddr::V6(ip), port)]),
        Some(Host::Domain(domain)) => {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((domain, port))
                .await
                .map_err(|err| format!("could not resolve {domain}: {err}"))?
                .collect();
            if addrs.is_empty() {
                return Err(format!("could not resolve {domain}: no addresses"));
            }
            (Some(domain.to_string()), addrs)
        }
    };
    let host = url.host_str().unwrap_or_default();
    if policy.allows_private(host) {
        return Ok(Vetted { domain, addrs });
    }
    for addr in &addrs {
        if let Some(kind) = non_public(addr.ip()) {
            let what = match &domain {
                Some(domain) => format!("{domain} resolves to {}", addr.ip()),
                None => addr.ip().to_string(),
            };
            return Err(format!(
                "refusing to fetch {url}: {what}, a {kind} address; private, loopback and \
                 link-local addresses are only fetched for hosts allowed by a \
                 WebFetch(domain:HOST) rule"
            ));
        }
    }
    Ok(Vetted { domain, addrs })
}

/// [`vet`] under a network allowlist: the host and port must be on it, and
/// every address it resolves to allowed (the proxy's own check).
async fn vet_listed(url: &Url, port: u16, egress: &WebEgress) -> Result<Vetted, String> {
    let host = url.host_str().ok_or_else(|| format!("{url} has no host"))?;
    match egress.list.resolve(host, port).await {
        Ok(addrs) => {
            let domain = match url.host() {
                Some(Host::Domain(domain)) => Some(domain.to_string()),
                _ => None,
            };
            Ok(Vetted { domain, addrs })
        }
        Err(EgressError::Refused(reason)) => {
            tracing::warn!(%host, port, %reason, "WebFetch refused by the network allowlist");
            egress.refusals.push(Refusal {
                host: host.to_string(),
                port,
                reason: reason.clone(),
            });
            Err(format!(
                "refusing to fetch {url}: {reason} (the profile's network allowlist)"
            ))
        }
        Err(EgressError::Unreachable(reason)) => Err(reason),
    }
}

/// Why `ip` is not a public internet address, or `None` if it is.
pub(crate) fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(ip) => non_public_v4(ip),
        IpAddr::V6(ip) => non_public_v6(ip),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, _, _] = ip.octets();
    Some(match (a, b) {
        (0, _) => "unspecified (0.0.0.0/8)",
        (127, _) => "loopback",
        (10, _) | (192, 168) => "private",
        (172, 16..=31) => "private",
        (169, 254) => "link-local",
        (100, 64..=127) => "shared (CGNAT 100.64.0.0/10)",
        (224..=239, _) => "multicast",
        // 240.0.0.0/4 is reserved; its last address is the broadcast address.
        (240..=255, _) => "reserved or broadcast",
        _ => return None,
    })
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    Some(match first {
        _ if ip.is_unspecified() => "unspecified",
        _ if ip.is_loopback() => "loopback",
        _ if first & 0xffc0 == 0xfe80 => "link-local",
        _ if first & 0xffc0 == 0xfec0 => "site-local",
        _ if first & 0xfe00 == 0xfc00 => "unique-local (private)",
        _ if first & 0xff00 == 0xff00 => "multicast",
        _ => return embedded_v4(ip).and_then(non_public_v4),
    })
}

/// The IPv4 address inside an IPv4-mapped (::ffff:0:0/96), IPv4-compatible
/// (::/96), NAT64 (64:ff9b::/96) or 6to4 (2002::/16) address: such addresses
/// reach the IPv4 host, so they are judged as it would be.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0, 0, _, _] => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn kind(ip: &str) -> Option<&'static str> {
        non_public(ip.parse().unwrap())
    }

    #[test]
    fn ipv4_ranges() {
        for ip in [
            "127.0.0.1",
            "127.255.255.254",
            "10.0.0.1",
            "10.255.255.255",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "240.0.0.1",
        ] {
            assert!(kind(ip).is_some(), "{ip} should be refused");
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "172.15.255.255",
            "172.32.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "192.167.1.1",
            "169.253.1.1",
            "11.0.0.1",
            "223.255.255.255",
        ] {
            assert_eq!(kind(ip), None, "{ip} is public");
        }
        assert_eq!(kind("127.0.0.1"), Some("loopback"));
        assert_eq!(kind("10.1.1.1"), Some("private"));
        assert_eq!(kind("169.254.0.1"), Some("link-local"));
    }

    #[test]
    fn ipv6_ranges() {
        for ip in [
            "::1",
            "::",
            "fe80::1",
            "febf::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "fec0::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::10.0.0.1",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
        ] {
            assert!(kind(ip).is_some(), "{ip} should be refused");
        }
        for ip in [
            "2001:4860:4860::8888",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "2002:808:808::1",
            "fe00::1",
        ] {
            assert_eq!(kind(ip), None, "{ip} is public");
        }
        assert_eq!(kind("::ffff:127.0.0.1"), Some("loopback"));
        assert_eq!(kind("fe80::1"), Some("link-local"));
    }

    #[tokio::test]
    async fn private_hosts_are_matched_exactly() {
        let mut policy = WebPolicy::default();
        let url = Url::parse("http://127.0.0.1:8080/x").unwrap();
        let err = vet(&url, &policy).await.unwrap_err();
        assert!(err.contains("loopback"), "{err}");
        policy.private_hosts = vec!["127.0.0.1".to_string()].into();
        let vetted = vet(&url, &policy).await.unwrap();
        assert_eq!(vetted.domain, None);
        assert_eq!(vetted.addrs, vec!["127.0.0.1:8080".parse().unwrap()]);
        let v6 = Url::parse("http://[::1]/").unwrap();
        assert!(vet(&v6, &policy).await.is_err());
        policy.private_hosts = vec!["::1".to_string()].into();
        assert!(vet(&v6, &policy).await.is_ok());
        // Decimal and other odd IPv4 spellings are parsed to the address.
        let decimal = Url::parse("http://2130706433/").unwrap();
        assert!(vet(&decimal, &WebPolicy::default()).await.is_err());
    }
}
