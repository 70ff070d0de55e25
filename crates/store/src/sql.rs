//! The dialect layer: each query is written once, with numbered placeholders
//! (`$1`, `$2`, … a number may come back) and SQL both databases read alike
//! (`CAST(… AS TEXT)`, not `::text`; booleans bound, not written), and runs
//! on either backend. A [`Query`] carries its text and its arguments as plain
//! values ([`Arg`]); a [`Backend`] runs it — SQLite on its read pool or, for
//! writes, on its write connections under the store's write lock, with the
//! placeholders spelled `?1`, `?2`, …; PostgreSQL on its pool as written.
//! Rows come back as [`Row`], read through [`Columns`] like every record.
//!
//! What truly differs stays in the backends: SQLite's group-commit event
//! writer, PostgreSQL's row locks and its cluster tables.

use std::borrow::Cow;

use async_trait::async_trait;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::StoreResult;
use crate::records::{Columns, db};

/// One argument of a query.
#[derive(Debug, Clone)]
pub enum Arg {
    Text(Option<String>),
    Int(Option<i64>),
    Real(f64),
    /// A boolean: `INTEGER` 0/1 in SQLite, `BOOLEAN` in PostgreSQL.
    Flag(Option<bool>),
    Bytes(Vec<u8>),
}

impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_string()))
    }
}
impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(v))
    }
}
impl From<&String> for Arg {
    fn from(v: &String) -> Self {
        Arg::Text(Some(v.clone()))
    }
}
impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_string))
    }
}
impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Arg::Text(v)
    }
}
impl From<&Option<String>> for Arg {
    fn from(v: &Option<String>) -> Self {
        Arg::Text(v.clone())
    }
}
impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}
impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}
impl From<f64> for Arg {
    fn from(v: f64) -> Self {
        Arg::Real(v)
    }
}
impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Arg::Flag(Some(v))
    }
}
impl From<Option<bool>> for Arg {
    fn from(v: Option<bool>) -> Self {
        Arg::Flag(v)
    }
}
impl From<Vec<u8>> for Arg {
    fn from(v: Vec<u8>) -> Self {
        Arg::Bytes(v)
    }
}

/// A query written once: its text with `$N` placeholders, its arguments.
#[derive(Debug, Clone)]
pub struct Query {
    pub(crate) sql: Cow<'static, str>,
    pub(crate) args: Vec<Arg>,
    /// What it does, for error messages ("reading session").
    pub(crate) context: &'static str,
}

impl Query {
    pub(crate) fn new(context: &'static str, sql: impl Into<Cow<'static, str>>) -> Self {
        Query {
            sql: sql.into(),
            args: Vec::new(),
            context,
        }
    }

    pub(crate) fn bind(mut self, arg: impl Into<Arg>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// The text as SQLite numbers placeholders (`?N`).
    pub(crate) fn for_sqlite(&self) -> String {
        self.sql.replace('$', "?")
    }
}

/// A row of either backend.
pub enum Row {
    Sqlite(SqliteRow),
    Postgres(PgRow),
}

macro_rules! each_row {
    ($self:ident, $row:ident => $e:expr) => {
        match $self {
            Row::Sqlite($row) => $e,
            Row::Postgres($row) => $e,
        }
    };
}

impl Columns for Row {
    fn text(&self, name: &str) -> StoreResult<String> {
        each_row!(self, r => r.text(name))
    }
    fn opt_text(&self, name: &str) -> StoreResult<Option<String>> {
        each_row!(self, r => r.opt_text(name))
    }
    fn int(&self, name: &str) -> StoreResult<i64> {
        each_row!(self, r => r.int(name))
    }
    fn opt_int(&self, name: &str) -> StoreResult<Option<i64>> {
        each_row!(self, r => r.opt_int(name))
    }
    fn real(&self, name: &str) -> StoreResult<f64> {
        each_row!(self, r => r.real(name))
    }
    fn flag(&self, name: &str) -> StoreResult<bool> {
        each_row!(self, r => r.flag(name))
    }
    fn bytes(&self, name: &str) -> StoreResult<Vec<u8>> {
        each_row!(self, r => r.bytes(name))
    }
}

/// Runs queries written once. Reads may go to any connection; writes go
/// where the backend serializes them.
#[async_trait]
pub trait Backend: Send + Sync {
    async fn raw_fetch_optional(&self, query: Query) -> Result<Option<Row>, sqlx::Error>;
    async fn raw_fetch_all(&self, query: Query) -> Result<Vec<Row>, sqlx::Error>;
    /// A write: the rows it changed.
    async fn raw_execute(&self, query: Query) -> Result<u64, sqlx::Error>;
    /// A write that returns rows (`… RETURNING`).
    async fn raw_write_fetch_all(&self, query: Query) -> Result<Vec<Row>, sqlx::Error>;
    /// Writes in one transaction, in order: the rows each changed, or the
    /// index of the one that failed and why (nothing is written then).
    async fn raw_transaction(&self, queries: Vec<Query>) -> Result<Vec<u64>, (usize, sqlx::Error)>;
    /// Reads that see one snapshot of the database, in order.
    async fn raw_read_snapshot(&self, queries: Vec<Query>) -> Result<Vec<Vec<Row>>, sqlx::Error>;
    /// [`crate::UserStore::agent_uid`]: atomic the way each database can be.
    async fn allocate_agent_uid(&self, user: &str, first: u32, last: u32) -> StoreResult<u32>;

    async fn fetch_optional(&self, query: Query) -> StoreResult<Option<Row>> {
        let context = query.context;
        self.raw_fetch_optional(query).await.map_err(db(context))
    }

    async fn fetch_all(&self, query: Query) -> StoreResult<Vec<Row>> {
        let context = query.context;
        self.raw_fetch_all(query).await.map_err(db(context))
    }

    async fn fetch_one(&self, query: Query) -> StoreResult<Row> {
        let context = query.context;
        self.raw_fetch_optional(query)
            .await
            .map_err(db(context))?
            .ok_or_else(|| crate::StoreError::Database(format!("{context}: no row")))
    }

    async fn write_fetch_all(&self, query: Query) -> StoreResult<Vec<Row>> {
        let context = query.context;
        self.raw_write_fetch_all(query).await.map_err(db(context))
    }

    async fn execute(&self, query: Query) -> StoreResult<u64> {
        let context = query.context;
        self.raw_execute(query).await.map_err(db(context))
    }

    async fn transaction(&self, queries: Vec<Query>) -> StoreResult<Vec<u64>> {
        let context = queries.first().map_or("writing", |q| q.context);
        self.raw_transaction(queries)
            .await
            .map_err(|(_, e)| db(context)(e))
    }
}

/// Bind `args` to a sqlx query of either backend.
macro_rules! bind_args {
    ($query:expr, $args:expr) => {{
        let mut query = $query;
        for arg in $args {
            query = match arg {
                $crate::sql::Arg::Text(v) => query.bind(v),
                $crate::sql::Arg::Int(v) => query.bind(v),
                $crate::sql::Arg::Real(v) => query.bind(v),
                $crate::sql::Arg::Flag(v) => query.bind(v),
                $crate::sql::Arg::Bytes(v) => query.bind(v),
            };
        }
        query
    }};
}
pub(crate) use bind_args;
