//! What `WebFetch` may reach: the limits of a fetch and the permission
//! policy's verdict on each URL it is about to follow.
use std::sync::Arc;
use std::time::Duration;

use url::Url;

use crate::egress::{EgressAllowlist, NetworkRefusals};

/// Default cap on the bytes read from a response body.
pub const DEFAULT_WEB_MAX_BYTES: usize = 10 * 1024 * 1024;
/// Default limit on a whole fetch, redirects included.
pub const DEFAULT_WEB_TIMEOUT: Duration = Duration::from_secs(30);
/// Default number of redirects followed.
pub const DEFAULT_WEB_MAX_REDIRECTS: u8 = 5;

/// What WebFetch may reach. Cheap to clone.
#[derive(Clone, Debug)]
pub struct WebPolicy {
    /// Hosts (lower-case, exactly as written in an allow rule
    /// `WebFetch(domain:HOST)`) that may resolve to private, loopback or
    /// link-local addresses. Every other host that resolves to such an
    /// address is refused.
    pub private_hosts: Arc<[String]>,
    /// The body is cut at this many bytes, with a note.
    pub max_bytes: usize,
    /// Limit on the whole fetch.
    pub timeout: Duration,
    pub max_redirects: u8,
    /// Re-checks each redirect hop that changes host.
    pub url_check: UrlCheck,
    /// A profile's network allowlist: every URL fetched, the first and each
    /// redirect, must pass it as the egress proxy's would, and it alone
    /// decides which private addresses may be reached.
    pub egress: Option<WebEgress>,
}

/// The network allowlist [`WebPolicy::egress`] holds fetches to, and where
/// its refusals are reported (as the proxy's are).
#[derive(Clone, Debug)]
pub struct WebEgress {
    pub list: Arc<EgressAllowlist>,
    pub refusals: NetworkRefusals,
}

impl Default for WebPolicy {
    fn default() -> Self {
        Self {
            private_hosts: Arc::from(Vec::new()),
            max_bytes: DEFAULT_WEB_MAX_BYTES,
            timeout: DEFAULT_WEB_TIMEOUT,
            max_redirects: DEFAULT_WEB_MAX_REDIRECTS,
            url_check: UrlCheck::default(),
            egress: None,
        }
    }
}

impl WebPolicy {
    /// Whether `host` (as the URL spells it) may resolve to private addresses.
    pub fn allows_private(&self, host: &str) -> bool {
        // `[::1]` as URLs write it; `example.com.` is the same host as `example.com`.
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let host = host.strip_suffix('.').unwrap_or(host);
        self.private_hosts
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(host))
    }
}

/// The permission policy's verdict on fetching a URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UrlVerdict {
    Allow,
    /// Refused; the reason names the rule.
    Deny(String),
    /// Needs the user's approval.
    Ask,
}

/// A predicate over URLs; allows everything by default.
#[derive(Clone, Default)]
pub struct UrlCheck(Option<Arc<CheckUrl>>);

type CheckUrl = dyn Fn(&Url) -> UrlVerdict + Send + Sync;

impl UrlCheck {
    pub fn new(check: impl Fn(&Url) -> UrlVerdict + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(check)))
    }

    pub fn check(&self, url: &Url) -> UrlVerdict {
        self.0
            .as_ref()
            .map_or(UrlVerdict::Allow, |check| check(url))
    }
}

impl std::fmt::Debug for UrlCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "UrlCheck(..)"
        } else {
            "UrlCheck(allow all)"
        })
    }
}
