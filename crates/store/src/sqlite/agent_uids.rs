//! The uids of users' agents (see [`Store::agent_uid`](crate::Store::agent_uid)):
//! looked up, or allocated in one write transaction (SQLite has one writer at
//! a time, across processes too).

use super::SqliteStore;
use crate::StoreResult;
use crate::agent_uids::{INSERT, LOWEST_FREE, RECORDED, check_range, range_full, to_uid};
use crate::records::{db, execute};

impl SqliteStore {
    pub(super) async fn agent_uid_impl(
        &self,
        user: &str,
        first: u32,
        last: u32,
    ) -> StoreResult<u32> {
        check_range(first, last)?;
        let recorded: Option<i64> = sqlx::query_scalar(RECORDED)
            .bind(user)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("reading an agent uid"))?;
        if let Some(uid) = recorded {
            return to_uid(uid);
        }
        let context = "allocating an agent uid";
        let _write = self.write_guard().await;
        let mut tx = self.begin_write().await.map_err(db(context))?;
        // Another process may have allocated it since the read above.
        let recorded: Option<i64> = sqlx::query_scalar(RECORDED)
            .bind(user)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db(context))?;
        if let Some(uid) = recorded {
            return to_uid(uid);
        }
        let free: Option<i64> = sqlx::query_scalar(LOWEST_FREE)
            .bind(i64::from(first))
            .bind(i64::from(last))
            .fetch_one(&mut *tx)
            .await
            .map_err(db(context))?;
        let uid = free.ok_or_else(|| range_full(user, first, last))?;
        let query = sqlx::query(INSERT).bind(user).bind(uid);
        execute(&mut *tx, query, context).await?;
        tx.commit().await.map_err(db(context))?;
        to_uid(uid)
    }
}
