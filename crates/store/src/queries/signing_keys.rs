//! [`SigningKeyStore`](crate::SigningKeyStore): the keys of tokens for tools.

pub(crate) const LIST: &str = "SELECT kid, algorithm, private_key, public_key, created_at \
     FROM signing_keys ORDER BY created_at DESC, kid DESC";

/// `$1`..`$5` the key; inserted only when no key is as new as `$6`.
pub(crate) const INSERT_UNLESS_NEWER: &str = "INSERT INTO signing_keys \
     (kid, algorithm, private_key, public_key, created_at) \
     SELECT $1, $2, $3, $4, CAST($5 AS BIGINT) \
     WHERE NOT EXISTS (SELECT 1 FROM signing_keys WHERE created_at >= CAST($6 AS BIGINT))";

pub(crate) const DELETE_BEFORE: &str = "DELETE FROM signing_keys WHERE created_at < $1";

macro_rules! signing_key_store {
    ($store:ty) => {
        const _: () = {
            use $crate::queries::signing_keys as q;
            use $crate::records::{Columns, execute, fetch_all, to_ms, unique_error};
            use $crate::{SigningKeyRecord, StoreResult};

            fn key(row: &impl Columns) -> StoreResult<SigningKeyRecord> {
                Ok(SigningKeyRecord {
                    kid: row.text("kid")?,
                    algorithm: row.text("algorithm")?,
                    private_key: row.text("private_key")?,
                    public_key: row.text("public_key")?,
                    created_at: row.time("created_at")?,
                })
            }

            #[async_trait::async_trait]
            impl $crate::SigningKeyStore for $store {
                async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>> {
                    let query = sqlx::query(q::LIST);
                    fetch_all(&self.pool, query, "listing signing keys", key).await
                }

                async fn add_signing_key(
                    &self,
                    key: &SigningKeyRecord,
                    unless_since: chrono::DateTime<chrono::Utc>,
                ) -> StoreResult<bool> {
                    let _write = self.write_guard().await;
                    let done = sqlx::query(q::INSERT_UNLESS_NEWER)
                        .bind(&key.kid)
                        .bind(&key.algorithm)
                        .bind(&key.private_key)
                        .bind(&key.public_key)
                        .bind(to_ms(key.created_at))
                        .bind(to_ms(unless_since))
                        .execute(self.writer())
                        .await
                        .map_err(unique_error("adding a signing key", || {
                            format!("key id {:?} is taken", key.kid)
                        }))?;
                    Ok(done.rows_affected() > 0)
                }

                async fn delete_signing_keys_before(
                    &self,
                    cutoff: chrono::DateTime<chrono::Utc>,
                ) -> StoreResult<u64> {
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::DELETE_BEFORE).bind(to_ms(cutoff));
                    let done = execute(self.writer(), query, "deleting signing keys").await?;
                    Ok(done.rows_affected())
                }
            }
        };
    };
}
pub(crate) use signing_key_store;
