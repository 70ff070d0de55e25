//! What both backends share of [`Store::agent_uid`](crate::Store::agent_uid):
//! the queries, the checks and the errors.

use crate::dialect::sql;
use crate::{StoreError, StoreResult};

/// The uid recorded for user `$1`.
pub(crate) const RECORDED: &str = "SELECT uid FROM agent_uids WHERE user_name = $1";

/// The lowest uid of `$1..=$2` that no row holds, or NULL when every one is
/// taken: `$1` itself, else the uid after the lowest taken one in the range
/// whose successor is free.
pub(crate) const LOWEST_FREE: &str = "SELECT CASE \
     WHEN NOT EXISTS (SELECT 1 FROM agent_uids WHERE uid = CAST($1 AS BIGINT)) \
       THEN CAST($1 AS BIGINT) \
     ELSE (SELECT MIN(a.uid) + 1 FROM agent_uids a \
           WHERE a.uid >= CAST($1 AS BIGINT) AND a.uid < CAST($2 AS BIGINT) \
           AND NOT EXISTS (SELECT 1 FROM agent_uids b WHERE b.uid = a.uid + 1)) \
     END";

/// Records uid `$2` for user `$1`.
pub(crate) const INSERT: &str = "INSERT INTO agent_uids (user_name, uid) VALUES ($1, $2)";

sql!(
    /// [`INSERT`], or nothing when either unique constraint (the user's, the
    /// uid's) stands in the way: then look again.
    pub(crate) INSERT_UNLESS_TAKEN = INSERT, " ON CONFLICT DO NOTHING RETURNING uid"
);

pub(crate) fn check_range(first: u32, last: u32) -> StoreResult<()> {
    if first == 0 || first > last {
        return Err(StoreError::Database(format!(
            "allocating an agent uid: {first}..={last} is not a range of uids above 0"
        )));
    }
    Ok(())
}

pub(crate) fn range_full(user: &str, first: u32, last: u32) -> StoreError {
    StoreError::Database(format!(
        "allocating an agent uid for user {user:?}: every uid of [server] agent_uids \
         ({first}-{last}) is taken; widen the range or pin the user's uid with [users.NAME] uid"
    ))
}

/// A uid as stored.
pub(crate) fn to_uid(stored: i64) -> StoreResult<u32> {
    u32::try_from(stored)
        .ok()
        .filter(|uid| *uid != 0)
        .ok_or_else(|| StoreError::Corrupt(format!("agent uid {stored} is not a user's uid")))
}
