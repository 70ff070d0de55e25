//! The `{user_token}` JWTs: EdDSA (Ed25519) signed, with `iss` (`[identity]
//! issuer`), `aud` = [`AUDIENCE`], `sub` = the user, `sid` = the session,
//! `iat`, `exp` (`[identity] token_ttl_s` later) and the key's `kid` in the
//! header. The keys live in the store, so every node of a cluster signs with
//! the same ones: made on first use, a new one after `[identity]
//! key_rotation_days`, the previous one kept (and published) until every
//! token it signed has expired. Private keys never leave the server.

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

/// The `aud` of every token for tools.
pub const AUDIENCE: &str = "agentd-tool";

/// The algorithm of the keys, as stored and in tokens.
const ALGORITHM: &str = "EdDSA";

/// How long a node signs with the key it read before looking again (another
/// node may have rotated).
const RECHECK: StdDuration = StdDuration::from_secs(60);

/// Extra time a retired key stays, past the expiry of its last tokens.
const KEEP_MARGIN: Duration = Duration::hours(1);

/// The key this node signs with, read from the store.
#[derive(Default)]
pub struct ToolKeys {
    current: tokio::sync::Mutex<Option<Current>>,
}

struct Current {
    kid: String,
    key: EncodingKey,
    created_at: DateTime<Utc>,
    read_at: Instant,
}

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    aud: &'a str,
    sub: &'a str,
    sid: &'a str,
    iat: i64,
    exp: i64,
}

/// `GET /v1/identity/jwks`: the public keys tokens for tools are signed with.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Jwks {
    pub keys: Vec<Jwk>,
}

/// One public key (RFC 8037: an Ed25519 `OKP` key).
#[derive(Debug, Clone, Serialize, ToSchema)]
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
    /// A token for `user`'s session `session_id`, and when it expires.
    pub(crate) async fn mint(
        &self,
        store: &dyn Store,
        config: &IdentityToml,
        user: &str,
        session_id: &str,
    ) -> Result<(String, DateTime<Utc>), IdentityError> {
        let (kid, key) = self.signing_key(store, config).await?;
        let now = Utc::now();
        let expires = now + Duration::seconds(ttl_secs(config));
        let claims = Claims {
            iss: &config.issuer,
            aud: AUDIENCE,
            sub: user,
            sid: session_id,
            iat: now.timestamp(),
            exp: expires.timestamp(),
        };
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(kid);
        let token = jsonwebtoken::encode(&header, &claims, &key)
            .map_err(|err| IdentityError::Signing(err.to_string()))?;
        Ok((token, expires))
    }

    /// The public keys of every stored key (the current one and those whose
    /// tokens may still be valid).
    pub async fn jwks(store: &dyn Store) -> agentd_store::StoreResult<Jwks> {
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

    /// The key to sign with now: the newest stored one unless it is due for
    /// rotation, else a new one (stored first, so every node finds it).
    async fn signing_key(
        &self,
        store: &dyn Store,
        config: &IdentityToml,
    ) -> Result<(String, EncodingKey), IdentityError> {
        let mut current = self.current.lock().await;
        let now = Utc::now();
        let rotation = Duration::days(i64::try_from(config.key_rotation_days).unwrap_or(3650));
        if let Some(key) = current.as_ref()
            && key.read_at.elapsed() < RECHECK
            && now - key.created_at < rotation
        {
            return Ok((key.kid.clone(), key.key.clone()));
        }
        let newest = store.signing_keys().await?.into_iter().next();
        let record = match newest {
            Some(key) if now - key.created_at < rotation => key,
            _ => {
                // `false`: another node stored a new key first; sign with that.
                store
                    .add_signing_key(&generate(now), now - rotation)
                    .await?;
                let cutoff = now - rotation - Duration::seconds(ttl_secs(config)) - KEEP_MARGIN;
                store.delete_signing_keys_before(cutoff).await?;
                store
                    .signing_keys()
                    .await?
                    .into_iter()
                    .next()
                    .ok_or_else(|| IdentityError::Signing("no signing key was stored".into()))?
            }
        };
        let key = encoding_key(&record)?;
        *current = Some(Current {
            kid: record.kid.clone(),
            key: key.clone(),
            created_at: record.created_at,
            read_at: Instant::now(),
        });
        Ok((record.kid, key))
    }
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
