//! `[server] auth` as one method or several, `[server.jwt]` (JWT bearer
//! tokens from an identity provider) and `[server.oidc]` (the web UI's
//! "Sign in with …").

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{AuthMode, Config};

/// `auth = "token"` or `auth = ["header", "token", "jwt"]`. Whatever the
/// order written, requests are tried in the fixed order header, token, JWT
/// (see `http::auth`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthMethods(Vec<AuthMode>);

impl Default for AuthMethods {
    fn default() -> Self {
        AuthMethods(vec![AuthMode::Token])
    }
}

impl AuthMethods {
    /// Checked: not empty, no repeats, `none` alone.
    pub fn new(modes: Vec<AuthMode>) -> Result<Self, String> {
        if modes.is_empty() {
            return Err(
                "auth names no method; use \"token\", \"header\", \"jwt\" or \"none\"".into(),
            );
        }
        if modes.len() > 1 && modes.contains(&AuthMode::None) {
            return Err(
                "auth = \"none\" cannot be combined with other methods: it lets everyone in".into(),
            );
        }
        for (i, mode) in modes.iter().enumerate() {
            if modes[..i].contains(mode) {
                return Err(format!("auth names {:?} twice", mode.as_str()));
            }
        }
        Ok(AuthMethods(modes))
    }

    pub fn single(mode: AuthMode) -> Self {
        AuthMethods(vec![mode])
    }

    pub fn has(&self, mode: AuthMode) -> bool {
        self.0.contains(&mode)
    }

    pub fn modes(&self) -> &[AuthMode] {
        &self.0
    }
}

impl<'de> Deserialize<'de> for AuthMethods {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            One(AuthMode),
            Many(Vec<AuthMode>),
        }
        let modes = match OneOrMany::deserialize(deserializer).map_err(|_| {
            serde::de::Error::custom(
                "auth must be one of \"token\", \"header\", \"jwt\", \"none\", or a list of them",
            )
        })? {
            OneOrMany::One(mode) => vec![mode],
            OneOrMany::Many(modes) => modes,
        };
        AuthMethods::new(modes).map_err(serde::de::Error::custom)
    }
}

/// Signature algorithms a token may be signed with. Symmetric ones (HS*)
/// and `none` are not offered: anyone holding a shared key could mint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum JwtAlgorithm {
    RS256,
    ES256,
    EdDSA,
}

/// The defaults of [`JwtToml::algorithms`].
pub const DEFAULT_JWT_ALGORITHMS: [JwtAlgorithm; 3] = [
    JwtAlgorithm::RS256,
    JwtAlgorithm::ES256,
    JwtAlgorithm::EdDSA,
];

/// `[server.jwt]`: JWT bearer tokens for API clients (`auth` has `"jwt"`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtToml {
    /// The `iss` tokens must carry; also where the JWKS is discovered
    /// (`<issuer>/.well-known/openid-configuration`) without `jwks_url`.
    pub issuer: String,
    /// The `aud` tokens must carry (one of theirs).
    pub audience: String,
    pub jwks_url: Option<String>,
    /// Clock skew allowed on `exp` and `nbf` (seconds, default 60).
    #[serde(default = "default_leeway")]
    pub leeway_s: u64,
    /// The claim naming the user (default `sub`).
    #[serde(default = "default_user_claim")]
    pub user_claim: String,
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<JwtAlgorithm>,
    /// An unknown `kid` refetches the JWKS at most this often (seconds,
    /// default 10, at least 1), so forged `kid`s cannot hammer the provider.
    #[serde(default = "default_refetch")]
    pub jwks_min_refetch_s: u64,
    /// Let a token whose account is not linked yet sign in as an existing
    /// agentd user of the same name (and link it). Off: such a token is
    /// refused, so nobody at the provider can take over an existing user.
    #[serde(default)]
    pub link_existing_users: bool,
    /// Make a user (named by `user_claim`) for an account seen first.
    #[serde(default = "default_true")]
    pub create_users: bool,
}

/// `[server.oidc]`: the web UI signs in at an OpenID Connect provider.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcToml {
    /// The provider's issuer URL (its discovery document is below it).
    pub issuer: String,
    pub client_id: String,
    /// Or `AGENTD_OIDC_CLIENT_SECRET`.
    pub client_secret: Option<String>,
    /// The button's "Sign in with <name>" (default: the issuer's host).
    pub name: Option<String>,
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    /// The id_token claim naming the user (default `sub`).
    #[serde(default = "default_user_claim")]
    pub user_claim: String,
    /// The id_token claim listing the user's groups (default `groups`).
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// Where the provider sends the browser back: default
    /// `http(s)://<Host>/v1/auth/oidc/callback` from the request.
    pub redirect_url: Option<String>,
    #[serde(default = "default_leeway")]
    pub leeway_s: u64,
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<JwtAlgorithm>,
    /// `[server.oidc.groups.NAME]`: what membership of a group gives.
    #[serde(default)]
    pub groups: BTreeMap<String, GroupGrants>,
    /// See [`JwtToml::link_existing_users`].
    #[serde(default)]
    pub link_existing_users: bool,
    /// Make a user for an account seen first (off: only accounts linked
    /// already, e.g. by `link_existing_users`, sign in).
    #[serde(default = "default_true")]
    pub create_users: bool,
    /// Only members of one of these groups sign in (empty: anyone).
    #[serde(default)]
    pub allowed_groups: Vec<String>,
    /// Only verified emails of these domains sign in (empty: any).
    #[serde(default)]
    pub allowed_domains: Vec<String>,
    /// How long a sign-in by the provider lasts (seconds, default a day):
    /// a user disabled at the provider keeps it until then.
    #[serde(default = "default_oidc_session")]
    pub session_max_age_s: u64,
}

/// What a group gives its members at each sign-in. A later sign-in without
/// the group takes back what it gave (not what an admin granted by hand).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupGrants {
    #[serde(default)]
    pub admin: bool,
    /// Profiles granted by name (as `agentd users grant --profile`).
    #[serde(default)]
    pub profiles: Vec<String>,
    /// Models granted by name.
    #[serde(default)]
    pub models: Vec<String>,
}

fn default_leeway() -> u64 {
    60
}

fn default_user_claim() -> String {
    "sub".into()
}

fn default_groups_claim() -> String {
    "groups".into()
}

fn default_algorithms() -> Vec<JwtAlgorithm> {
    DEFAULT_JWT_ALGORITHMS.to_vec()
}

fn default_refetch() -> u64 {
    10
}

fn default_true() -> bool {
    true
}

fn default_oidc_session() -> u64 {
    24 * 3600
}

/// The most clock skew `leeway_s` may allow.
pub const MAX_LEEWAY_S: u64 = 300;

fn default_scopes() -> Vec<String> {
    ["openid", "profile", "email"].map(String::from).to_vec()
}

/// An `https` URL, or `http` to a loopback address (a provider on this
/// machine): keys and tokens fetched over plain HTTP could be swapped.
fn check_url(key: &str, url: &str) -> Result<(), String> {
    match url::Url::parse(url) {
        Ok(parsed) if parsed.scheme() == "https" => Ok(()),
        Ok(parsed) if parsed.scheme() == "http" && is_loopback(&parsed) => Ok(()),
        Ok(parsed) if parsed.scheme() == "http" => Err(format!(
            "{key} = {url:?} must be https (plain http only to a loopback address)"
        )),
        _ => Err(format!("{key} = {url:?} is not an https URL")),
    }
}

fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

fn check_leeway(key: &str, leeway_s: u64) -> Result<(), String> {
    if leeway_s > MAX_LEEWAY_S {
        return Err(format!("{key} leeway_s is at most {MAX_LEEWAY_S}"));
    }
    Ok(())
}

/// The browser comes back to `redirect_url` with the code: over plain
/// http the session cookie could not be `Secure`, so an https provider
/// needs an https callback (plain http only to this machine).
fn check_redirect_url(issuer: &str, url: &str) -> Result<(), String> {
    let key = "[server.oidc] redirect_url";
    let parsed = url::Url::parse(url).map_err(|_| format!("{key} = {url:?} is not a URL"))?;
    let issuer_https = issuer.to_ascii_lowercase().starts_with("https://");
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if !issuer_https || is_loopback(&parsed) => Ok(()),
        "http" => Err(format!(
            "{key} = {url:?} must be https: the provider is, and the sign-in cookie must be Secure"
        )),
        _ => Err(format!("{key} = {url:?} is not an http(s) URL")),
    }
}

pub(super) fn check(config: &Config) -> Result<(), String> {
    let server = &config.server;
    if let Some(jwt) = &server.jwt {
        check_url("[server.jwt] issuer", &jwt.issuer)?;
        if let Some(url) = &jwt.jwks_url {
            check_url("[server.jwt] jwks_url", url)?;
        }
        if jwt.audience.trim().is_empty() || jwt.algorithms.is_empty() {
            return Err("[server.jwt] needs an audience and at least one algorithm".into());
        }
        check_leeway("[server.jwt]", jwt.leeway_s)?;
        if jwt.jwks_min_refetch_s == 0 {
            return Err("[server.jwt] jwks_min_refetch_s is at least 1".into());
        }
    }
    if server.auth.has(AuthMode::Jwt) && server.jwt.is_none() {
        return Err("auth has \"jwt\" but there is no [server.jwt] (issuer, audience)".into());
    }
    if let Some(oidc) = &server.oidc {
        check_url("[server.oidc] issuer", &oidc.issuer)?;
        if let Some(url) = &oidc.redirect_url {
            check_redirect_url(&oidc.issuer, url)?;
        }
        check_leeway("[server.oidc]", oidc.leeway_s)?;
        if oidc.session_max_age_s == 0 {
            return Err("[server.oidc] session_max_age_s is at least 1".into());
        }
        if !oidc.scopes.iter().any(|s| s == "openid") {
            return Err("[server.oidc] scopes must include \"openid\"".into());
        }
        for (group, grants) in &oidc.groups {
            for profile in &grants.profiles {
                if config.profile(profile).is_err() {
                    return Err(format!(
                        "[server.oidc.groups.{group}] profiles names {profile:?}, which is not a profile"
                    ));
                }
            }
        }
        if oidc.algorithms.is_empty() {
            return Err("[server.oidc] algorithms is empty".into());
        }
        // An id_token would then pass as an API token: refuse the clash.
        if let Some(jwt) = &server.jwt
            && jwt.audience == oidc.client_id
            && jwt.issuer.trim_end_matches('/') == oidc.issuer.trim_end_matches('/')
        {
            return Err(
                "[server.jwt] audience is [server.oidc] client_id: id_tokens of the web sign-in \
                 would work as API tokens; give the API its own audience"
                    .into(),
            );
        }
        // A sign-in ends in the token cookie, which only "token" reads.
        if !server.auth.has(AuthMode::Token) {
            return Err(
                "[server.oidc] signs browsers in with the token cookie: auth must include \"token\""
                    .into(),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Config;

    fn error(extra: &str) -> String {
        Config::parse(extra).err().unwrap_or_default()
    }

    #[test]
    fn provider_settings_that_weaken_sign_in_are_refused() {
        let jwt = "[server]\nauth = [\"token\", \"jwt\"]\n[server.jwt]\naudience = \"api\"\n";
        let oidc = "[server.oidc]\nclient_id = \"web\"\n";
        let cases = [
            (
                format!("{jwt}issuer = \"http://idp.example\"\n"),
                "must be https",
            ),
            (
                format!("{jwt}issuer = \"https://idp.example\"\nleeway_s = 301\n"),
                "at most 300",
            ),
            (
                format!("{jwt}issuer = \"https://idp.example\"\njwks_min_refetch_s = 0\n"),
                "at least 1",
            ),
            (
                format!(
                    "[server]\nauth = \"token\"\n{oidc}issuer = \"https://idp.example\"\n\
                     redirect_url = \"http://agentd.example/v1/auth/oidc/callback\"\n"
                ),
                "must be https",
            ),
            (
                format!(
                    "{jwt}issuer = \"https://idp.example\"\n[server.oidc]\nclient_id = \"api\"\n\
                     issuer = \"https://idp.example\"\n"
                ),
                "own audience",
            ),
        ];
        for (toml, expected) in cases {
            let err = error(&toml);
            assert!(err.contains(expected), "{toml}\n=> {err:?}");
        }
        // Plain http is fine to this machine.
        let local = format!("{jwt}issuer = \"http://127.0.0.1:9\"\n");
        assert!(Config::parse(&local).is_ok(), "{}", error(&local));
    }
}
