//! [`UserStore`](crate::UserStore): users and their API tokens (stored as
//! SHA-256 hashes, never in clear), admin and disabled flags. Agent uids are
//! each backend's own (`agent_uid_impl`): how to allocate atomically differs.

use crate::dialect::sql;
use crate::records::{TOKEN_SELECT, USER_COLUMNS};

pub(crate) const CREATE_USER: &str =
    "INSERT INTO users (id, name, is_admin, created_at) VALUES ($1, $2, FALSE, $3)";

sql!(pub(crate) USER_BY_NAME = "SELECT ", USER_COLUMNS, " FROM users WHERE name = $1");

sql!(pub(crate) LIST_USERS = "SELECT ", USER_COLUMNS, " FROM users ORDER BY name");

/// `$1` admin, `$2` disabled (`NULL`: unchanged), `$3` now, `$4` name.
/// Disabling again keeps the first time.
pub(crate) const SET_FLAGS: &str = "UPDATE users SET is_admin = COALESCE($1, is_admin), \
     disabled_at = CASE WHEN $2 IS NULL THEN disabled_at \
                        WHEN $2 THEN COALESCE(disabled_at, $3) ELSE NULL END \
     WHERE name = $4";

pub(crate) const CREATE_TOKEN: &str = "INSERT INTO api_tokens \
     (id, user_id, name, token_hash, prefix, created_at) VALUES ($1, $2, $3, $4, $5, $6)";

sql!(pub(crate) TOKEN_BY_ID = TOKEN_SELECT, " WHERE t.id = $1");

sql!(pub(crate) TOKEN_BY_HASH = TOKEN_SELECT, " WHERE t.token_hash = $1");

sql!(pub(crate) LIST_TOKENS = TOKEN_SELECT,
     " WHERE (CAST($1 AS TEXT) IS NULL OR t.user_id = $1) ORDER BY t.created_at DESC, t.id DESC");

/// Revoking again keeps the first time.
pub(crate) const REVOKE_TOKEN: &str =
    "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2";

macro_rules! user_store {
    ($store:ty) => {
        const _: () = {
            use $crate::queries::users as q;
            use $crate::records::{db, execute, fetch_all, fetch_optional, is_fk_violation, now};
            use $crate::records::{to_ms, token, unique_error, user};
            use $crate::{StoreError, StoreResult, TokenRecord, UserRecord};

            #[async_trait::async_trait]
            impl $crate::UserStore for $store {
                async fn create_user(&self, name: &str) -> StoreResult<UserRecord> {
                    let user = UserRecord {
                        id: uuid::Uuid::now_v7().to_string(),
                        name: name.to_string(),
                        is_admin: false,
                        created_at: now(),
                        disabled_at: None,
                    };
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::CREATE_USER)
                        .bind(&user.id)
                        .bind(&user.name)
                        .bind(to_ms(user.created_at));
                    query
                        .execute(self.writer())
                        .await
                        .map_err(unique_error("creating user", || {
                            format!("the name {name:?} is taken")
                        }))?;
                    Ok(user)
                }

                async fn get_user_by_name(&self, name: &str) -> StoreResult<Option<UserRecord>> {
                    let query = sqlx::query(q::USER_BY_NAME).bind(name);
                    fetch_optional(&self.pool, query, "reading user", user).await
                }

                async fn create_token(
                    &self,
                    user_id: &str,
                    name: &str,
                    token_hash: &str,
                    prefix: &str,
                ) -> StoreResult<TokenRecord> {
                    let id = uuid::Uuid::now_v7().to_string();
                    {
                        let _write = self.write_guard().await;
                        sqlx::query(q::CREATE_TOKEN)
                            .bind(&id)
                            .bind(user_id)
                            .bind(name)
                            .bind(token_hash)
                            .bind(prefix)
                            .bind(to_ms(now()))
                            .execute(self.writer())
                            .await
                            .map_err(|e| match is_fk_violation(&e) {
                                true => StoreError::NotFound(format!("user {user_id}")),
                                false => unique_error("creating token", || {
                                    "a token with this hash exists".into()
                                })(e),
                            })?;
                    }
                    let row = sqlx::query(q::TOKEN_BY_ID)
                        .bind(&id)
                        .fetch_one(&self.pool)
                        .await
                        .map_err(db("reading token"))?;
                    token(&row)
                }

                async fn token_by_hash(
                    &self,
                    token_hash: &str,
                ) -> StoreResult<Option<TokenRecord>> {
                    let query = sqlx::query(q::TOKEN_BY_HASH).bind(token_hash);
                    fetch_optional(&self.pool, query, "reading token", token).await
                }

                async fn list_tokens(
                    &self,
                    user_id: Option<&str>,
                ) -> StoreResult<Vec<TokenRecord>> {
                    let query = sqlx::query(q::LIST_TOKENS).bind(user_id);
                    fetch_all(&self.pool, query, "listing tokens", token).await
                }

                async fn revoke_token(&self, id: &str) -> StoreResult<bool> {
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::REVOKE_TOKEN).bind(to_ms(now())).bind(id);
                    let done = execute(self.writer(), query, "revoking token").await?;
                    Ok(done.rows_affected() > 0)
                }

                async fn agent_uid(&self, user: &str, first: u32, last: u32) -> StoreResult<u32> {
                    self.agent_uid_impl(user, first, last).await
                }

                async fn list_users(&self) -> StoreResult<Vec<UserRecord>> {
                    let query = sqlx::query(q::LIST_USERS);
                    fetch_all(&self.pool, query, "listing users", user).await
                }

                async fn set_user_flags(
                    &self,
                    name: &str,
                    admin: Option<bool>,
                    disabled: Option<bool>,
                ) -> StoreResult<bool> {
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::SET_FLAGS)
                        .bind(admin)
                        .bind(disabled)
                        .bind(to_ms(now()))
                        .bind(name);
                    let done = execute(self.writer(), query, "updating user").await?;
                    Ok(done.rows_affected() > 0)
                }
            }
        };
    };
}
pub(crate) use user_store;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use crate::prelude::*;
    use crate::sqlite::SqliteStore;

    async fn store() -> SqliteStore {
        SqliteStore::open_url("sqlite::memory:").await.unwrap()
    }

    #[tokio::test]
    async fn users_are_unique_by_name() {
        let store = store().await;
        let alice = store.create_user("alice").await.unwrap();
        assert_eq!(
            store.get_user_by_name("alice").await.unwrap().unwrap(),
            alice
        );
        assert!(store.get_user_by_name("bob").await.unwrap().is_none());
        let err = store.create_user("alice").await.unwrap_err().to_string();
        assert!(err.contains("taken"), "{err}");
    }

    #[tokio::test]
    async fn tokens_are_found_by_hash_listed_and_revoked() {
        let store = store().await;
        let alice = store.create_user("alice").await.unwrap();
        let bob = store.create_user("bob").await.unwrap();
        let t1 = store
            .create_token(&alice.id, "laptop", "hash-1", "agentd_ab")
            .await
            .unwrap();
        store
            .create_token(&bob.id, "", "hash-2", "agentd_cd")
            .await
            .unwrap();
        assert_eq!(t1.user_name, "alice");
        assert!(t1.is_usable(chrono::Utc::now()));

        let found = store.token_by_hash("hash-1").await.unwrap().unwrap();
        assert_eq!(found, t1);
        assert!(store.token_by_hash("nope").await.unwrap().is_none());
        assert_eq!(store.list_tokens(None).await.unwrap().len(), 2);
        let mine = store.list_tokens(Some(&alice.id)).await.unwrap();
        assert_eq!(mine, vec![t1.clone()]);

        assert!(store.revoke_token(&t1.id).await.unwrap());
        let revoked = store.token_by_hash("hash-1").await.unwrap().unwrap();
        assert!(!revoked.is_usable(chrono::Utc::now()));
        let first = revoked.revoked_at;
        assert!(store.revoke_token(&t1.id).await.unwrap());
        let again = store.token_by_hash("hash-1").await.unwrap().unwrap();
        assert_eq!(again.revoked_at, first, "the first revocation time stays");
        assert!(!store.revoke_token("missing").await.unwrap());

        let err = store
            .create_token("no-such-user", "", "hash-3", "")
            .await
            .unwrap_err();
        assert!(matches!(err, crate::StoreError::NotFound(_)), "{err}");
    }

    #[tokio::test]
    async fn turns_are_found_by_client_request_id() {
        let store = store().await;
        let session = store
            .create_session(crate::NewSession {
                id: None,
                owner: "local".into(),
                title: None,
                workspace: "/tmp".into(),
                existing_workspace: false,
                model: "demo".into(),
                profile: "default".into(),
            })
            .await
            .unwrap();
        assert!(store.find_turn(&session.id, "r1").await.unwrap().is_none());
        store
            .start_turn(&session.id, "t1", Some("r1"))
            .await
            .unwrap();
        let turn = store.find_turn(&session.id, "r1").await.unwrap().unwrap();
        assert_eq!(turn.id, "t1");
        assert_eq!(store.count_sessions().await.unwrap(), 1);
    }
}
