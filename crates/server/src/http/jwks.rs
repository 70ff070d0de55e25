//! Checking JWTs signed by an identity provider: its keys (a JWKS, found
//! by OpenID discovery or configured), cached; a token naming an unknown
//! `kid` refetches them (at most every `min_refetch`) so rotated keys work
//! and removed keys stop working. Crypto is `jsonwebtoken`'s.

use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::sync::Mutex;

use crate::config::JwtAlgorithm;

/// Keys older than this are refetched at the next token, whatever its `kid`.
const MAX_KEY_AGE: Duration = Duration::from_secs(300);
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct JwtError(pub String);

fn err(message: impl Into<String>) -> JwtError {
    JwtError(message.into())
}

/// The parts of a provider's `/.well-known/openid-configuration` used here.
#[derive(Debug, Clone, Deserialize)]
pub struct Discovery {
    pub issuer: String,
    pub jwks_uri: String,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: Option<String>,
}

/// The provider's discovery document; its `issuer` must be the one asked.
pub async fn discover(client: &reqwest::Client, issuer: &str) -> Result<Discovery, JwtError> {
    let url = format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    );
    let doc: Discovery = get_json(client, &url).await?;
    if doc.issuer.trim_end_matches('/') != issuer.trim_end_matches('/') {
        return Err(err(format!(
            "{url} names the issuer {:?}, not {issuer:?}",
            doc.issuer
        )));
    }
    Ok(doc)
}

async fn get_json<T: serde::de::DeserializeOwned>(
    client: &reqwest::Client,
    url: &str,
) -> Result<T, JwtError> {
    let response = client
        .get(url)
        .timeout(FETCH_TIMEOUT)
        .send()
        .await
        .map_err(|e| err(format!("cannot fetch {url}: {e}")))?;
    if !response.status().is_success() {
        return Err(err(format!("{url} answered {}", response.status())));
    }
    response
        .json()
        .await
        .map_err(|e| err(format!("{url} is not the JSON expected: {e}")))
}

/// What a token must be: who signed it, for whom, with which algorithms.
#[derive(Debug, Clone)]
pub struct Expected {
    pub issuer: String,
    pub audience: String,
    pub leeway_s: u64,
    pub algorithms: Vec<JwtAlgorithm>,
}

/// A provider's keys and the checks of its tokens.
pub struct Verifier {
    expected: Expected,
    /// The JWKS URL, configured or discovered (at the first token).
    jwks_url: Mutex<Option<String>>,
    client: reqwest::Client,
    keys: Mutex<KeyCache>,
    min_refetch: Duration,
}

#[derive(Default)]
struct KeyCache {
    keys: Vec<Jwk>,
    fetched_at: Option<Instant>,
}

fn algorithm(alg: JwtAlgorithm) -> Algorithm {
    match alg {
        JwtAlgorithm::RS256 => Algorithm::RS256,
        JwtAlgorithm::ES256 => Algorithm::ES256,
        JwtAlgorithm::EdDSA => Algorithm::EdDSA,
    }
}

impl Verifier {
    pub fn new(expected: Expected, jwks_url: Option<String>, min_refetch: Duration) -> Self {
        Verifier {
            expected,
            jwks_url: Mutex::new(jwks_url),
            client: reqwest::Client::new(),
            keys: Mutex::new(KeyCache::default()),
            min_refetch,
        }
    }

    /// The claims of `token` if it is signed by one of the provider's keys
    /// with an allowed algorithm, from the issuer, for the audience, and
    /// within `exp`/`nbf` (give or take the leeway).
    pub async fn verify(&self, token: &str) -> Result<Map<String, Value>, JwtError> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| err(format!("not a JWT: {e}")))?;
        let allowed = self.expected.algorithms.iter().copied().map(algorithm);
        if !allowed.clone().any(|a| a == header.alg) {
            return Err(err(format!("algorithm {:?} is not allowed", header.alg)));
        }
        let jwk = self.key(header.kid.as_deref(), header.alg).await?;
        let key = DecodingKey::from_jwk(&jwk).map_err(|e| err(format!("unusable key: {e}")))?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.expected.leeway_s;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.expected.issuer]);
        validation.set_audience(&[&self.expected.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|e| err(format!("refused: {e}")))?;
        Ok(data.claims)
    }

    /// The key `kid` names (or the only key for `alg` when there is no
    /// `kid`), refetching the JWKS once if it is not known.
    async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<Jwk, JwtError> {
        let mut cache = self.keys.lock().await;
        let stale = cache.fetched_at.is_none_or(|at| at.elapsed() > MAX_KEY_AGE);
        if stale {
            cache.keys = self.fetch().await?;
            cache.fetched_at = Some(Instant::now());
        }
        if let Some(key) = pick(&cache.keys, kid, alg) {
            return Ok(key);
        }
        let may_refetch = cache
            .fetched_at
            .is_none_or(|at| at.elapsed() >= self.min_refetch);
        if !stale && may_refetch {
            cache.keys = self.fetch().await?;
            cache.fetched_at = Some(Instant::now());
            if let Some(key) = pick(&cache.keys, kid, alg) {
                return Ok(key);
            }
        }
        Err(err(format!(
            "no key {kid:?} for {alg:?} in the provider's JWKS"
        )))
    }

    async fn fetch(&self) -> Result<Vec<Jwk>, JwtError> {
        let url = {
            let mut url = self.jwks_url.lock().await;
            match url.as_ref() {
                Some(url) => url.clone(),
                None => {
                    let found = discover(&self.client, &self.expected.issuer)
                        .await?
                        .jwks_uri;
                    *url = Some(found.clone());
                    found
                }
            }
        };
        let set: Value = get_json(&self.client, &url).await?;
        let keys = set["keys"]
            .as_array()
            .ok_or_else(|| err(format!("{url} has no \"keys\"")))?;
        // A key of a kind this server cannot use is skipped, not fatal.
        Ok(keys
            .iter()
            .filter_map(|key| serde_json::from_value::<Jwk>(key.clone()).ok())
            .filter(|key| !matches!(key.algorithm, AlgorithmParameters::OctetKey(_)))
            .collect())
    }
}

fn fits(key: &Jwk, alg: Algorithm) -> bool {
    let family = match &key.algorithm {
        AlgorithmParameters::RSA(_) => alg == Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(_) => alg == Algorithm::ES256,
        AlgorithmParameters::OctetKeyPair(_) => alg == Algorithm::EdDSA,
        _ => false, // symmetric (never accepted) and kinds this version added
    };
    // A key that names its algorithm is used for that one only.
    let named = key
        .common
        .key_algorithm
        .is_none_or(|named| format!("{named:?}") == format!("{alg:?}"));
    family && named
}

fn pick(keys: &[Jwk], kid: Option<&str>, alg: Algorithm) -> Option<Jwk> {
    match kid {
        Some(kid) => keys
            .iter()
            .find(|key| key.common.key_id.as_deref() == Some(kid) && fits(key, alg))
            .cloned(),
        None => {
            let mut usable = keys.iter().filter(|key| fits(key, alg));
            match (usable.next(), usable.next()) {
                (Some(key), None) => Some(key.clone()),
                _ => None,
            }
        }
    }
}
