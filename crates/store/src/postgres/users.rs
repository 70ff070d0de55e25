//! Users and their API tokens (stored as SHA-256 hashes, never in clear),
//! plus two small lookups the server needs: a turn by `client_request_id` and
//! the session count.

use super::PostgresStore;
use super::util::{db, now, to_ms};
use crate::records::{TOKEN_SELECT, USER_COLUMNS, token as token_from_row, user as user_from_row};
use crate::{StoreError, StoreResult, TokenRecord, TurnRecord, UserRecord};

impl PostgresStore {
    pub(super) async fn create_user_impl(&self, name: &str) -> StoreResult<UserRecord> {
        let user = UserRecord {
            id: uuid::Uuid::now_v7().to_string(),
            name: name.to_string(),
            is_admin: false,
            created_at: now(),
            disabled_at: None,
        };
        let result = sqlx::query(
            "INSERT INTO users (id, name, is_admin, created_at) VALUES ($1, $2, FALSE, $3)",
        )
        .bind(&user.id)
        .bind(&user.name)
        .bind(to_ms(user.created_at))
        .execute(&self.pool)
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
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE name = $1");
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
            let result = sqlx::query(
                "INSERT INTO api_tokens (id, user_id, name, token_hash, prefix, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&id)
            .bind(user_id)
            .bind(name)
            .bind(token_hash)
            .bind(prefix)
            .bind(to_ms(now()))
            .execute(&self.pool)
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
        let sql = format!("{TOKEN_SELECT} WHERE t.id = $1");
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
        let sql = format!("{TOKEN_SELECT} WHERE t.token_hash = $1");
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
            "{TOKEN_SELECT} WHERE ($1::text IS NULL OR t.user_id = $1) \
             ORDER BY t.created_at DESC, t.id DESC"
        );
        let rows = sqlx::query(&sql)
            .bind(user_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db("listing tokens"))?;
        rows.iter().map(token_from_row).collect()
    }

    pub(super) async fn revoke_token_impl(&self, id: &str) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2",
        )
        .bind(to_ms(now()))
        .bind(id)
        .execute(&self.pool)
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
             FROM turns WHERE session_id = $1 AND client_request_id = $2",
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
