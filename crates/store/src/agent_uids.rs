//! What both backends share of [`Store::agent_uid`](crate::Store::agent_uid):
//! the query for the lowest free uid, and its checks and errors.

use crate::{StoreError, StoreResult};

/// The lowest uid of `$1..=$2` that no row holds, or NULL when every one is
/// taken: `$1` itself, else the uid after the lowest taken one in the range
/// whose successor is free. (`$N` is written `{N}` here: each backend puts in
/// its own placeholder.)
/// The uid recorded for user `$1`.
pub(crate) const RECORDED: &str = "SELECT uid FROM agent_uids WHERE user_name = $1";

pub(crate) const LOWEST_FREE: &str = "SELECT CASE \
     WHEN NOT EXISTS (SELECT 1 FROM agent_uids WHERE uid = {1}) THEN {1} \
     ELSE (SELECT MIN(a.uid) + 1 FROM agent_uids a \
           WHERE a.uid >= {1} AND a.uid < {2} \
           AND NOT EXISTS (SELECT 1 FROM agent_uids b WHERE b.uid = a.uid + 1)) \
     END";

/// [`LOWEST_FREE`] with the backend's placeholders, e.g. `?N` or `$N::BIGINT`.
pub(crate) fn lowest_free(placeholder: impl Fn(u8) -> String) -> String {
    LOWEST_FREE
        .replace("{1}", &placeholder(1))
        .replace("{2}", &placeholder(2))
}

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
