//! Several sign-in methods at once (`auth = ["header", "token", "jwt"]`),
//! tried in a fixed order: the trusted proxy's header, then an agentd token
//! (Bearer, or the web UI's cookie), then a JWT Bearer. The first method
//! whose credential is *present* decides: a wrong credential is a 401 and
//! does not fall through to the next method, and no credential is a 401.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::header::{AUTHORIZATION, HeaderName, ORIGIN};
use axum::http::{HeaderMap, Method};
use subtle::ConstantTimeEq;

use super::AppState;
use super::accounts::{Account, AccountRules, account_user};
use super::auth::{
    AuthConfigError, DEFAULT_USER_HEADER, MIN_SECRET_LEN, PROXY_SECRET_HEADER, SESSION_MAX_AGE_S,
    User, bearer, configured_admin, is_write, looks_like_token, origin_matches_host, same_origin,
    session_cookie, sha256, token_record, token_user, valid_user_name,
};
use super::error::ApiError;
use super::jwks::{Expected, Verifier};
use super::oidc::Oidc;
use super::sign_in::OIDC_TOKEN_NAME;
use crate::config::{AuthMethods, AuthMode, ServerConfig};

#[derive(Clone)]
pub enum Auth {
    None {
        /// `Host` names answered besides loopback ones (`[server] allowed_hosts`).
        allowed_hosts: Vec<String>,
    },
    Methods(Methods),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::None { .. } => f.write_str("Auth::None"),
            Auth::Methods(methods) => write!(f, "Auth::Methods({:?})", methods.names()),
        }
    }
}

/// The methods on, in the order they are tried.
#[derive(Clone, Default)]
pub struct Methods {
    pub header: Option<ProxyHeader>,
    pub token: bool,
    pub jwt: Option<Arc<JwtMethod>>,
    /// The web UI's "Sign in with …" (it ends in the token cookie).
    pub oidc: Option<Arc<Oidc>>,
}

#[derive(Clone)]
pub struct ProxyHeader {
    pub user_header: HeaderName,
    pub secret_hash: [u8; 32],
}

pub struct JwtMethod {
    pub verifier: Verifier,
    /// The `iss` every token carries: the accounts' issuer.
    pub issuer: String,
    pub user_claim: String,
    pub rules: AccountRules,
}

impl Methods {
    pub fn names(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if self.header.is_some() {
            names.push("header");
        }
        if self.token {
            names.push("token");
        }
        if self.jwt.is_some() {
            names.push("jwt");
        }
        names
    }
}

impl Auth {
    /// Only `token`: what tests and `auth = "token"` get.
    pub fn token() -> Self {
        Auth::Methods(Methods {
            token: true,
            ..Default::default()
        })
    }

    /// Check the configured methods against the address being bound.
    /// `env` reads `AGENTD_HEADER_SECRET` and `AGENTD_OIDC_CLIENT_SECRET`,
    /// which override the config's secrets.
    pub fn from_config(
        server: &ServerConfig,
        methods: &AuthMethods,
        env: &dyn Fn(&str) -> Option<String>,
        bind: SocketAddr,
    ) -> Result<Self, AuthConfigError> {
        if methods.has(AuthMode::None) {
            if !bind.ip().is_loopback() {
                return Err(AuthConfigError(format!(
                    "auth = \"none\" is only allowed on a loopback address, not {bind}; \
                     use auth = \"token\" (and `agentd tokens create`) or bind 127.0.0.1"
                )));
            }
            return Ok(Auth::None {
                allowed_hosts: server.allowed_hosts.clone(),
            });
        }
        let header = methods
            .has(AuthMode::Header)
            .then(|| proxy_header(server, env("AGENTD_HEADER_SECRET")))
            .transpose()?;
        let jwt = match (methods.has(AuthMode::Jwt), &server.jwt) {
            (false, _) => None,
            (true, None) => {
                return Err(AuthConfigError(
                    "auth has \"jwt\" but there is no [server.jwt] (issuer, audience)".into(),
                ));
            }
            (true, Some(jwt)) => Some(Arc::new(JwtMethod {
                verifier: Verifier::new(
                    Expected {
                        issuer: jwt.issuer.clone(),
                        audience: jwt.audience.clone(),
                        leeway_s: jwt.leeway_s,
                        algorithms: jwt.algorithms.clone(),
                    },
                    jwt.jwks_url.clone(),
                    Duration::from_secs(jwt.jwks_min_refetch_s),
                ),
                issuer: jwt.issuer.clone(),
                user_claim: jwt.user_claim.clone(),
                rules: AccountRules {
                    link_existing_users: jwt.link_existing_users,
                    create_users: jwt.create_users,
                },
            })),
        };
        let token = methods.has(AuthMode::Token);
        let oidc = match &server.oidc {
            Some(_) if !token => {
                return Err(AuthConfigError(
                    "[server.oidc] signs browsers in with the token cookie: auth must include \
                     \"token\""
                        .into(),
                ));
            }
            // The callback's address from the request's `Host` is only
            // trusted on loopback, where nobody else can send requests.
            Some(config) if config.redirect_url.is_none() && !bind.ip().is_loopback() => {
                return Err(AuthConfigError(format!(
                    "[server.oidc] needs redirect_url (https://<this server>{}) when \
                     binding {bind}, a non-loopback address",
                    super::oidc::CALLBACK_PATH
                )));
            }
            Some(config) => Some(Arc::new(Oidc::new(
                config.clone(),
                env("AGENTD_OIDC_CLIENT_SECRET"),
            ))),
            None => None,
        };
        Ok(Auth::Methods(Methods {
            header,
            token,
            jwt,
            oidc,
        }))
    }

    /// The methods on (none for `auth = "none"`).
    pub fn methods(&self) -> Option<&Methods> {
        match self {
            Auth::None { .. } => None,
            Auth::Methods(methods) => Some(methods),
        }
    }

    /// Whether agentd tokens (and so the web UI's cookie) are accepted.
    pub fn takes_tokens(&self) -> bool {
        self.methods().is_some_and(|m| m.token)
    }
}

fn proxy_header(
    server: &ServerConfig,
    env_secret: Option<String>,
) -> Result<ProxyHeader, AuthConfigError> {
    let name = server.header_name.as_deref().unwrap_or(DEFAULT_USER_HEADER);
    let user_header = HeaderName::try_from(name).map_err(|_| {
        AuthConfigError(format!(
            "[server] header_name {name:?} is not a header name"
        ))
    })?;
    let secret = env_secret
        .or_else(|| server.header_secret.clone())
        .unwrap_or_default();
    if secret.len() < MIN_SECRET_LEN {
        return Err(AuthConfigError(format!(
            "auth = \"header\" needs a shared secret of at least {MIN_SECRET_LEN} \
             characters in [server] header_secret or AGENTD_HEADER_SECRET; the \
             proxy sends it as {PROXY_SECRET_HEADER}"
        )));
    }
    Ok(ProxyHeader {
        user_header,
        secret_hash: sha256(secret.as_bytes()),
    })
}

/// The credential that decides a request, by the fixed order.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Credential<'a> {
    Proxy,
    Token(&'a str),
    Cookie(&'a str),
    Jwt(&'a str),
}

/// Which credential decides: the first present one of an enabled method.
/// An `Authorization` header that is not a Bearer one is present but wrong.
pub(super) fn credential<'a>(
    methods: &Methods,
    headers: &'a HeaderMap,
) -> Result<Credential<'a>, ApiError> {
    if methods.header.is_some() && headers.contains_key(PROXY_SECRET_HEADER) {
        return Ok(Credential::Proxy);
    }
    let bearer = headers
        .get(AUTHORIZATION)
        .map(|value| {
            value
                .to_str()
                .ok()
                .and_then(bearer)
                .ok_or(ApiError::Unauthorized)
        })
        .transpose()?;
    if methods.token {
        // Without JWTs on, every Bearer is an agentd token (or wrong).
        if let Some(token) = bearer.filter(|t| methods.jwt.is_none() || looks_like_token(t)) {
            return Ok(Credential::Token(token));
        }
        if bearer.is_none()
            && let Some(cookie) = session_cookie(headers)
        {
            return Ok(Credential::Cookie(cookie));
        }
    }
    match bearer {
        Some(token) if methods.jwt.is_some() => Ok(Credential::Jwt(token)),
        _ => Err(ApiError::Unauthorized),
    }
}

/// Who sent a request, and by which method.
pub(super) async fn authenticate_methods(
    state: &AppState,
    methods: &Methods,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(User, AuthMode), ApiError> {
    match credential(methods, headers)? {
        Credential::Proxy => {
            let proxy = methods.header.as_ref().ok_or(ApiError::Unauthorized)?;
            let user = proxy_user(state, proxy, headers).await?;
            // A browser behind the proxy may be lured by another site's
            // page into a write, signed in by the proxy's own session: a
            // browser's `Origin` must name this server (as the browser or
            // the proxy's `X-Forwarded-Host` names it).
            if is_write(method) && headers.contains_key(ORIGIN) && !proxied_same_origin(headers) {
                return Err(ApiError::BadOrigin);
            }
            Ok((user, AuthMode::Header))
        }
        Credential::Token(token) => {
            let record = token_record(state, token).await?;
            Ok((token_user(state, record), AuthMode::Token))
        }
        Credential::Cookie(token) => {
            let record = token_record(state, token).await?;
            let age = chrono::Utc::now() - record.created_at;
            // A sign-in by the provider lasts its own (shorter) while: the
            // provider is asked again, and refuses users it disabled.
            let max_age = match &methods.oidc {
                Some(oidc) if record.name == OIDC_TOKEN_NAME => {
                    i64::try_from(oidc.config.session_max_age_s).unwrap_or(i64::MAX)
                }
                _ => SESSION_MAX_AGE_S,
            };
            if age.num_seconds() > max_age {
                return Err(ApiError::Unauthorized);
            }
            if is_write(method) && !same_origin(headers) {
                return Err(ApiError::BadOrigin);
            }
            Ok((token_user(state, record), AuthMode::Token))
        }
        Credential::Jwt(token) => {
            let jwt = methods.jwt.as_ref().ok_or(ApiError::Unauthorized)?;
            let claims = jwt.verifier.verify(token).await.map_err(|err| {
                tracing::info!(%err, "a JWT was refused");
                ApiError::Unauthorized
            })?;
            let account =
                Account::from_claims(&jwt.issuer, &claims, &jwt.user_claim).map_err(|err| {
                    tracing::info!(%err, "a JWT names no usable account");
                    ApiError::Unauthorized
                })?;
            let user = account_user(state, jwt.rules, &account).await?;
            let is_admin = user.is_admin || configured_admin(state, &user.name);
            let user = User {
                name: user.name,
                is_admin,
            };
            Ok((user, AuthMode::Jwt))
        }
    }
}

async fn proxy_user(
    state: &AppState,
    proxy: &ProxyHeader,
    headers: &HeaderMap,
) -> Result<User, ApiError> {
    let secret = headers
        .get(PROXY_SECRET_HEADER)
        .ok_or(ApiError::Unauthorized)?;
    // Hashing first makes the comparison independent of length.
    let given = sha256(secret.as_bytes());
    if !bool::from(given.ct_eq(&proxy.secret_hash)) {
        return Err(ApiError::Unauthorized);
    }
    let name = headers
        .get(&proxy.user_header)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|name| valid_user_name(name))
        .ok_or(ApiError::Unauthorized)?;
    named_user(state, name).await
}

/// Whether a write's `Origin` names this server as the browser reached it:
/// the `Host`, or the trusted proxy's `X-Forwarded-Host`.
fn proxied_same_origin(headers: &HeaderMap) -> bool {
    if same_origin(headers) {
        return true;
    }
    let forwarded = headers
        .get("x-forwarded-host")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next());
    let origin = headers.get(ORIGIN).and_then(|v| v.to_str().ok());
    match (origin, forwarded) {
        (Some(origin), Some(host)) => origin_matches_host(origin, host),
        _ => false,
    }
}

/// A user named by the trusted proxy, who may have no row: admins are those marked in the database or the config.
async fn named_user(state: &AppState, name: &str) -> Result<User, ApiError> {
    let access = state.registry.runtime().access();
    let row = access.user_by_name(name).await?;
    if row.as_ref().is_some_and(|user| user.disabled_at.is_some()) {
        return Err(ApiError::Unauthorized);
    }
    let is_admin = row.is_some_and(|user| user.is_admin) || configured_admin(state, name);
    Ok(User {
        name: name.to_string(),
        is_admin,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const TOKEN: &str = "agentd_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn methods(header: bool, token: bool, jwt: bool) -> Methods {
        Methods {
            header: header.then(|| ProxyHeader {
                user_header: HeaderName::from_static("x-forwarded-user"),
                secret_hash: [0; 32],
            }),
            token,
            jwt: jwt.then(|| {
                let expected = Expected {
                    issuer: "http://idp".into(),
                    audience: "agentd".into(),
                    leeway_s: 60,
                    algorithms: vec![],
                };
                Arc::new(JwtMethod {
                    verifier: Verifier::new(expected, None, Duration::from_secs(1)),
                    issuer: "http://idp".into(),
                    user_claim: "sub".into(),
                    rules: AccountRules {
                        link_existing_users: false,
                        create_users: true,
                    },
                })
            }),
            oidc: None,
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn the_first_present_credential_of_an_enabled_method_decides() {
        let all = methods(true, true, true);
        let proxy = ("x-agentd-proxy-secret", "s");
        let agentd = (
            "authorization",
            "Bearer agentd_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        );
        let jwt = ("authorization", "Bearer eyJ.a.b");
        let cookie = ("cookie", "agentd_session=c");
        let basic = ("authorization", "Basic abc");
        let ok = |m: &Methods, h: &[(&'static str, &str)]| {
            let map = headers(h);
            format!("{:?}", credential(m, &map).map_err(|e| e.to_string()))
        };
        // The header wins over everything, when on.
        assert_eq!(ok(&all, &[proxy, agentd, cookie]), "Ok(Proxy)");
        assert_eq!(
            ok(&methods(false, true, true), &[proxy, agentd]),
            format!("Ok(Token({TOKEN:?}))")
        );
        // A token before a cookie before a JWT.
        assert_eq!(ok(&all, &[agentd, cookie]), format!("Ok(Token({TOKEN:?}))"));
        assert_eq!(ok(&all, &[cookie]), "Ok(Cookie(\"c\"))");
        assert_eq!(ok(&all, &[jwt]), "Ok(Jwt(\"eyJ.a.b\"))");
        // Without JWTs, any Bearer is a (possibly wrong) agentd token.
        assert_eq!(
            ok(&methods(false, true, false), &[jwt]),
            "Ok(Token(\"eyJ.a.b\"))"
        );
        // Without tokens, an agentd token is tried as a JWT (and fails there).
        assert!(ok(&methods(false, false, true), &[agentd]).starts_with("Ok(Jwt("));
        // A cookie is not a credential of JWT-only servers.
        assert!(ok(&methods(false, false, true), &[cookie]).starts_with("Err"));
        // Present but malformed: refused, no fall-through to the cookie.
        assert!(ok(&all, &[basic, cookie]).starts_with("Err"));
        // Nothing present: refused.
        assert!(ok(&all, &[]).starts_with("Err"));
        assert!(ok(&methods(true, false, false), &[agentd]).starts_with("Err"));
    }
}
