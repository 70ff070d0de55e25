//! The connection the writer commits on, and the values it binds.
//!
//! For a database file the writer has a connection of its own, used on the
//! writer's thread: every statement and row stays on that thread. Through
//! sqlx each commit went to the connection's thread and its rows came back
//! one by one, two threads woken per step on a machine where a wake costs
//! more than the statement. A store of one connection (`agentd run`) has it
//! too, beside the one: its commits no longer wait for that connection's
//! reads. An in-memory database, or one opened from a URL with options the
//! own connection would not see (`mode=ro`, say), commits through its pool.

use std::path::{Path, PathBuf};

use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::{OpenFlags, TransactionBehavior};
use sqlx::Row;
use sqlx::sqlite::SqlitePool;

use super::run_script;
use super::statements::Shape;
use crate::records::db;
use crate::sqlite::BUSY_TIMEOUT;
use crate::{StoreError, StoreResult};

/// Prepared statements the own connection keeps: every part of every batch
/// shape (ten slot counts of each kind, 1 to 512, two parts each).
const STATEMENT_CACHE: usize = 48;

/// One value bound by a batch.
#[derive(Debug, Clone, Copy)]
pub(super) enum Arg<'a> {
    Text(Option<&'a str>),
    Int(i64),
}

impl rusqlite::ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Arg::Text(Some(text)) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            Arg::Text(None) => ToSqlOutput::Owned(Value::Null),
            Arg::Int(n) => ToSqlOutput::Owned(Value::Integer(*n)),
        })
    }
}

/// A row a batch returns: (session, last seq or position, 0 for a session's
/// events or 1 for a message).
pub(super) type Returned = (String, i64, i64);

/// What a commit answers. `Err`: nothing was committed. `Ok(Err(_))`: it
/// was, but its rows could not be read back (the jobs must not be retried).
pub(super) type Committed = StoreResult<Result<Vec<Returned>, String>>;

/// Where the writer commits.
pub(in crate::sqlite) enum WriterConn {
    /// A connection of the pool, for each commit.
    Pooled { pool: SqlitePool },
    /// A connection of its own to the file at `path`, opened at the first
    /// commit (and again after one left it in an unknown state).
    Own {
        path: PathBuf,
        /// Its `wal_autocheckpoint`, in pages.
        checkpoint_pages: u32,
        conn: Option<rusqlite::Connection>,
        closed: bool,
    },
}

impl WriterConn {
    pub(in crate::sqlite) fn pooled(pool: SqlitePool) -> Self {
        Self::Pooled { pool }
    }

    pub(in crate::sqlite) fn own(path: PathBuf, checkpoint_pages: u32) -> Self {
        Self::Own {
            path,
            checkpoint_pages,
            conn: None,
            closed: false,
        }
    }

    /// The store is closing: let go of the connection; commits after this
    /// fail (as every statement of a closed pool does).
    pub(super) fn close(&mut self) {
        if let Self::Own { conn, closed, .. } = self {
            *conn = None;
            *closed = true;
        }
    }

    /// Commit `args` with `shape`'s statements in one transaction.
    pub(super) async fn commit(&mut self, shape: &Shape, args: &[Arg<'_>]) -> Committed {
        match self {
            Self::Pooled { pool } => commit_pooled(pool, shape.script(), args).await,
            Self::Own {
                path,
                checkpoint_pages,
                conn,
                closed,
            } => {
                if *closed {
                    return Err(StoreError::Database(
                        "appending: the store is closed".into(),
                    ));
                }
                let db = match conn {
                    Some(db) => db,
                    None => conn.insert(open(path, *checkpoint_pages).map_err(database)?),
                };
                let rows = commit_own(db, shape, args).map_err(database);
                // A failed rollback leaves a transaction open: start afresh.
                if rows.is_err() && !db.is_autocommit() {
                    *conn = None;
                }
                rows.map(Ok)
            }
        }
    }
}

fn database(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(code) => StoreError::Database(format!("appending: {e} ({code:?})")),
        None => StoreError::Database(format!("appending: {e}")),
    }
}

/// The writer's connection to `path`, set up as the pool's are (the file is
/// already in WAL mode: the pool opened it first).
fn open(path: &Path, checkpoint_pages: u32) -> rusqlite::Result<rusqlite::Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = rusqlite::Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.execute_batch(&format!(
        "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; \
         PRAGMA wal_autocheckpoint = {checkpoint_pages};"
    ))?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// The batch's statements one by one on this thread; rolled back (when the
/// transaction drops) if any fails.
fn commit_own(
    conn: &mut rusqlite::Connection,
    shape: &Shape,
    args: &[Arg<'_>],
) -> rusqlite::Result<Vec<Returned>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut rows = Vec::new();
    let mut rest = args;
    for part in &shape.parts {
        let Some((values, after)) = rest.split_at_checked(part.binds) else {
            return Err(rusqlite::Error::InvalidParameterCount(
                rest.len(),
                part.binds,
            ));
        };
        rest = after;
        let mut statement = tx.prepare_cached(&part.sql)?;
        let values = rusqlite::params_from_iter(values);
        if part.returns_rows {
            let mut returned = statement.query(values)?;
            while let Some(row) = returned.next()? {
                rows.push((row.get(0)?, row.get(1)?, row.get(2)?));
            }
        } else {
            statement.execute(values)?;
        }
    }
    if !rest.is_empty() {
        return Err(rusqlite::Error::InvalidParameterCount(
            args.len(),
            args.len() - rest.len(),
        ));
    }
    tx.commit()?;
    Ok(rows)
}

/// The batch as one script, sent in one round trip to the pool connection's
/// thread (rolled back by [`run_script`] if a statement fails).
async fn commit_pooled(pool: &SqlitePool, script: &str, args: &[Arg<'_>]) -> Committed {
    let mut query = sqlx::query(script);
    for arg in args {
        query = match *arg {
            Arg::Text(text) => query.bind(text),
            Arg::Int(n) => query.bind(n),
        };
    }
    let rows = run_script(pool, query).await.map_err(db("appending"))?;
    Ok(rows
        .iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
        .collect::<Result<Vec<Returned>, sqlx::Error>>()
        .map_err(|e| e.to_string()))
}
