//! The conversions and error mapping this backend uses, shared with the SQLite
//! one (see `records`), plus what is PostgreSQL's own.

pub(super) use crate::records::{db, now, to_i64, to_json, to_ms, to_u64};

/// Whether `e` is a foreign key violation (a row referring to nothing).
pub(super) fn is_fk_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_foreign_key_violation())
}
