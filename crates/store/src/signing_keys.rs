//! The keys agentd signs tokens for tools with (`{user_token}`): kept in the
//! store so every node of a cluster signs with the same keys.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::StoreResult;

/// A signing key as stored. The private part is a secret: it never leaves
/// the server (no API returns it, `Debug` hides it).
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKeyRecord {
    /// The key's id (`kid` of the tokens it signs and of its JWK).
    pub kid: String,
    /// The JWS algorithm, e.g. `EdDSA`.
    pub algorithm: String,
    /// The private key, encoded as its algorithm says (Ed25519: the seed,
    /// base64url without padding).
    pub private_key: String,
    /// The public key, likewise encoded (Ed25519: the point).
    pub public_key: String,
    pub created_at: DateTime<Utc>,
}

impl std::fmt::Debug for SigningKeyRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKeyRecord")
            .field("kid", &self.kid)
            .field("algorithm", &self.algorithm)
            .field("private_key", &"<hidden>")
            .field("public_key", &self.public_key)
            .field("created_at", &self.created_at)
            .finish()
    }
}

/// Signing keys: added, listed, pruned.
#[async_trait]
pub trait SigningKeyStore: Send + Sync {
    /// Every key, newest first by `(created_at, kid)`.
    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>>;

    /// Store `key` unless a key created at or after `unless_since` is stored
    /// already (another node rotated first): `false` then. A `kid` taken is a
    /// `Database` error.
    async fn add_signing_key(
        &self,
        key: &SigningKeyRecord,
        unless_since: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Delete the keys created before `cutoff` (no token they signed is
    /// valid any more). Returns how many were deleted.
    async fn delete_signing_keys_before(&self, cutoff: DateTime<Utc>) -> StoreResult<u64>;
}
