//! "Sign in with …": the web UI signs in at an OpenID Connect provider
//! (`[server.oidc]`) by the authorization code flow with PKCE (S256).
//! `state`, `nonce` and the PKCE verifier wait in a short-lived `HttpOnly`
//! cookie of their own between the two routes, signed (HMAC-SHA256) so
//! that nobody able to set cookies for this site can plant a flow of
//! theirs. The id_token is checked as `jwks` checks JWTs (audience: the
//! client id; `azp` when there are several) plus its `nonce`, required. The
//! end is the same token cookie `POST /v1/auth/login` sets.
//!
//! What goes wrong at the provider is logged; the browser is told only
//! that the sign-in failed.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::Mutex;

use super::accounts::{Account, email_verified};
use super::error::ApiError;
use super::jwks::{Discovery, Expected, JwtError, Verifier, discover, read_json};
use crate::config::OidcToml;

/// The cookie holding a sign-in under way.
pub const FLOW_COOKIE: &str = "agentd_oidc";
/// How long the browser has at the provider (seconds).
pub const FLOW_MAX_AGE_S: i64 = 600;
pub const CALLBACK_PATH: &str = "/v1/auth/oidc/callback";
/// The length of 32 random bytes in base64url: `state`, `nonce` and the
/// PKCE verifier are all that long (RFC 7636 asks at least 43).
const RANDOM_LEN: usize = 43;
/// A failed discovery is not retried sooner than this.
const DISCOVERY_RETRY: Duration = Duration::from_secs(5);

pub struct Oidc {
    pub config: OidcToml,
    client_secret: Option<String>,
    client: reqwest::Client,
    discovery: Mutex<DiscoveryCache>,
    verifier: Verifier,
    /// Signs the flow cookie.
    flow_key: [u8; 32],
}

#[derive(Default)]
struct DiscoveryCache {
    doc: Option<Discovery>,
    fetched_at: Option<std::time::Instant>,
    failed_at: Option<std::time::Instant>,
}

/// Discovery documents are fetched again after this long.
const DISCOVERY_MAX_AGE: Duration = Duration::from_secs(3600);

/// A sign-in under way, as kept in [`FLOW_COOKIE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    pub state: String,
    pub nonce: String,
    pub verifier: String,
    /// Where the browser goes once signed in: a path on this server.
    pub next: String,
}

fn random() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

/// The PKCE S256 challenge of `verifier`.
pub fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// `next` if it is a path on this server, else `/`: no open redirect
/// (`//host` and `/\host` are other hosts to a browser).
pub fn local_path(next: Option<&str>) -> String {
    match next {
        Some(path)
            if path.starts_with('/')
                && !path.starts_with("//")
                && !path.starts_with("/\\")
                && path.len() <= 512
                && path.chars().all(|c| c.is_ascii_graphic()) =>
        {
            path.to_string()
        }
        _ => "/".into(),
    }
}

impl Flow {
    pub fn start(next: Option<&str>) -> Self {
        Flow {
            state: random(),
            nonce: random(),
            verifier: random(),
            next: local_path(next),
        }
    }

    /// The cookie's value: the parts and their HMAC under `key`.
    pub fn to_cookie(&self, key: &[u8]) -> String {
        let next = URL_SAFE_NO_PAD.encode(&self.next);
        let body = format!("{}.{}.{}.{next}", self.state, self.nonce, self.verifier);
        let tag = URL_SAFE_NO_PAD.encode(mac(key, &body).finalize().into_bytes());
        format!("{body}.{tag}")
    }

    /// The flow of a cookie this server signed with `key`, else `None`.
    pub fn from_cookie(value: &str, key: &[u8]) -> Option<Self> {
        let (body, tag) = value.rsplit_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        mac(key, body).verify_slice(&tag).ok()?;
        let mut parts = body.split('.');
        let (state, nonce, verifier, next) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some()
            || [state, nonce, verifier]
                .iter()
                .any(|p| p.len() < RANDOM_LEN)
        {
            return None;
        }
        let next = String::from_utf8(URL_SAFE_NO_PAD.decode(next).ok()?).ok()?;
        Some(Flow {
            state: state.into(),
            nonce: nonce.into(),
            verifier: verifier.into(),
            next: local_path(Some(&next)),
        })
    }

    /// Whether the provider sent back this flow's `state`.
    pub fn state_matches(&self, state: &str) -> bool {
        self.state.as_bytes().ct_eq(state.as_bytes()).into()
    }
}

fn mac(key: &[u8], body: &str) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(body.as_bytes());
    mac
}

/// Who signed in: the account, its groups, its email if verified.
#[derive(Debug)]
pub struct Identity {
    pub account: Account,
    pub groups: Vec<String>,
    pub verified_email: Option<String>,
}

impl Oidc {
    pub fn new(config: OidcToml, env_secret: Option<String>) -> Self {
        let verifier = Verifier::new(
            Expected {
                issuer: config.issuer.clone(),
                audience: config.client_id.clone(),
                leeway_s: config.leeway_s,
                algorithms: config.algorithms.clone(),
            },
            None,
            Duration::from_secs(10),
        );
        let client_secret = env_secret.or_else(|| config.client_secret.clone());
        // Every node of a cluster shares the client secret, so a flow
        // started on one finishes on another; without one, this process's.
        let flow_key = match &client_secret {
            Some(secret) => Sha256::new()
                .chain_update(b"agentd oidc flow cookie\0")
                .chain_update(secret.as_bytes())
                .finalize()
                .into(),
            None => rand::random(),
        };
        Oidc {
            client_secret,
            config,
            client: super::jwks::http_client(),
            discovery: Mutex::new(DiscoveryCache::default()),
            verifier,
            flow_key,
        }
    }

    /// The key the flow cookie is signed with.
    pub fn flow_key(&self) -> &[u8] {
        &self.flow_key
    }

    /// The button's "Sign in with <name>".
    pub fn display_name(&self) -> String {
        self.config.name.clone().unwrap_or_else(|| {
            url::Url::parse(&self.config.issuer)
                .ok()
                .and_then(|url| url.host_str().map(String::from))
                .unwrap_or_else(|| self.config.issuer.clone())
        })
    }

    /// The provider's discovery document: cached for an hour, the old one
    /// kept while the provider fails, and failures not retried for a few
    /// seconds (the login route needs no credentials). Fetched with the
    /// lock held: one fetch at a time, the others wait for its result.
    async fn discovery(&self) -> Result<Discovery, ApiError> {
        let mut cache = self.discovery.lock().await;
        let fresh = cache
            .fetched_at
            .is_some_and(|at| at.elapsed() < DISCOVERY_MAX_AGE);
        let backing_off = cache
            .failed_at
            .is_some_and(|at| at.elapsed() < DISCOVERY_RETRY);
        if let Some(doc) = &cache.doc
            && (fresh || backing_off)
        {
            return Ok(doc.clone());
        }
        if backing_off {
            return Err(provider_down(JwtError(
                "discovery failed moments ago".into(),
            )));
        }
        match discover(&self.client, &self.config.issuer).await {
            Ok(doc) => {
                cache.doc = Some(doc.clone());
                cache.fetched_at = Some(std::time::Instant::now());
                cache.failed_at = None;
                Ok(doc)
            }
            Err(err) => {
                cache.failed_at = Some(std::time::Instant::now());
                match &cache.doc {
                    Some(old) => {
                        tracing::warn!(%err, "OIDC discovery failed; using the last document");
                        Ok(old.clone())
                    }
                    None => Err(provider_down(err)),
                }
            }
        }
    }

    /// Where to send the browser to start `flow`.
    pub async fn authorize_url(&self, flow: &Flow, redirect_uri: &str) -> Result<String, ApiError> {
        let endpoint = self
            .discovery()
            .await?
            .authorization_endpoint
            .ok_or_else(|| {
                provider_down(JwtError(
                    "the provider names no authorization_endpoint".into(),
                ))
            })?;
        let mut url = url::Url::parse(&endpoint)
            .map_err(|e| provider_down(JwtError(format!("authorization_endpoint: {e}"))))?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.config.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("scope", &self.config.scopes.join(" "))
            .append_pair("state", &flow.state)
            .append_pair("nonce", &flow.nonce)
            .append_pair("code_challenge", &challenge(&flow.verifier))
            .append_pair("code_challenge_method", "S256");
        Ok(url.into())
    }

    /// Trade `code` for an id_token and check it (signature, issuer,
    /// audience, expiry, nonce); who it names.
    pub async fn finish(
        &self,
        flow: &Flow,
        code: &str,
        redirect_uri: &str,
    ) -> Result<Identity, ApiError> {
        let endpoint = self.discovery().await?.token_endpoint.ok_or_else(|| {
            provider_down(JwtError("the provider names no token_endpoint".into()))
        })?;
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("client_id", &self.config.client_id),
            ("code_verifier", &flow.verifier),
        ];
        let mut request = self
            .client
            .post(&endpoint)
            .timeout(Duration::from_secs(10))
            .form(&form);
        if let Some(secret) = &self.client_secret {
            request = request.basic_auth(&self.config.client_id, Some(secret));
        }
        let response = request
            .send()
            .await
            .map_err(|e| provider_down(JwtError(format!("{endpoint}: {e}"))))?;
        let status = response.status();
        let body: Value = read_json(response, &endpoint).await.unwrap_or_default();
        if !status.is_success() {
            let reason = body["error"].as_str().unwrap_or("no reason given");
            return Err(refused(&format!(
                "the token endpoint answered {status}: {reason}"
            )));
        }
        let id_token = body["id_token"]
            .as_str()
            .ok_or_else(|| refused("the token endpoint sent no id_token"))?;
        let claims = self
            .verifier
            .verify(id_token)
            .await
            .map_err(|err| refused(&format!("the id_token: {err}")))?;
        // Several audiences: the one this was issued to must be us.
        if claims
            .get("aud")
            .and_then(Value::as_array)
            .is_some_and(|aud| aud.len() > 1)
            && claims.get("azp").and_then(Value::as_str) != Some(self.config.client_id.as_str())
        {
            return Err(refused(
                "the id_token has several audiences and azp is not ours",
            ));
        }
        let Some(nonce) = claims.get("nonce").and_then(Value::as_str) else {
            return Err(refused("the id_token has no nonce"));
        };
        if !bool::from(nonce.as_bytes().ct_eq(flow.nonce.as_bytes())) {
            return Err(refused("the id_token's nonce is not this sign-in's"));
        }
        self.identity(&claims)
    }

    fn identity(&self, claims: &Map<String, Value>) -> Result<Identity, ApiError> {
        let account = Account::from_claims(&self.config.issuer, claims, &self.config.user_claim)
            .map_err(|err| refused(&err))?;
        let groups = match claims.get(&self.config.groups_claim) {
            Some(Value::Array(groups)) => groups
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
            Some(Value::String(group)) => vec![group.clone()],
            _ => Vec::new(),
        };
        let verified_email = claims
            .get("email")
            .and_then(Value::as_str)
            .filter(|_| email_verified(claims))
            .map(String::from);
        Ok(Identity {
            account,
            groups,
            verified_email,
        })
    }
}

/// The browser is told the provider cannot be used; the log says why.
fn provider_down(err: JwtError) -> ApiError {
    tracing::warn!(%err, "the OIDC provider cannot be used");
    ApiError::Internal("the identity provider cannot be reached (the server log says why)".into())
}

/// The browser is told the sign-in was refused; the log says why.
fn refused(why: &str) -> ApiError {
    tracing::warn!(why, "an OIDC sign-in was refused");
    ApiError::Forbidden(
        "the identity provider's answer was refused (the server log says why)".into(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn next_stays_on_this_server() {
        assert_eq!(local_path(Some("/ui/sessions?x=1")), "/ui/sessions?x=1");
        for bad in [
            "//evil.example",
            "/\\evil.example",
            "https://evil.example",
            "x",
            "/a b",
        ] {
            assert_eq!(local_path(Some(bad)), "/", "{bad}");
        }
        assert_eq!(local_path(None), "/");
    }

    #[test]
    fn the_flow_survives_its_cookie_and_only_a_signed_one_is_taken() {
        let key = [7u8; 32];
        let flow = Flow::start(Some("/ui/x"));
        let back = Flow::from_cookie(&flow.to_cookie(&key), &key).unwrap();
        assert_eq!(back, flow);
        assert!(back.state_matches(&flow.state));
        assert!(!back.state_matches("other"));
        assert!(Flow::from_cookie("a.b", &key).is_none());
        // Another key's cookie, an edited one, an unsigned one: refused.
        assert!(Flow::from_cookie(&flow.to_cookie(&[8u8; 32]), &key).is_none());
        let cookie = flow.to_cookie(&key);
        let edited = cookie.replacen(&flow.state, &"A".repeat(43), 1);
        assert!(Flow::from_cookie(&edited, &key).is_none());
        let unsigned = cookie.rsplit_once('.').unwrap().0;
        assert!(Flow::from_cookie(unsigned, &key).is_none());
        // Empty or short parts, even signed: refused.
        let empty = Flow {
            state: String::new(),
            nonce: String::new(),
            verifier: String::new(),
            next: "/".into(),
        };
        assert!(Flow::from_cookie(&empty.to_cookie(&key), &key).is_none());
        // base64url(sha256(verifier)), as Python's hashlib computes it.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mJ92K9qZ2fwRzYnmzEJ8gPlMpLy5iEY"),
            "hVRVeXTq9p-L2wvnDRLASI7nVn7dMqjunyUcnZTBa2M"
        );
    }
}
