//! Checking JWTs signed by an identity provider: its keys (a JWKS, found
//! by OpenID discovery or configured), cached; a token naming an unknown
//! `kid` refetches them so rotated keys work and removed keys stop working.
//! Crypto is `jsonwebtoken`'s.
//!
//! The provider being slow or down must not stop the API: one fetch runs at
//! a time (the others use the keys at hand, or wait for its result when
//! they have none), no fetch starts sooner than `min_refetch` after the last
//! attempt (longer after failures), and a failed fetch keeps the old keys.

use std::sync::{Arc, Mutex as StdMutex, MutexGuard};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::sync::Mutex;

use crate::config::JwtAlgorithm;

/// Keys older than this are refetched at the next token, whatever its `kid`.
const MAX_KEY_AGE: Duration = Duration::from_secs(300);
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest wait between attempts while the provider keeps failing.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// The most of a provider's answer read (discovery, JWKS, token endpoint).
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The HTTP client for providers: no redirects (an https URL must not
/// lead to an http one, nor anywhere else).
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

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
    read_json(response, url).await
}

/// `https`, or `http` to this machine only (as the config's URLs).
pub fn secure_url(url: &str) -> bool {
    match url::Url::parse(url) {
        Ok(url) if url.scheme() == "https" => true,
        Ok(url) if url.scheme() == "http" => match url.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            None => false,
        },
        _ => false,
    }
}

/// The JSON body of `response`, read up to [`MAX_BODY_BYTES`].
pub async fn read_json<T: serde::de::DeserializeOwned>(
    mut response: reqwest::Response,
    url: &str,
) -> Result<T, JwtError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| err(format!("reading {url}: {e}")))?
    {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(err(format!(
                "{url} answered more than {MAX_BODY_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| err(format!("{url} is not the JSON expected: {e}")))
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
    /// The JWKS URL, configured or discovered (at the first fetch).
    jwks_url: Mutex<Option<String>>,
    client: reqwest::Client,
    /// Held briefly, never across a fetch.
    keys: StdMutex<KeyCache>,
    /// Held across a fetch: one at a time.
    fetching: Mutex<()>,
    min_refetch: Duration,
}

#[derive(Default)]
struct KeyCache {
    keys: Arc<Vec<Jwk>>,
    fetched_at: Option<Instant>,
    /// The last fetch started (success or not): the next waits its turn.
    attempted_at: Option<Instant>,
    /// Failures in a row, for the backoff.
    failures: u32,
}

impl KeyCache {
    /// Whether a fetch may start now.
    fn may_fetch(&self, min_refetch: Duration) -> bool {
        let wait = min_refetch
            .saturating_mul(1 << self.failures.min(10))
            .min(MAX_BACKOFF.max(min_refetch));
        self.attempted_at.is_none_or(|at| at.elapsed() >= wait)
    }

    fn stale(&self) -> bool {
        self.fetched_at.is_none_or(|at| at.elapsed() > MAX_KEY_AGE)
    }
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
            client: http_client(),
            keys: StdMutex::new(KeyCache::default()),
            fetching: Mutex::new(()),
            min_refetch: min_refetch.max(Duration::from_secs(1)),
        }
    }

    fn cache(&self) -> MutexGuard<'_, KeyCache> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
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
    /// `kid`): from the cache, or after a fetch when the keys are stale or
    /// do not have it and a fetch is due.
    async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<Jwk, JwtError> {
        let (known, stale, attempted_at) = {
            let cache = self.cache();
            (
                pick(&cache.keys, kid, alg),
                cache.stale(),
                cache.attempted_at,
            )
        };
        if let Some(key) = &known
            && !stale
        {
            return Ok(key.clone());
        }
        // A stale key is served while another request refreshes.
        let fetching = match &known {
            Some(key) => match self.fetching.try_lock() {
                Ok(guard) => guard,
                Err(_) => return Ok(key.clone()),
            },
            None => self.fetching.lock().await,
        };
        let due = {
            let mut cache = self.cache();
            // Another request fetched while this one waited: its result.
            let fetched_meanwhile = cache.attempted_at != attempted_at;
            let due = !fetched_meanwhile && cache.may_fetch(self.min_refetch);
            if due {
                cache.attempted_at = Some(Instant::now());
            }
            due
        };
        if due {
            let result = self.fetch().await;
            let mut cache = self.cache();
            match result {
                Ok(keys) => {
                    cache.keys = Arc::new(keys);
                    cache.fetched_at = Some(Instant::now());
                    cache.failures = 0;
                }
                Err(error) => {
                    cache.failures = cache.failures.saturating_add(1);
                    tracing::warn!(%error, failures = cache.failures,
                        "fetching the provider's keys failed; the old ones stay");
                }
            }
        }
        drop(fetching);
        let keys = self.cache().keys.clone();
        pick(&keys, kid, alg)
            .ok_or_else(|| err(format!("no key {kid:?} for {alg:?} in the provider's JWKS")))
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
                    if !secure_url(&found) {
                        return Err(err(format!(
                            "the provider's jwks_uri {found:?} is not https"
                        )));
                    }
                    *url = Some(found.clone());
                    found
                }
            }
        };
        let set: Value = get_json(&self.client, &url).await?;
        let keys = set["keys"]
            .as_array()
            .ok_or_else(|| err(format!("{url} has no \"keys\"")))?;
        // A key of a kind this server cannot use is skipped, not fatal; so
        // is a key published for encryption.
        Ok(keys
            .iter()
            .filter_map(|key| serde_json::from_value::<Jwk>(key.clone()).ok())
            .filter(|key| !matches!(key.algorithm, AlgorithmParameters::OctetKey(_)))
            .filter(|key| {
                key.common
                    .public_key_use
                    .as_ref()
                    .is_none_or(|u| *u == PublicKeyUse::Signature)
            })
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
