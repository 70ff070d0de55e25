//! Who is asking. Three modes (`[server] auth`):
//! - `token`: `Authorization: Bearer agentd_…`; the store keeps only the
//!   token's SHA-256, looked up by hash and compared in constant time.
//! - `header`: a trusted proxy names the user in a header and proves itself
//!   with a shared secret header (compared in constant time).
//! - `none`: everyone is [`LOCAL_USER`], the owner `agentd run` uses; only
//!   allowed on a loopback address.
//!
//! Every failure is the same bare 401.

use std::net::SocketAddr;

use axum::extract::FromRequestParts;
use axum::http::header::{AUTHORIZATION, HeaderName};
use axum::http::request::Parts;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::AppState;
use super::error::ApiError;
use crate::config::{AuthMode, ServerConfig};

/// The owner of sessions made without authentication (and by `agentd run`).
pub const LOCAL_USER: &str = "local";
/// Where a trusted proxy puts the shared secret in `header` mode.
pub const PROXY_SECRET_HEADER: &str = "x-agentd-proxy-secret";
const TOKEN_PREFIX: &str = "agentd_";
/// Random bytes in a token (hex encoded after the prefix).
const TOKEN_BYTES: usize = 32;
const DEFAULT_USER_HEADER: &str = "x-forwarded-user";
const MIN_SECRET_LEN: usize = 16;

#[derive(Debug, Clone)]
pub enum Auth {
    None,
    Token,
    Header {
        user_header: HeaderName,
        secret_hash: [u8; 32],
    },
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AuthConfigError(String);

impl Auth {
    /// Check the configured mode against the address being bound.
    /// `header_secret` overrides `[server] header_secret` (from the environment).
    pub fn from_config(
        server: &ServerConfig,
        mode: AuthMode,
        header_secret: Option<String>,
        bind: SocketAddr,
    ) -> Result<Self, AuthConfigError> {
        match mode {
            AuthMode::None if !bind.ip().is_loopback() => Err(AuthConfigError(format!(
                "auth = \"none\" is only allowed on a loopback address, not {bind}; \
                 use auth = \"token\" (and `agentd tokens create`) or bind 127.0.0.1"
            ))),
            AuthMode::None => Ok(Auth::None),
            AuthMode::Token => Ok(Auth::Token),
            AuthMode::Header => {
                let name = server.header_name.as_deref().unwrap_or(DEFAULT_USER_HEADER);
                let user_header = HeaderName::try_from(name).map_err(|_| {
                    AuthConfigError(format!(
                        "[server] header_name {name:?} is not a header name"
                    ))
                })?;
                let secret = header_secret
                    .or_else(|| server.header_secret.clone())
                    .unwrap_or_default();
                if secret.len() < MIN_SECRET_LEN {
                    return Err(AuthConfigError(format!(
                        "auth = \"header\" needs a shared secret of at least {MIN_SECRET_LEN} \
                         characters in [server] header_secret or AGENTD_HEADER_SECRET; the \
                         proxy sends it as {PROXY_SECRET_HEADER}"
                    )));
                }
                Ok(Auth::Header {
                    user_header,
                    secret_hash: sha256(secret.as_bytes()),
                })
            }
        }
    }
}

/// The authenticated user; sessions are owned by `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
}

impl FromRequestParts<AppState> for User {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match state.auth.as_ref() {
            Auth::None => Ok(User {
                name: LOCAL_USER.into(),
            }),
            Auth::Token => {
                let token = parts
                    .headers
                    .get(AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(bearer)
                    .ok_or(ApiError::Unauthorized)?;
                if !looks_like_token(token) {
                    return Err(ApiError::Unauthorized);
                }
                let hash = hash_token(token);
                let store = &state.registry.runtime().store;
                let record = store
                    .token_by_hash(&hash)
                    .await?
                    .ok_or(ApiError::Unauthorized)?;
                let same: bool = record.token_hash.as_bytes().ct_eq(hash.as_bytes()).into();
                if same && record.is_usable(chrono::Utc::now()) {
                    Ok(User {
                        name: record.user_name,
                    })
                } else {
                    Err(ApiError::Unauthorized)
                }
            }
            Auth::Header {
                user_header,
                secret_hash,
            } => {
                let secret = parts
                    .headers
                    .get(PROXY_SECRET_HEADER)
                    .ok_or(ApiError::Unauthorized)?;
                // Hashing first makes the comparison independent of length.
                let given = sha256(secret.as_bytes());
                if !bool::from(given.ct_eq(secret_hash)) {
                    return Err(ApiError::Unauthorized);
                }
                let name = parts
                    .headers
                    .get(user_header)
                    .and_then(|v| v.to_str().ok())
                    .map(str::trim)
                    .filter(|name| valid_user_name(name))
                    .ok_or(ApiError::Unauthorized)?;
                Ok(User {
                    name: name.to_string(),
                })
            }
        }
    }
}

fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

fn looks_like_token(token: &str) -> bool {
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

fn sha256(bytes: &[u8]) -> [u8; 32] {
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
        let server = ServerConfig::default();
        let public: SocketAddr = "0.0.0.0:7878".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:7878".parse().unwrap();
        let err = Auth::from_config(&server, AuthMode::None, None, public).unwrap_err();
        assert!(err.to_string().contains("loopback"), "{err}");
        assert!(Auth::from_config(&server, AuthMode::None, None, local).is_ok());
        let err = Auth::from_config(&server, AuthMode::Header, None, public).unwrap_err();
        assert!(err.to_string().contains("secret"), "{err}");
        let secret = Some("0123456789abcdef".to_string());
        assert!(Auth::from_config(&server, AuthMode::Header, secret, public).is_ok());
    }

    #[test]
    fn user_names_are_checked() {
        assert!(valid_user_name("alice@example.com"));
        assert!(!valid_user_name(""));
        assert!(!valid_user_name("a b"));
        assert!(!valid_user_name("a\nb"));
    }
}
