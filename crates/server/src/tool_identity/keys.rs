//! The `{user_token}` JWTs: EdDSA (Ed25519) signed, with `iss` (`[identity]
//! issuer`), `aud` (the server's or command's audience), `sub` = the user,
//! `sid` = the session, `jti` (unique), `iat` = `nbf`, `exp` (`[identity]
//! token_ttl_s` later) and the key's `kid` in the header. The keys live in
//! the store, so every node of a cluster signs with the same ones: the
//! first made at startup, a new one [`PUBLISH_LEAD`] before `[identity]
//! key_rotation_days` are up (published before anything is signed with
//! it, so a tool's cached key set knows it), a retired one kept (and
//! published) until every token it signed has expired. Private keys never
//! leave the server.

use std::time::{Duration as StdDuration, Instant};

use agentd_store::{SigningKeyRecord, Store};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Duration, Utc};
use ed25519_dalek::SigningKey;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;
use utoipa::ToSchema;

use super::IdentityError;
use crate::config::IdentityToml;

/// The algorithm of the keys, as stored and in tokens.
const ALGORITHM: &str = "EdDSA";

/// How long a node signs with the key it read before looking again (another
/// node may have rotated).
const RECHECK: StdDuration = StdDuration::from_secs(60);

/// Extra time a retired key stays, past the expiry of its last tokens.
const KEEP_MARGIN: Duration = Duration::hours(1);

/// How long a new key is published before anything is signed with it: more
/// than a key set is cached ([`JWKS_CACHE`], and `Cache-Control` of
/// `GET /v1/identity/jwks`), so a tool that cached the set knows the key.
pub const PUBLISH_LEAD: Duration = Duration::minutes(10);

/// How long a node serves the key set it read.
const JWKS_CACHE: StdDuration = StdDuration::from_secs(60);

/// The key this node signs with, read from the store, and the key set it
/// publishes.
#[derive(Default)]
pub struct ToolKeys {
    current: tokio::sync::Mutex<Option<Current>>,
    published: tokio::sync::Mutex<Option<(Instant, Jwks)>>,
}

struct Current {
    kid: String,
    key: EncodingKey,
    read_at: Instant,
}

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    aud: &'a str,
    sub: &'a str,
    sid: &'a str,
    jti: String,
    iat: i64,
    nbf: i64,
    exp: i64,
}

/// `GET /v1/identity/jwks`: the public keys tokens for tools are signed with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Jwks {
    pub keys: Vec<Jwk>,
}

/// One public key (RFC 8037: an Ed25519 `OKP` key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Jwk {
    /// `OKP`.
    pub kty: String,
    /// `Ed25519`.
    pub crv: String,
    /// The public key, base64url.
    pub x: String,
    /// The `kid` of the tokens it signs.
    pub kid: String,
    /// `EdDSA`.
    pub alg: String,
    /// `sig`.
    #[serde(rename = "use")]
    pub use_: String,
}

impl ToolKeys {
    /// A token for `user`'s session `session_id` for `audience`, and when
    /// it expires.
    pub(crate) async fn mint(
        &self,
        store: &dyn Store,
        config: &IdentityToml,
        user: &str,
        session_id: &str,
        audience: &str,
    ) -> Result<(String, DateTime<Utc>), IdentityError> {
        let (kid, key) = self.signing_key(store, config).await?;
        let now = Utc::now();
        let expires = now + Duration::seconds(ttl_secs(config));
        let claims = Claims {
            iss: &config.issuer,
            aud: audience,
            sub: user,
            sid: session_id,
            jti: uuid::Uuid::new_v4().simple().to_string(),
            iat: now.timestamp(),
            nbf: now.timestamp(),
            exp: expires.timestamp(),
        };
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(kid);
        let token = jsonwebtoken::encode(&header, &claims, &key)
            .map_err(|err| IdentityError::Signing(err.to_string()))?;
        Ok((token, expires))
    }

    /// The public keys of every stored key (those signing, about to and
    /// whose tokens may still be valid), as read at most [`JWKS_CACHE`] ago.
    pub async fn jwks(&self, store: &dyn Store) -> agentd_store::StoreResult<Jwks> {
        let mut published = self.published.lock().await;
        if let Some((read_at, jwks)) = published.as_ref()
            && read_at.elapsed() < JWKS_CACHE
        {
            return Ok(jwks.clone());
        }
        let jwks = Self::stored_jwks(store).await?;
        *published = Some((Instant::now(), jwks.clone()));
        Ok(jwks)
    }

    /// The key set as stored now.
    pub async fn stored_jwks(store: &dyn Store) -> agentd_store::StoreResult<Jwks> {
        let keys = store.signing_keys().await?;
        Ok(Jwks {
            keys: keys
                .into_iter()
                .filter(|key| key.algorithm == ALGORITHM)
                .map(|key| Jwk {
                    kty: "OKP".into(),
                    crv: "Ed25519".into(),
                    x: key.public_key,
                    kid: key.kid,
                    alg: ALGORITHM.into(),
                    use_: "sig".into(),
                })
                .collect(),
        })
    }

    /// Makes sure a key is stored (at startup: the key set is published
    /// before the first token), rotating one that is due.
    pub async fn prepare(
        &self,
        store: &dyn Store,
        config: &IdentityToml,
    ) -> Result<(), IdentityError> {
        self.signing_key(store, config).await.map(drop)
    }

    /// The key to sign with now: the newest stored one published for
    /// [`PUBLISH_LEAD`] (the newest at all when none is: the first key). A
    /// new key is stored [`PUBLISH_LEAD`] before the newest is
    /// `key_rotation_days` old; keys retired long enough are deleted.
    async fn signing_key(
        &self,
        store: &dyn Store,
        config: &IdentityToml,
    ) -> Result<(String, EncodingKey), IdentityError> {
        let mut current = self.current.lock().await;
        if let Some(key) = current.as_ref()
            && key.read_at.elapsed() < RECHECK
        {
            return Ok((key.kid.clone(), key.key.clone()));
        }
        let now = Utc::now();
        let rotation = Duration::days(i64::try_from(config.key_rotation_days).unwrap_or(3650));
        let due = now - (rotation - PUBLISH_LEAD);
        let mut keys = store.signing_keys().await?;
        if keys.first().is_none_or(|newest| newest.created_at <= due) {
            // `false`: another node stored a new key first; that one counts.
            store.add_signing_key(&generate(now), due).await?;
            keys = store.signing_keys().await?;
            self.published.lock().await.take();
        }
        if let Some(cutoff) = retired_before(&keys, now, ttl_secs(config)) {
            store.delete_signing_keys_before(cutoff).await?;
        }
        let record = keys
            .iter()
            .find(|key| now - key.created_at >= PUBLISH_LEAD)
            .or(keys.first())
            .ok_or_else(|| IdentityError::Signing("no signing key was stored".into()))?;
        let key = encoding_key(record)?;
        *current = Some(Current {
            kid: record.kid.clone(),
            key: key.clone(),
            read_at: Instant::now(),
        });
        Ok((record.kid.clone(), key))
    }
}

/// Keys created before the returned time signed nothing still valid: each
/// stopped signing once its successor was published for [`PUBLISH_LEAD`],
/// so a key goes once a NEWER key is older than the lead, a token's
/// validity and [`KEEP_MARGIN`] together. By the successor's age, not its
/// own: a key's age says nothing of when it last signed (a lowered
/// `key_rotation_days`, a node with another setting).
fn retired_before(
    keys: &[SigningKeyRecord],
    now: DateTime<Utc>,
    ttl_secs: i64,
) -> Option<DateTime<Utc>> {
    let safe = now - PUBLISH_LEAD - Duration::seconds(ttl_secs) - KEEP_MARGIN;
    // Newest first: the newest key that old; every key older than it goes.
    keys.iter()
        .find(|key| key.created_at < safe)
        .map(|key| key.created_at)
}

fn ttl_secs(config: &IdentityToml) -> i64 {
    i64::try_from(config.token_ttl_s).unwrap_or(86_400)
}

/// A new Ed25519 key from the operating system's randomness.
fn generate(now: DateTime<Utc>) -> SigningKeyRecord {
    let mut seed = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut seed);
    let key = SigningKey::from_bytes(&seed);
    SigningKeyRecord {
        kid: uuid::Uuid::now_v7().simple().to_string(),
        algorithm: ALGORITHM.into(),
        private_key: URL_SAFE_NO_PAD.encode(seed),
        public_key: URL_SAFE_NO_PAD.encode(key.verifying_key().to_bytes()),
        created_at: chrono::SubsecRound::trunc_subsecs(now, 3),
    }
}

fn encoding_key(record: &SigningKeyRecord) -> Result<EncodingKey, IdentityError> {
    let bad = |what: &str| IdentityError::Signing(format!("signing key {}: {what}", record.kid));
    if record.algorithm != ALGORITHM {
        return Err(bad("not an EdDSA key"));
    }
    let seed: [u8; 32] = URL_SAFE_NO_PAD
        .decode(&record.private_key)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| bad("the stored private key is not 32 base64url bytes"))?;
    let der = SigningKey::from_bytes(&seed)
        .to_pkcs8_der()
        .map_err(|err| bad(&err.to_string()))?;
    Ok(EncodingKey::from_ed_der(der.as_bytes()))
}
