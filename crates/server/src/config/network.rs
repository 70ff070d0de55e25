//! A profile's `network`: `true` (the host's network), `false` (none), or
//! `{ allow = [...], allow_localhost = false }` (only the listed hosts,
//! through agentd's egress proxy).
use agentd_tools::egress::EgressAllowlist;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum NetworkConfig {
    All(bool),
    Allow(AllowlistToml),
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowlistToml {
    /// `host` (ports 80 and 443), `*.domain` (its subdomains), `host:port`.
    pub allow: Vec<String>,
    /// Let allowed hosts resolve to private, loopback and link-local addresses.
    #[serde(default)]
    pub allow_localhost: bool,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        NetworkConfig::All(false)
    }
}

impl NetworkConfig {
    /// Whether sandboxed commands share the host's network (`true`).
    pub fn shares_host(&self) -> bool {
        matches!(self, NetworkConfig::All(true))
    }

    /// The allowlist, when the profile has one.
    pub fn allowlist(&self) -> Option<EgressAllowlist> {
        match self {
            NetworkConfig::Allow(list) => {
                EgressAllowlist::parse(&list.allow, list.allow_localhost).ok()
            }
            NetworkConfig::All(_) => None,
        }
    }

    /// The list parses, and is enforceable: only a sandbox is held to it.
    pub(super) fn check(&self, at: &str, sandboxed: bool) -> Result<(), String> {
        match self {
            NetworkConfig::Allow(_) if !sandboxed => Err(format!(
                "{at}: a network allowlist needs the sandbox (sandbox = \"off\" runs commands on the host's network)"
            )),
            NetworkConfig::Allow(list) => EgressAllowlist::parse(&list.allow, list.allow_localhost)
                .map(|_| ())
                .map_err(|err| format!("{at}: {err}")),
            NetworkConfig::All(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Profile {
        network: NetworkConfig,
    }

    fn parse(text: &str) -> Result<NetworkConfig, String> {
        toml::from_str::<Profile>(text)
            .map(|p| p.network)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn booleans_keep_their_meaning_and_tables_are_allowlists() {
        assert!(parse("network = true").unwrap().shares_host());
        assert!(!parse("network = false").unwrap().shares_host());
        assert!(parse("network = false").unwrap().allowlist().is_none());
        let list = parse(r#"network = { allow = ["pypi.org", "localhost:8080"] }"#).unwrap();
        assert!(!list.shares_host());
        let allow = list.allowlist().unwrap();
        assert!(allow.permits("pypi.org", 443).is_ok());
        assert!(allow.permits("localhost", 8080).is_ok());
        assert!(parse(r#"network = { allow = [], typo = 1 }"#).is_err());
        let bad = parse(r#"network = { allow = ["a.*.b"] }"#).unwrap();
        assert!(bad.check("profile", true).is_err());
        let good = parse(r#"network = { allow = ["pypi.org"] }"#).unwrap();
        assert!(good.check("profile", true).is_ok());
        assert!(good.check("profile", false).is_err());
        assert!(
            parse("network = true")
                .unwrap()
                .check("profile", false)
                .is_ok()
        );
    }
}
