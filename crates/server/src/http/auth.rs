//! Who is asking. Methods (`[server] auth`; several at once are tried in
//! the order of `auth_methods`, JWTs are checked in `jwks`):
//! - `token`: `Authorization: Bearer agentd_…`, or the web UI's
//!   [`SESSION_COOKIE`] holding a token made by `POST /v1/auth/login`; the
//!   store keeps only the token's SHA-256, looked up by hash and compared in
//!   constant time. A write signed in by the cookie must carry this server's
//!   own `Origin` (cross-site request forgery); Bearer requests need none.
//! - `header`: a trusted proxy names the user in a header and proves itself
//!   with a shared secret header (compared in constant time).
//! - `jwt`: `Authorization: Bearer <JWT>` signed by `[server.jwt]`'s provider.
//! - `none`: everyone is [`LOCAL_USER`], the owner `agentd run` uses, an
//!   admin; only allowed on a loopback address, and only for requests whose
//!   `Host` names this machine (see `local_host`).
//!
//! Admins are the users marked so in the database (`agentd users admin`,
//! `agentd tokens create --admin`) and those named in `[access] admins`.
//!
//! Every failure of a credential is the same bare 401; a good provider
//! token whose account may not sign in here is a 403 saying so (`accounts`).

use agentd_store::TokenRecord;
use axum::extract::FromRequestParts;
use axum::http::header::{COOKIE, HOST, ORIGIN};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::AppState;
pub use super::auth_methods::{Auth, Methods};
use super::error::ApiError;
use crate::config::AuthMode;

/// The owner of sessions made without authentication (and by `agentd run`).
pub const LOCAL_USER: &str = "local";
/// Where a trusted proxy puts the shared secret in `header` mode.
pub const PROXY_SECRET_HEADER: &str = "x-agentd-proxy-secret";
const TOKEN_PREFIX: &str = "agentd_";
/// Random bytes in a token (hex encoded after the prefix).
const TOKEN_BYTES: usize = 32;
pub(super) const DEFAULT_USER_HEADER: &str = "x-forwarded-user";
pub(super) const MIN_SECRET_LEN: usize = 16;
/// The web UI's sign-in cookie: a token of its own (see `POST /v1/auth/login`).
pub const SESSION_COOKIE: &str = "agentd_session";
/// How long a sign-in lasts: the cookie's `Max-Age`, and the age past which
/// the server refuses its token in a cookie.
pub const SESSION_MAX_AGE_S: i64 = 30 * 24 * 3600;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AuthConfigError(pub(super) String);

/// The authenticated user; sessions are owned by `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    /// May use every profile and model, and the admin routes.
    pub is_admin: bool,
}

impl User {
    /// The user of the command line and of `auth = "none"`.
    pub fn local() -> Self {
        User {
            name: LOCAL_USER.into(),
            is_admin: true,
        }
    }
}

impl FromRequestParts<AppState> for User {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        authenticate(state, &parts.method, &parts.headers).await
    }
}

/// Who sent a request with these headers, by the server's methods.
pub(super) async fn authenticate(
    state: &AppState,
    method: &Method,
    headers: &HeaderMap,
) -> Result<User, ApiError> {
    authenticate_how(state, method, headers)
        .await
        .map(|(user, _)| user)
}

/// [`authenticate`], and the method that decided (`None` for `auth = "none"`).
pub(super) async fn authenticate_how(
    state: &AppState,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(User, AuthMode), ApiError> {
    match state.auth.as_ref() {
        Auth::None { .. } => {
            // Nobody signs in, so any page the browser shows could write
            // here: a browser names a foreign page's origin, so refuse it.
            // (The `Host` was checked for every request, in `common`.)
            if is_write(method) && headers.contains_key(ORIGIN) && !same_origin(headers) {
                return Err(ApiError::BadOrigin);
            }
            Ok((User::local(), AuthMode::None))
        }
        Auth::Methods(methods) => {
            super::auth_methods::authenticate_methods(state, methods, method, headers).await
        }
    }
}

pub(super) fn token_user(state: &AppState, record: TokenRecord) -> User {
    let is_admin = record.user_is_admin || configured_admin(state, &record.user_name);
    User {
        name: record.user_name,
        is_admin,
    }
}

pub(super) fn configured_admin(state: &AppState, name: &str) -> bool {
    let admins = &state.registry.runtime().config.access.admins;
    admins.iter().any(|admin| admin == name)
}

/// The usable token record of `token`, or 401.
pub(super) async fn token_record(state: &AppState, token: &str) -> Result<TokenRecord, ApiError> {
    if !looks_like_token(token) {
        return Err(ApiError::Unauthorized);
    }
    let hash = hash_token(token);
    let access = state.registry.runtime().access();
    let record = access
        .token_by_hash(&hash)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    let same: bool = record.token_hash.as_bytes().ct_eq(hash.as_bytes()).into();
    if same && record.is_usable(chrono::Utc::now()) {
        Ok(record)
    } else {
        Err(ApiError::Unauthorized)
    }
}

/// The value of the [`SESSION_COOKIE`], if the request has one.
pub(super) fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    cookie_value(headers, SESSION_COOKIE)
}

/// The value of the cookie `name`, if the request has one.
pub(super) fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim())
}

/// Methods that change something (forgery matters for these only: a
/// `SameSite=Strict` cookie is never sent with another site's reads, and
/// their answers are not readable cross-origin anyway).
pub(super) fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Whether the `Origin` header names the host the request was sent to (its
/// `Host` header; default ports ignored). A missing `Origin` is not.
pub(super) fn same_origin(headers: &HeaderMap) -> bool {
    let origin = headers.get(ORIGIN).and_then(|v| v.to_str().ok());
    let host = headers.get(HOST).and_then(|v| v.to_str().ok());
    match (origin, host) {
        (Some(origin), Some(host)) => origin_matches_host(origin, host),
        _ => false,
    }
}

pub(super) fn origin_matches_host(origin: &str, host: &str) -> bool {
    let Some((scheme, authority)) = origin.trim().split_once("://") else {
        return false; // `null`, or not an origin at all
    };
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => ":80",
        "https" => ":443",
        _ => return false,
    };
    if authority.is_empty() || authority.contains(['/', '?', '#', '@']) {
        return false;
    }
    let host = host.trim();
    let strip = |s: &'_ str| -> String {
        s.strip_suffix(default_port)
            .unwrap_or(s)
            .to_ascii_lowercase()
    };
    strip(authority) == strip(host)
}

/// Whether the browser reached the server over HTTPS (through a proxy that
/// says so, or by the page's own origin): the cookie is then `Secure`.
pub(super) fn over_https(headers: &HeaderMap) -> bool {
    let forwarded = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"));
    let origin = headers
        .get(ORIGIN)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|origin| origin.to_ascii_lowercase().starts_with("https://"));
    forwarded || origin
}

pub(super) fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

pub(super) fn looks_like_token(token: &str) -> bool {
    token.len() == TOKEN_PREFIX.len() + TOKEN_BYTES * 2
        && token.starts_with(TOKEN_PREFIX)
        && token[TOKEN_PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
}

/// User names: 1–64 characters, letters, digits and `.-_@+`.
pub fn valid_user_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= 64
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || ".-_@+".contains(c))
}

/// A new token: `(token, sha256 hex, display prefix)`. The token itself is
/// shown once and never stored.
pub fn new_token() -> (String, String, String) {
    let bytes: [u8; TOKEN_BYTES] = rand::random();
    let token = format!("{TOKEN_PREFIX}{}", hex(&bytes));
    let hash = hash_token(&token);
    let prefix = token[..TOKEN_PREFIX.len() + 8].to_string();
    (token, hash, prefix)
}

pub fn hash_token(token: &str) -> String {
    hex(&sha256(token.as_bytes()))
}

pub(super) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::net::SocketAddr;

    use super::*;

    #[test]
    fn tokens_are_random_hex_with_a_prefix_and_hash() {
        let (a, hash, prefix) = new_token();
        let (b, _, _) = new_token();
        assert_ne!(a, b);
        assert!(looks_like_token(&a), "{a}");
        assert!(a.starts_with(&prefix));
        assert_eq!(hash, hash_token(&a));
        assert_eq!(hash.len(), 64);
        assert!(!looks_like_token("agentd_short"));
        assert!(!looks_like_token(&a.replace("agentd_", "agentx_")));
    }

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
    }

    #[test]
    fn none_is_refused_off_loopback_and_header_needs_a_secret() {
        use crate::config::{AuthMethods, ServerConfig};
        let server = ServerConfig::default();
        let public: SocketAddr = "0.0.0.0:7878".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:7878".parse().unwrap();
        let none = AuthMethods::single(AuthMode::None);
        let header = AuthMethods::single(AuthMode::Header);
        let no_env = |_: &str| None;
        let err = Auth::from_config(&server, &none, &no_env, public).unwrap_err();
        assert!(err.to_string().contains("loopback"), "{err}");
        assert!(Auth::from_config(&server, &none, &no_env, local).is_ok());
        let err = Auth::from_config(&server, &header, &no_env, public).unwrap_err();
        assert!(err.to_string().contains("secret"), "{err}");
        let secret = |_: &str| Some("0123456789abcdef".to_string());
        assert!(Auth::from_config(&server, &header, &secret, public).is_ok());
        let jwt = AuthMethods::new(vec![AuthMode::Token, AuthMode::Jwt]).unwrap();
        let err = Auth::from_config(&server, &jwt, &no_env, public).unwrap_err();
        assert!(err.to_string().contains("[server.jwt]"), "{err}");
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        assert_eq!(session_cookie(&headers), None);
        headers.insert(
            COOKIE,
            "a=1; agentd_session=agentd_abc ; b=2".parse().unwrap(),
        );
        assert_eq!(session_cookie(&headers), Some("agentd_abc"));
        headers.insert(COOKIE, "xagentd_session=no".parse().unwrap());
        assert_eq!(session_cookie(&headers), None);
        headers.append(COOKIE, "agentd_session=two".parse().unwrap());
        assert_eq!(session_cookie(&headers), Some("two"));
    }

    #[test]
    fn origins_must_name_the_host_asked() {
        assert!(origin_matches_host(
            "http://127.0.0.1:7878",
            "127.0.0.1:7878"
        ));
        assert!(origin_matches_host(
            "https://Agentd.example",
            "agentd.example"
        ));
        assert!(origin_matches_host(
            "https://agentd.example",
            "agentd.example:443"
        ));
        assert!(origin_matches_host(
            "http://agentd.example:80",
            "agentd.example"
        ));
        assert!(!origin_matches_host(
            "http://127.0.0.1:7879",
            "127.0.0.1:7878"
        ));
        assert!(!origin_matches_host(
            "http://evil.example",
            "127.0.0.1:7878"
        ));
        assert!(!origin_matches_host(
            "https://agentd.example",
            "agentd.example:80"
        ));
        assert!(!origin_matches_host("null", "127.0.0.1:7878"));
        assert!(!origin_matches_host("file://", "127.0.0.1:7878"));
        assert!(!origin_matches_host(
            "http://a@127.0.0.1:7878",
            "127.0.0.1:7878"
        ));
        assert!(!origin_matches_host(
            "http://127.0.0.1:7878/x",
            "127.0.0.1:7878"
        ));
        assert!(is_write(&Method::POST) && is_write(&Method::DELETE));
        assert!(!is_write(&Method::GET) && !is_write(&Method::HEAD));
    }

    #[test]
    fn https_is_told_by_the_proxy_or_the_origin() {
        let mut headers = HeaderMap::new();
        assert!(!over_https(&headers));
        headers.insert("x-forwarded-proto", "https, http".parse().unwrap());
        assert!(over_https(&headers));
        let mut headers = HeaderMap::new();
        headers.insert(ORIGIN, "https://agentd.example".parse().unwrap());
        assert!(over_https(&headers));
    }

    #[test]
    fn user_names_are_checked() {
        assert!(valid_user_name("alice@example.com"));
        assert!(!valid_user_name(""));
        assert!(!valid_user_name("a b"));
        assert!(!valid_user_name("a\nb"));
    }
}
