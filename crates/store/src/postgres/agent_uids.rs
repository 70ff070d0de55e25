//! The uids of users' agents (see [`Store::agent_uid`](crate::Store::agent_uid)):
//! looked up, or allocated by an insert that a concurrent allocation of the
//! same uid (or for the same user) turns into nothing, then tried again.

use super::PostgresStore;
use crate::agent_uids::{
    INSERT_UNLESS_TAKEN, LOWEST_FREE, RECORDED, check_range, range_full, to_uid,
};
use crate::records::db;
use crate::{StoreError, StoreResult};

/// Each failed attempt means another allocation succeeded meanwhile.
const ATTEMPTS: usize = 100;

impl PostgresStore {
    pub(super) async fn agent_uid_impl(
        &self,
        user: &str,
        first: u32,
        last: u32,
    ) -> StoreResult<u32> {
        check_range(first, last)?;
        let context = "allocating an agent uid";
        for _ in 0..ATTEMPTS {
            let recorded: Option<i64> = sqlx::query_scalar(RECORDED)
                .bind(user)
                .fetch_optional(&self.pool)
                .await
                .map_err(db("reading an agent uid"))?;
            if let Some(uid) = recorded {
                return to_uid(uid);
            }
            let free: Option<i64> = sqlx::query_scalar(LOWEST_FREE)
                .bind(i64::from(first))
                .bind(i64::from(last))
                .fetch_one(&self.pool)
                .await
                .map_err(db(context))?;
            let uid = free.ok_or_else(|| range_full(user, first, last))?;
            let inserted: Option<i64> = sqlx::query_scalar(INSERT_UNLESS_TAKEN)
                .bind(user)
                .bind(uid)
                .fetch_optional(&self.pool)
                .await
                .map_err(db(context))?;
            if let Some(uid) = inserted {
                return to_uid(uid);
            }
        }
        Err(StoreError::Database(format!(
            "{context} for user {user:?}: too many allocations at once; try again"
        )))
    }
}
