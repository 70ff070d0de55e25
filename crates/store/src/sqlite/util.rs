//! The conversions and error mapping this backend uses, shared with the
//! PostgreSQL one (see `records`).

pub(super) use crate::records::{db, now, to_json, to_ms, to_u64};
