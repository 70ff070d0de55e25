//! "Sign in with …": the web UI signs in at an OpenID Connect provider
//! (`[server.oidc]`) by the authorization code flow with PKCE (S256).
//! `state`, `nonce` and the PKCE verifier wait in a short-lived `HttpOnly`
//! cookie of their own between the two routes; the id_token is checked as
//! `jwks` checks JWTs (audience: the client id) plus its `nonce`. The end is
//! the same token cookie `POST /v1/auth/login` sets.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::Mutex;

use super::error::ApiError;
use super::jwks::{Discovery, Expected, JwtError, Verifier, discover};
use crate::config::OidcToml;

/// The cookie holding a sign-in under way.
pub const FLOW_COOKIE: &str = "agentd_oidc";
/// How long the browser has at the provider (seconds).
pub const FLOW_MAX_AGE_S: i64 = 600;
pub const CALLBACK_PATH: &str = "/v1/auth/oidc/callback";

pub struct Oidc {
    pub config: OidcToml,
    client_secret: Option<String>,
    client: reqwest::Client,
    discovery: Mutex<Option<Discovery>>,
    verifier: Verifier,
}

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

    pub fn to_cookie(&self) -> String {
        let next = URL_SAFE_NO_PAD.encode(&self.next);
        format!("{}.{}.{}.{next}", self.state, self.nonce, self.verifier)
    }

    pub fn from_cookie(value: &str) -> Option<Self> {
        let mut parts = value.split('.');
        let (state, nonce, verifier, next) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
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

/// Who signed in: the user claim, and the groups claim.
#[derive(Debug)]
pub struct Identity {
    pub name: String,
    pub groups: Vec<String>,
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
        Oidc {
            client_secret: env_secret.or_else(|| config.client_secret.clone()),
            config,
            client: reqwest::Client::new(),
            discovery: Mutex::new(None),
            verifier,
        }
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

    async fn discovery(&self) -> Result<Discovery, ApiError> {
        let mut cached = self.discovery.lock().await;
        if let Some(doc) = cached.as_ref() {
            return Ok(doc.clone());
        }
        let doc = discover(&self.client, &self.config.issuer)
            .await
            .map_err(provider_down)?;
        *cached = Some(doc.clone());
        Ok(doc)
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
        let body: Value = response.json().await.unwrap_or_default();
        if !status.is_success() {
            return Err(ApiError::Forbidden(format!(
                "the identity provider refused the sign-in ({status}): {}",
                body["error"].as_str().unwrap_or("no reason given")
            )));
        }
        let id_token = body["id_token"]
            .as_str()
            .ok_or_else(|| ApiError::Forbidden("the identity provider sent no id_token".into()))?;
        let claims = self.verifier.verify(id_token).await.map_err(|err| {
            tracing::info!(%err, "an id_token was refused");
            ApiError::Forbidden(format!("the id_token was refused: {err}"))
        })?;
        let nonce = claims.get("nonce").and_then(Value::as_str).unwrap_or("");
        if !bool::from(nonce.as_bytes().ct_eq(flow.nonce.as_bytes())) {
            return Err(ApiError::Forbidden(
                "the id_token's nonce is not this sign-in's".into(),
            ));
        }
        self.identity(&claims)
    }

    fn identity(&self, claims: &Map<String, Value>) -> Result<Identity, ApiError> {
        let claim = &self.config.user_claim;
        let name = claims
            .get(claim)
            .and_then(Value::as_str)
            .filter(|name| super::auth::valid_user_name(name))
            .ok_or_else(|| {
                ApiError::Forbidden(format!(
                    "the id_token's {claim:?} claim is not a user name (1-64 letters, digits \
                     and . - _ @ +)"
                ))
            })?;
        let groups = match claims.get(&self.config.groups_claim) {
            Some(Value::Array(groups)) => groups
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
            Some(Value::String(group)) => vec![group.clone()],
            _ => Vec::new(),
        };
        Ok(Identity {
            name: name.to_string(),
            groups,
        })
    }
}

fn provider_down(err: JwtError) -> ApiError {
    tracing::warn!(%err, "the OIDC provider cannot be used");
    ApiError::Internal(format!("the identity provider cannot be reached: {err}"))
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
    fn the_flow_survives_its_cookie() {
        let flow = Flow::start(Some("/ui/x"));
        let back = Flow::from_cookie(&flow.to_cookie()).unwrap();
        assert_eq!(back, flow);
        assert!(back.state_matches(&flow.state));
        assert!(!back.state_matches("other"));
        assert!(Flow::from_cookie("a.b").is_none());
        // base64url(sha256(verifier)), as Python's hashlib computes it.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mJ92K9qZ2fwRzYnmzEJ8gPlMpLy5iEY"),
            "hVRVeXTq9p-L2wvnDRLASI7nVn7dMqjunyUcnZTBa2M"
        );
    }
}
