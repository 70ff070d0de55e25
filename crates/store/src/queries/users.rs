//! Users and their API tokens (stored as SHA-256 hashes, never in clear),
//! their admin and disabled flags, and their agents' uids.

use async_trait::async_trait;

use crate::access::LIST_USERS;
use crate::records::{TOKEN_SELECT, USER_COLUMNS, db, now, to_ms, token, user};
use crate::sql::{Backend, Query};
use crate::{StoreError, StoreResult, TokenRecord, UserRecord, UserStore};

#[async_trait]
impl<B: Backend> UserStore for B {
    async fn create_user(&self, name: &str) -> StoreResult<UserRecord> {
        let record = UserRecord {
            id: uuid::Uuid::now_v7().to_string(),
            name: name.to_string(),
            is_admin: false,
            created_at: now(),
            disabled_at: None,
        };
        let query = Query::new(
            "creating user",
            "INSERT INTO users (id, name, is_admin, created_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(&record.id)
        .bind(&record.name)
        .bind(false)
        .bind(to_ms(record.created_at));
        match self.raw_execute(query).await {
            Ok(_) => Ok(record),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Err(StoreError::Database(
                format!("creating user: the name {name:?} is taken"),
            )),
            Err(e) => Err(db("creating user")(e)),
        }
    }

    async fn get_user_by_name(&self, name: &str) -> StoreResult<Option<UserRecord>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE name = $1");
        let query = Query::new("reading user", sql).bind(name);
        self.fetch_optional(query)
            .await?
            .as_ref()
            .map(user)
            .transpose()
    }

    async fn create_token(
        &self,
        user_id: &str,
        name: &str,
        token_hash: &str,
        prefix: &str,
    ) -> StoreResult<TokenRecord> {
        let id = uuid::Uuid::now_v7().to_string();
        let insert = Query::new(
            "creating token",
            "INSERT INTO api_tokens (id, user_id, name, token_hash, prefix, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&id)
        .bind(user_id)
        .bind(name)
        .bind(token_hash)
        .bind(prefix)
        .bind(to_ms(now()));
        match self.raw_execute(insert).await {
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
        let sql = format!("{TOKEN_SELECT} WHERE t.id = $1");
        token(
            &self
                .fetch_one(Query::new("reading token", sql).bind(&id))
                .await?,
        )
    }

    async fn token_by_hash(&self, token_hash: &str) -> StoreResult<Option<TokenRecord>> {
        let sql = format!("{TOKEN_SELECT} WHERE t.token_hash = $1");
        let query = Query::new("reading token", sql).bind(token_hash);
        self.fetch_optional(query)
            .await?
            .as_ref()
            .map(token)
            .transpose()
    }

    async fn list_tokens(&self, user_id: Option<&str>) -> StoreResult<Vec<TokenRecord>> {
        let sql = format!(
            "{TOKEN_SELECT} WHERE (CAST($1 AS TEXT) IS NULL OR t.user_id = $1) \
             ORDER BY t.created_at DESC, t.id DESC"
        );
        let rows = self
            .fetch_all(Query::new("listing tokens", sql).bind(user_id))
            .await?;
        rows.iter().map(token).collect()
    }

    async fn revoke_token(&self, id: &str) -> StoreResult<bool> {
        let query = Query::new(
            "revoking token",
            "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2",
        )
        .bind(to_ms(now()))
        .bind(id);
        Ok(self.execute(query).await? > 0)
    }

    async fn agent_uid(&self, user: &str, first: u32, last: u32) -> StoreResult<u32> {
        self.allocate_agent_uid(user, first, last).await
    }

    async fn list_users(&self) -> StoreResult<Vec<UserRecord>> {
        let rows = self
            .fetch_all(Query::new("listing users", LIST_USERS))
            .await?;
        rows.iter().map(user).collect()
    }

    async fn set_user_flags(
        &self,
        name: &str,
        admin: Option<bool>,
        disabled: Option<bool>,
    ) -> StoreResult<bool> {
        let query = Query::new(
            "updating user",
            "UPDATE users SET is_admin = COALESCE($1, is_admin), \
             disabled_at = CASE WHEN $2 IS NULL THEN disabled_at \
                                WHEN $2 THEN COALESCE(disabled_at, $3) ELSE NULL END \
             WHERE name = $4",
        )
        .bind(admin)
        .bind(disabled)
        .bind(to_ms(now()))
        .bind(name);
        Ok(self.execute(query).await? > 0)
    }
}
