//! Users and their API tokens (stored as SHA-256 hashes, never in clear),
//! plus two small lookups the server needs: a turn by `client_request_id` and
//! the session count.

use super::SqliteStore;
use super::util::{db, now, to_ms};
use crate::records::{TOKEN_SELECT, USER_COLUMNS, token as token_from_row, user as user_from_row};
use crate::{StoreError, StoreResult, TokenRecord, TurnRecord, UserRecord};

impl SqliteStore {
    pub(super) async fn create_user_impl(&self, name: &str) -> StoreResult<UserRecord> {
        let user = UserRecord {
            id: uuid::Uuid::now_v7().to_string(),
            name: name.to_string(),
            is_admin: false,
            created_at: now(),
            disabled_at: None,
        };
        let _write = self.write_guard().await;
        let result =
            sqlx::query("INSERT INTO users (id, name, is_admin, created_at) VALUES (?, ?, 0, ?)")
                .bind(&user.id)
                .bind(&user.name)
                .bind(to_ms(user.created_at))
                .execute(&self.writes)
                .await;
        match result {
            Ok(_) => Ok(user),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Err(StoreError::Database(
                format!("creating user: the name {name:?} is taken"),
            )),
            Err(e) => Err(db("creating user")(e)),
        }
    }

    pub(super) async fn get_user_by_name_impl(
        &self,
        name: &str,
    ) -> StoreResult<Option<UserRecord>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE name = ?");
        sqlx::query(&sql)
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("reading user"))?
            .as_ref()
            .map(user_from_row)
            .transpose()
    }

    pub(super) async fn create_token_impl(
        &self,
        user_id: &str,
        name: &str,
        token_hash: &str,
        prefix: &str,
    ) -> StoreResult<TokenRecord> {
        let id = uuid::Uuid::now_v7().to_string();
        {
            let _write = self.write_guard().await;
            let result = sqlx::query(
                "INSERT INTO api_tokens (id, user_id, name, token_hash, prefix, created_at) \
                 VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(&id)
            .bind(user_id)
            .bind(name)
            .bind(token_hash)
            .bind(prefix)
            .bind(to_ms(now()))
            .execute(&self.writes)
            .await;
            match result {
                Ok(_) => {}
                Err(sqlx::Error::Database(e)) if e.is_foreign_key_violation() => {
                    return Err(StoreError::NotFound(format!("user {user_id}")));
                }
                Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                    return Err(StoreError::Database(
                        "creating token: a token with this hash exists".into(),
                    ));
                }
                Err(e) => return Err(db("creating token")(e)),
            }
        }
        let sql = format!("{TOKEN_SELECT} WHERE t.id = ?");
        let row = sqlx::query(&sql)
            .bind(&id)
            .fetch_one(&self.pool)
            .await
            .map_err(db("reading token"))?;
        token_from_row(&row)
    }

    pub(super) async fn token_by_hash_impl(
        &self,
        token_hash: &str,
    ) -> StoreResult<Option<TokenRecord>> {
        let sql = format!("{TOKEN_SELECT} WHERE t.token_hash = ?");
        sqlx::query(&sql)
            .bind(token_hash)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("reading token"))?
            .as_ref()
            .map(token_from_row)
            .transpose()
    }

    pub(super) async fn list_tokens_impl(
        &self,
        user_id: Option<&str>,
    ) -> StoreResult<Vec<TokenRecord>> {
        let sql = format!(
            "{TOKEN_SELECT} WHERE (? IS NULL OR t.user_id = ?) \
             ORDER BY t.created_at DESC, t.id DESC"
        );
        let rows = sqlx::query(&sql)
            .bind(user_id)
            .bind(user_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db("listing tokens"))?;
        rows.iter().map(token_from_row).collect()
    }

    pub(super) async fn revoke_token_impl(&self, id: &str) -> StoreResult<bool> {
        let _write = self.write_guard().await;
        let done =
            sqlx::query("UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?")
                .bind(to_ms(now()))
                .bind(id)
                .execute(&self.writes)
                .await
                .map_err(db("revoking token"))?;
        Ok(done.rows_affected() > 0)
    }

    pub(super) async fn find_turn_impl(
        &self,
        session_id: &str,
        client_request_id: &str,
    ) -> StoreResult<Option<TurnRecord>> {
        let row = sqlx::query(
            "SELECT id, session_id, status, client_request_id, started_at, finished_at \
             FROM turns WHERE session_id = ? AND client_request_id = ?",
        )
        .bind(session_id)
        .bind(client_request_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db("reading turn"))?;
        row.as_ref().map(crate::records::turn).transpose()
    }

    pub(super) async fn count_sessions_impl(&self) -> StoreResult<u64> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM sessions")
            .fetch_one(&self.pool)
            .await
            .map_err(db("counting sessions"))?;
        crate::records::Columns::count(&row, "n")
    }
}

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
