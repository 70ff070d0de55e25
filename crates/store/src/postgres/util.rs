//! Conversions between Rust values and PostgreSQL columns, and error mapping.
//! Timestamps are BIGINT milliseconds, as in the SQLite backend.

use chrono::{DateTime, SubsecRound, Utc};
use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::StoreError;

/// Now, truncated to what the database keeps (milliseconds), so a value we
/// return equals the value read back later.
pub(super) fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}

pub(super) fn to_ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub(super) fn from_ms(ms: i64, what: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::from_timestamp_millis(ms)
        .ok_or_else(|| StoreError::Corrupt(format!("{what}: timestamp {ms} out of range")))
}

/// u64 counters are stored as signed 64-bit BIGINTs.
pub(super) fn to_i64(v: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::Database(format!("{what}: {v} is too large")))
}

pub(super) fn to_u64(v: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("{what}: negative value {v}")))
}

/// Map a sqlx error, saying what we were doing. Undecodable columns mean the
/// stored data is not what this code wrote: `Corrupt`.
pub(super) fn db(context: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
    move |e| match e {
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
            StoreError::Corrupt(format!("{context}: {e}"))
        }
        e => StoreError::Database(format!("{context}: {e}")),
    }
}

/// Whether `e` is a foreign key violation (a row referring to nothing).
pub(super) fn is_fk_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_foreign_key_violation())
}

/// Typed column access with the column named in the error.
pub(super) fn col<'r, T>(row: &'r PgRow, name: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    row.try_get(name)
        .map_err(|e| StoreError::Corrupt(format!("column {name}: {e}")))
}

pub(super) fn col_u64(row: &PgRow, name: &str) -> Result<u64, StoreError> {
    to_u64(col::<i64>(row, name)?, name)
}

pub(super) fn col_time(row: &PgRow, name: &str) -> Result<DateTime<Utc>, StoreError> {
    from_ms(col::<i64>(row, name)?, name)
}

pub(super) fn col_opt_time(row: &PgRow, name: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
    col::<Option<i64>>(row, name)?
        .map(|ms| from_ms(ms, name))
        .transpose()
}

pub(super) fn to_json<T: serde::Serialize>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Database(format!("encoding {what} as JSON: {e}")))
}

pub(super) fn from_json<T: serde::de::DeserializeOwned>(
    text: &str,
    what: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("decoding {what}: {e}")))
}
