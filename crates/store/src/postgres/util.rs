//! The conversions and error mapping this backend uses, shared with the SQLite
//! one (see `records`).

pub(super) use crate::records::{db, is_fk_violation, now, to_json, to_ms, to_u64};
