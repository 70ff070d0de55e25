//! The dialect layer. Each query is written once, as one `&'static str` both
//! backends run: [`sql!`] joins its pieces (literals and column lists) at
//! compile time, so no SQL is built per call.
//!
//! - Placeholders are PostgreSQL's `$N`. sqlx binds SQLite's `$N` by its
//!   number too (not by order of appearance), so a `$N` may come before a
//!   lower one and appear more than once (the test below holds this).
//! - SQL both databases read alike: `CAST(x AS BIGINT)`, not `x::bigint`;
//!   `FALSE`, not `0`; `ON CONFLICT … DO …`; `RETURNING`. Booleans are bound
//!   as `bool` (SQLite stores 0/1) and read through `Columns::flag`.
//! - Times are integer milliseconds bound from Rust (`records::now`), never
//!   the database's clock, so both backends store the same values.
//!
//! The code that runs a query is written once too: the macros of
//! `crate::queries` expand to the same methods on each store, which provides
//! `pool` (reads), `writer()` and `write_guard()` (writes: SQLite serializes
//! them in-process, PostgreSQL locks rows) and `begin_write()` (a write
//! transaction). What truly differs stays in the backends: SQLite's
//! group-commit writer; PostgreSQL's row locks, NOTIFY and cluster tables.

/// The length of the pieces joined.
pub(crate) const fn total_len(parts: &[&str]) -> usize {
    let mut len = 0;
    let mut i = 0;
    while i < parts.len() {
        len += parts[i].len();
        i += 1;
    }
    len
}

/// The pieces joined, as bytes.
pub(crate) const fn join<const N: usize>(parts: &[&str]) -> [u8; N] {
    let mut out = [0u8; N];
    let mut at = 0;
    let mut i = 0;
    while i < parts.len() {
        let part = parts[i].as_bytes();
        let mut j = 0;
        while j < part.len() {
            out[at] = part[j];
            at += 1;
            j += 1;
        }
        i += 1;
    }
    out
}

/// The text of bytes [`join`] made of `&str` pieces.
pub(crate) const fn text(bytes: &'static [u8]) -> &'static str {
    match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(_) => panic!("SQL pieces are UTF-8"),
    }
}

/// `sql!(NAME = "SELECT ", COLUMNS, " FROM t WHERE id = $1");` defines the
/// `&'static str` constant `NAME`, its pieces (literals or `&str` constants)
/// joined at compile time.
macro_rules! sql {
    ($(#[$meta:meta])* $vis:vis $name:ident = $($part:expr),+ $(,)?) => {
        $(#[$meta])*
        $vis const $name: &str = {
            const PARTS: &[&str] = &[$($part),+];
            const BYTES: [u8; $crate::dialect::total_len(PARTS)] =
                $crate::dialect::join(PARTS);
            $crate::dialect::text(&BYTES)
        };
    };
}
pub(crate) use sql;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use sqlx::Row;

    const COLUMNS: &str = "a, b";
    sql!(JOINED = "SELECT ", COLUMNS, " FROM t WHERE a = $2");

    #[test]
    fn pieces_are_joined_at_compile_time() {
        assert_eq!(JOINED, "SELECT a, b FROM t WHERE a = $2");
    }

    /// The placeholders of both backends: SQLite's `$N` is bound by number.
    #[tokio::test]
    async fn sqlite_binds_dollar_placeholders_by_number() {
        let pool = sqlx::SqlitePool::connect("sqlite::memory:").await.unwrap();
        let row = sqlx::query("SELECT $2 AS second, $1 AS first, $2 || $1 AS both")
            .bind("one")
            .bind("two")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(row.get::<String, _>("second"), "two");
        assert_eq!(row.get::<String, _>("first"), "one");
        assert_eq!(row.get::<String, _>("both"), "twoone");
    }
}
