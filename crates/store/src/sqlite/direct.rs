//! Short reads on the thread that asks. Through sqlx a statement goes to its
//! connection's thread and its rows come back to the caller's: two threads
//! woken per statement, on machines where a wake costs more than a point
//! read. The reads a turn makes as it starts (its session, mounts, rules,
//! latest compaction and checkpoints, its transcript's tail, which blobs are
//! stored) run here instead, on a read-only connection taken from a few kept
//! for the purpose, and block the asking thread only as long as SQLite
//! works. Under WAL a reader does not wait for writers. When SQLite answers
//! anything but rows (busy, a log being recovered, a file it cannot open:
//! most of that shows only at the first statement), the read is handed back
//! to the pool (`None`), which waits on a thread of its own, and the
//! connection is dropped. (SQLite itself may still sleep briefly while
//! starting a read under heavy write contention, before it gives up.)

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use rusqlite::{OpenFlags, Row, ToSql};

use crate::{StoreError, StoreResult};

/// Connections kept between reads, at least; with more cores, one per core
/// (about as many threads read at once: the runtimes' workers). More are
/// opened when needed and closed after.
const KEPT_AT_LEAST: usize = 4;

/// Prepared statements each connection keeps (a turn's start uses ~8).
const STATEMENT_CACHE: usize = 32;

#[derive(Debug)]
pub(in crate::sqlite) struct DirectReads {
    path: PathBuf,
    idle: Mutex<Vec<rusqlite::Connection>>,
    kept: usize,
    /// The store was closed: its files are let go, reads go to the pool
    /// (which refuses them).
    closed: AtomicBool,
}

impl DirectReads {
    /// Reads of the database file at `path` (already open and in WAL mode).
    pub(in crate::sqlite) fn new(path: &Path) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            path: path.to_path_buf(),
            idle: Mutex::default(),
            kept: cores.max(KEPT_AT_LEAST),
            closed: AtomicBool::new(false),
        }
    }

    /// Close the kept connections; later reads go to the pool.
    pub(in crate::sqlite) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.lock().clear();
    }

    /// Every row of `sql` with `args` bound to `$1`, `$2`, …, each read by
    /// `decode`; `None` when the read must go through the pool instead.
    pub(in crate::sqlite) fn rows<T>(
        &self,
        sql: &str,
        args: &[&dyn ToSql],
        context: &str,
        decode: impl Fn(&Row<'_>) -> StoreResult<T>,
    ) -> Option<StoreResult<Vec<T>>> {
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        let conn = match self.take() {
            Ok(conn) => conn,
            Err(err) => {
                tracing::debug!(%err, "no connection for a read on this thread");
                return None;
            }
        };
        match query(&conn, sql, args, &decode) {
            Ok(rows) => {
                self.give_back(conn);
                Some(rows.map_err(|err| match err {
                    StoreError::Corrupt(why) => StoreError::Corrupt(format!("{context}: {why}")),
                    other => other,
                }))
            }
            Err(err) => {
                tracing::debug!(%err, context, "a read on this thread goes to the pool");
                None
            }
        }
    }

    fn take(&self) -> rusqlite::Result<rusqlite::Connection> {
        if let Some(conn) = self.lock().pop() {
            return Ok(conn);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = rusqlite::Connection::open_with_flags(&self.path, flags)?;
        // Busy means "ask the pool": never sleep on this thread.
        conn.busy_timeout(std::time::Duration::ZERO)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(conn)
    }

    fn give_back(&self, conn: rusqlite::Connection) {
        let mut idle = self.lock();
        if idle.len() < self.kept && !self.closed.load(Ordering::Acquire) {
            idle.push(conn);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<rusqlite::Connection>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The outer `Err` is SQLite's (the read did not happen); the inner one a
/// row that did not decode.
fn query<T>(
    conn: &rusqlite::Connection,
    sql: &str,
    args: &[&dyn ToSql],
    decode: &impl Fn(&Row<'_>) -> StoreResult<T>,
) -> rusqlite::Result<StoreResult<Vec<T>>> {
    let mut statement = conn.prepare_cached(sql)?;
    debug_assert_eq!(statement.parameter_count(), args.len(), "{sql}");
    // By name: `$2` may come before `$1` in a statement's text.
    for (n, value) in args.iter().enumerate() {
        let name = format!("${}", n + 1);
        let index = statement
            .parameter_index(&name)?
            .ok_or(rusqlite::Error::InvalidParameterName(name))?;
        statement.raw_bind_parameter(index, value)?;
    }
    let mut rows = statement.raw_query();
    let mut decoded = Vec::new();
    while let Some(row) = rows.next()? {
        match decode(row) {
            Ok(value) => decoded.push(value),
            Err(err) => return Ok(Err(err)),
        }
    }
    Ok(Ok(decoded))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Columns;

    /// A WAL database with one table of `(id, n)` rows.
    fn database() -> (tempfile::TempDir, PathBuf, rusqlite::Connection) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("direct.db");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; CREATE TABLE t (id TEXT, n INTEGER);
             INSERT INTO t VALUES ('a', 1), ('b', 2), ('c', 3);",
        )
        .unwrap();
        (dir, path, conn)
    }

    fn id(row: &Row<'_>) -> StoreResult<String> {
        row.text("id")
    }

    #[test]
    fn parameters_bind_by_number_wherever_they_stand() {
        let (_dir, path, _conn) = database();
        let reads = DirectReads::new(&path);
        let sql = "SELECT id FROM t WHERE n <= $2 AND id <> $1 ORDER BY id";
        let rows = reads
            .rows(sql, &[&"a", &2_i64], "test", id)
            .unwrap()
            .unwrap();
        assert_eq!(rows, ["b"]);
        // Again, on the kept connection and its cached statement.
        let rows = reads
            .rows(sql, &[&"c", &3_i64], "test", id)
            .unwrap()
            .unwrap();
        assert_eq!(rows, ["a", "b"]);
        assert_eq!(reads.lock().len(), 1);
        // Closed: its connections go, and so do its reads.
        reads.close();
        assert!(reads.lock().is_empty());
        assert!(reads.rows(sql, &[&"c", &3_i64], "test", id).is_none());
    }

    #[test]
    fn a_read_sees_what_another_connection_committed_since() {
        let (_dir, path, conn) = database();
        let reads = DirectReads::new(&path);
        let count = |reads: &DirectReads| {
            let rows = reads.rows("SELECT id FROM t", &[], "test", id);
            rows.unwrap().unwrap().len()
        };
        assert_eq!(count(&reads), 3);
        conn.execute("INSERT INTO t VALUES ('d', 4)", []).unwrap();
        assert_eq!(count(&reads), 4);
    }

    #[test]
    fn a_locked_database_is_left_to_the_pool_and_a_bad_row_is_an_error() {
        let (_dir, path, conn) = database();
        let reads = DirectReads::new(&path);
        // A row that does not decode: an error, not a fallback.
        let read = reads.rows("SELECT n AS id FROM t", &[], "test", id);
        assert!(
            matches!(read, Some(Err(StoreError::Corrupt(_)))),
            "{read:?}"
        );
        // A statement SQLite refuses: the pool's to answer (and report).
        assert!(
            reads
                .rows("SELECT id FROM missing", &[], "test", id)
                .is_none()
        );
        drop(reads);
        // Another connection holding the file exclusively: this thread does
        // not wait for it.
        conn.execute_batch("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE;")
            .unwrap();
        let fresh = DirectReads::new(&path);
        let started = std::time::Instant::now();
        assert!(fresh.rows("SELECT id FROM t", &[], "test", id).is_none());
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }
}
