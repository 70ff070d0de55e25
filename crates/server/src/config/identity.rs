//! `[identity]`: the tokens agentd signs for tools (`{user_token}`, see
//! `crate::tool_identity`).

use serde::Deserialize;

/// `[identity]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IdentityToml {
    /// The tokens' `iss` (default `agentd`): tools check it.
    pub issuer: String,
    /// How long a `{user_token}` is valid, in seconds (default 3600; 60 to
    /// 86400).
    pub token_ttl_s: u64,
    /// A new signing key after this many days (default 30); the previous
    /// one stays published until the tokens it signed have expired.
    pub key_rotation_days: u64,
}

impl Default for IdentityToml {
    fn default() -> Self {
        Self {
            issuer: "agentd".into(),
            token_ttl_s: 3600,
            key_rotation_days: 30,
        }
    }
}

impl IdentityToml {
    pub(super) fn check(&self) -> Result<(), String> {
        if self.issuer.trim().is_empty() {
            return Err("[identity] issuer must not be empty".into());
        }
        if !(60..=86_400).contains(&self.token_ttl_s) {
            return Err("[identity] token_ttl_s must be between 60 and 86400".into());
        }
        if !(1..=3650).contains(&self.key_rotation_days) {
            return Err("[identity] key_rotation_days must be between 1 and 3650".into());
        }
        Ok(())
    }
}
