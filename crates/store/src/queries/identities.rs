//! [`IdentityStore`](crate::IdentityStore): which provider account
//! (issuer, subject) a user was created from or linked to, and what its
//! groups gave.

use crate::dialect::sql;
use crate::identities::IDENTITY_SELECT;

sql!(pub(crate) BY_ACCOUNT = IDENTITY_SELECT, " WHERE i.issuer = $1 AND i.subject = $2");

sql!(pub(crate) OF_USER = IDENTITY_SELECT, " WHERE i.user_id = $1 ORDER BY i.issuer, i.subject");

pub(crate) const LINK: &str =
    "INSERT INTO user_identities (issuer, subject, user_id, created_at) VALUES ($1, $2, $3, $4)";

pub(crate) const SET_GIVEN: &str = "UPDATE user_identities SET group_admin = $1, \
     group_grants = $2 WHERE issuer = $3 AND subject = $4";

macro_rules! identity_store {
    ($store:ty) => {
        const _: () = {
            use $crate::identities::{GroupGiven, IdentityRecord, identity};
            use $crate::queries::identities as q;
            use $crate::records::{
                execute, fetch_all, fetch_optional, is_fk_violation, now, to_ms, unique_error,
            };
            use $crate::{StoreError, StoreResult};

            #[async_trait::async_trait]
            impl $crate::IdentityStore for $store {
                async fn user_by_identity(
                    &self,
                    issuer: &str,
                    subject: &str,
                ) -> StoreResult<Option<IdentityRecord>> {
                    let query = sqlx::query(q::BY_ACCOUNT).bind(issuer).bind(subject);
                    fetch_optional(&self.pool, query, "reading identity", identity).await
                }

                async fn identities_of(&self, user_id: &str) -> StoreResult<Vec<IdentityRecord>> {
                    let query = sqlx::query(q::OF_USER).bind(user_id);
                    fetch_all(&self.pool, query, "listing identities", identity).await
                }

                async fn link_identity(
                    &self,
                    user_id: &str,
                    issuer: &str,
                    subject: &str,
                ) -> StoreResult<()> {
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::LINK)
                        .bind(issuer)
                        .bind(subject)
                        .bind(user_id)
                        .bind(to_ms(now()));
                    query
                        .execute(self.writer())
                        .await
                        .map_err(|e| match is_fk_violation(&e) {
                            true => StoreError::NotFound(format!("user {user_id}")),
                            false => unique_error("linking identity", || {
                                "this provider account is linked already".into()
                            })(e),
                        })?;
                    Ok(())
                }

                async fn set_group_given(
                    &self,
                    issuer: &str,
                    subject: &str,
                    given: &GroupGiven,
                ) -> StoreResult<bool> {
                    let grants = serde_json::to_string(&given.grants)
                        .map_err(|e| StoreError::Database(format!("group grants: {e}")))?;
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::SET_GIVEN)
                        .bind(given.admin)
                        .bind(grants)
                        .bind(issuer)
                        .bind(subject);
                    let done = execute(self.writer(), query, "updating identity").await?;
                    Ok(done.rows_affected() > 0)
                }
            }
        };
    };
}
pub(crate) use identity_store;
