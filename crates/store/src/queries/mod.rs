//! Each query written once, with the code that runs it, for both backends.
//! A module per role: its SQL (see `crate::dialect`) and a macro that expands
//! to the role's trait impl on a store type. Where a backend truly differs
//! (SQLite's group-commit writer and one-round-trip transactions,
//! PostgreSQL's row locks and arrays), the macro calls that backend's own
//! inherent `*_impl` method instead.

pub(crate) mod access;
pub(crate) mod checkpoints;
pub(crate) mod events;
pub(crate) mod identities;
pub(crate) mod pending;
pub(crate) mod search;
pub(crate) mod sessions;
pub(crate) mod signing_keys;
pub(crate) mod transcript;
pub(crate) mod transfer;
pub(crate) mod turns;
pub(crate) mod users;
pub(crate) mod webhooks;

/// Every role of `Store` on `$store` (over the database `$db`), from the macros of this module.
macro_rules! roles {
    ($store:ty, $db:ty) => {
        $crate::queries::access::access_store!($store);
        $crate::queries::checkpoints::checkpoint_store!($store);
        $crate::queries::events::event_log!($store);
        $crate::queries::identities::identity_store!($store);
        $crate::queries::pending::pending_store!($store);
        $crate::queries::sessions::session_store!($store);
        $crate::queries::signing_keys::signing_key_store!($store);
        $crate::queries::transcript::transcript_store!($store);
        $crate::queries::transfer::transfer_store!($store, $db);
        $crate::queries::turns::turn_store!($store);
        $crate::queries::users::user_store!($store);
        $crate::queries::webhooks::webhook_store!($store);
    };
}
pub(crate) use roles;
