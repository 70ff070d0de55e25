//! `auth = "none"` trusts whoever can reach the port, which a browser's page
//! elsewhere can too by rebinding its own name to 127.0.0.1: the `Origin`
//! and `Host` it sends then agree. What it cannot send is a `Host` naming this
//! machine, so only those are answered: loopback addresses, `localhost`, and
//! the names in `[server] allowed_hosts`.

use std::net::IpAddr;

use axum::http::HeaderMap;
use axum::http::header::HOST;
use axum::http::uri::Authority;

/// Whether `headers`' `Host` (or, for HTTP/2, the request's authority) names
/// this machine.
pub(super) fn is_local_host(
    headers: &HeaderMap,
    authority: Option<&Authority>,
    allowed: &[String],
) -> bool {
    let host = match headers.get(HOST) {
        Some(value) => match value
            .to_str()
            .ok()
            .and_then(|v| v.parse::<Authority>().ok())
        {
            Some(parsed) => parsed.host().to_ascii_lowercase(),
            None => return false,
        },
        None => match authority {
            Some(authority) => authority.host().to_ascii_lowercase(),
            None => return false,
        },
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return ip.is_loopback();
    }
    // `localhost.` is the same name, fully qualified.
    let name = host.trim_end_matches('.');
    name == "localhost"
        || allowed
            .iter()
            .any(|allowed| allowed.trim_end_matches('.').eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(host: Option<&str>, allowed: &[&str]) -> bool {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(HOST, host.parse().unwrap());
        }
        let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
        is_local_host(&headers, None, &allowed)
    }

    #[test]
    fn loopback_names_and_addresses_are_local() {
        for host in [
            "127.0.0.1:7878",
            "127.1.2.3",
            "localhost:7878",
            "LOCALHOST",
            "localhost.:7878",
            "[::1]:7878",
            "[::1]",
        ] {
            assert!(check(Some(host), &[]), "{host}");
        }
    }

    #[test]
    fn other_names_are_not_unless_allowed() {
        for host in [
            "rebind.attacker.example:7878",
            "10.0.0.1:7878",
            "localhost.attacker.example",
            "127.0.0.1.nip.io",
            "[::ffff:10.0.0.1]",
            "",
            "a b",
        ] {
            assert!(!check(Some(host), &[]), "{host:?}");
        }
        assert!(!check(None, &[]), "no Host at all");
        assert!(check(Some("devbox.lan:7878"), &["devbox.lan"]));
        assert!(check(Some("DEVBOX.lan."), &["devbox.lan"]));
        assert!(!check(Some("other.lan"), &["devbox.lan"]));
    }
}
