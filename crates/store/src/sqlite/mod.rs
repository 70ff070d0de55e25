//! SQLite backend: one database file in WAL mode, a small connection pool for
//! readers, and writes serialized in-process so `seq` and `position`
//! assignment never race (SQLite allows one writer anyway). Event appends go
//! through a group-commit writer task (`writer`).

mod agent_uids;
mod blobs;
mod direct;
mod events;
mod recent_commit;
mod search_index;
mod turns;
mod writer;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use tokio::sync::{Mutex, MutexGuard, mpsc};

use crate::migrate::{MigrationSet, migration_set, migrator};
use crate::prelude::*;
use crate::records::{execute, now, to_ms};
use crate::{StoreError, StoreResult};

/// Connections for a file database: readers run in parallel under WAL.
const FILE_POOL_SIZE: u32 = 8;
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// SQLite's own `wal_autocheckpoint`.
const DEFAULT_CHECKPOINT_PAGES: u32 = 1000;
/// How long a statement waits for [`Connections::One`]'s connection.
const ONE_CONNECTION_WAIT: Duration = Duration::from_secs(600);
/// Rows a write connection's thread may hand back before it waits for its
/// caller to take them (sqlx's default is 50). A write holds the write lock
/// until its rows are all read, and on a busy runtime each wait for the
/// caller to catch up kept it held for longer.
const WRITE_ROW_BUFFER: usize = 1024;

/// The migration set (see `crate::migrate`).
const MIGRATIONS: MigrationSet = migration_set!(
    "sqlite",
    (1, "0001", "init"),
    (2, "0002", "session_rules"),
    (3, "0003", "checkpoints_compactions"),
    (4, "0004", "agent_uids"),
    (5, "0005", "access"),
    (6, "0006", "health_probe"),
    (7, "0007", "session_mounts"),
    (8, "0008", "existing_workspace"),
    (9, "0009", "session_thinking"),
    (10, "0010", "session_search"),
    (11, "0011", "webhook_deliveries"),
    (12, "0012", "signing_keys"),
    (13, "0013", "user_identities"),
    (14, "0014", "session_lookups"),
    (15, "0015", "search_deferred"),
    (16, "0016", "spend_days"),
);

/// How many connections a [`SqliteStore`] opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connections {
    /// Readers in parallel, writers of their own: for a server.
    Pooled,
    /// One for everything but event appends, opened once: for a process of
    /// one session at a time (`agentd run`), where each connection opened
    /// would cost more (a schema parse, its own prepared statements) than
    /// waiting for the one in use. Every statement still runs; they take
    /// turns. The event writer opens its own at its first commit (a file
    /// named alone; see `writer::conn`): commits stay off that queue.
    One,
    /// As [`One`](Self::One), for a process that ends with its run (`agentd
    /// run`, `agentd claude`): on a file named alone, the connection is never
    /// closed (see [`LEFT_OPEN`]).
    OneShot,
}

/// The pools of [`Connections::OneShot`] stores, never closed. SQLite's last
/// close folds the whole write-ahead log into the database file and syncs
/// it: all of it each time, since every open rebuilds the log's index and
/// forgets what was folded. A one-shot run paid that on its exit path (its
/// exit then waited for the sync), and the close was mostly cut short by the
/// exit, so the next opener replayed the log anyway. Left open, the process
/// exits as after a crash, which WAL is made for: the commits are in the log,
/// the next opener replays it, and the event writer's checkpoints bound it.
/// Like a server's commits between checkpoints (`synchronous = NORMAL`), they
/// reach the disk with the next checkpoint or the kernel's write-back: a
/// power loss may take the last ones, never the file's consistency.
static LEFT_OPEN: std::sync::Mutex<Vec<SqlitePool>> = std::sync::Mutex::new(Vec::new());

/// The embedded SQLite store. Cheap to clone; clones share the pool and the
/// event writer task, which runs on a thread of its own.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    /// Reads.
    pool: SqlitePool,
    /// Writes: connections of their own, so a write (an event commit, say)
    /// never waits for a connection behind a queue of reads. SQLite runs one
    /// writer at a time anyway. The same pool as `pool` for `:memory:`.
    writes: SqlitePool,
    /// Held for the whole of every write transaction.
    write_lock: Arc<Mutex<()>>,
    /// Taken before `write_lock` by every writer except the event writer, so
    /// at most one of them queues on `write_lock` at a time: an event commit
    /// waits for at most two other writes, not for every one of hundreds of
    /// turns (events are what clients are waiting to see).
    write_queue: Arc<Mutex<()>>,
    /// Event appends, committed in groups by the writer task.
    appends: mpsc::Sender<writer::AppendJob>,
    /// When the event writer (or a probe) last committed.
    recent_commit: Arc<recent_commit::RecentCommit>,
    /// Reads on the asking thread (see `direct`): a server's file only.
    direct: Option<Arc<direct::DirectReads>>,
}

impl SqliteStore {
    /// Open (creating if missing) the database file at `path` and migrate it.
    /// Missing parent directories are created private to the user (0700).
    pub async fn open(path: &Path) -> StoreResult<Self> {
        Self::open_with_connections(path, Connections::Pooled).await
    }

    /// [`open`](Self::open) with the connections given.
    pub async fn open_with_connections(path: &Path, connections: Connections) -> StoreResult<Self> {
        prepare_file(path)?;
        let options = SqliteConnectOptions::new().filename(path);
        Self::open_with(options, connections, true).await
    }

    /// Open from a URL: `sqlite://path/to.db`, `sqlite:relative.db`, or
    /// `sqlite::memory:` (a private in-memory database, for tests).
    pub async fn open_url(url: &str) -> StoreResult<Self> {
        Self::open_url_with_connections(url, Connections::Pooled).await
    }

    /// [`open_url`](Self::open_url) with the connections given (an in-memory
    /// database always has one).
    pub async fn open_url_with_connections(
        url: &str,
        connections: Connections,
    ) -> StoreResult<Self> {
        // sqlx would take any other string as a file name.
        if !url.starts_with("sqlite:") {
            return Err(StoreError::Database(format!(
                "not a sqlite url: {url:?} (expected sqlite://path or sqlite::memory:)"
            )));
        }
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::Database(format!("invalid sqlite url {url:?}: {e}")))?;
        // Each connection to `:memory:` would be its own database (or, with
        // sqlx's shared cache, one that fails with SQLITE_LOCKED under
        // contention): exactly one, never let go.
        if url.contains(":memory:") || url.contains("mode=memory") {
            return Self::open_with(options, Connections::One, false).await;
        }
        prepare_file(options.get_filename())?;
        // The event writer's own connection opens the file by name alone: a
        // URL's options (`mode=ro`, `immutable`, a VFS) would not reach it.
        let own_writer = !url.contains('?');
        Self::open_with(options, connections, own_writer).await
    }

    /// With `own_writer`, the event writer opens a connection of its own to
    /// the file (see `writer::conn`).
    async fn open_with(
        options: SqliteConnectOptions,
        connections: Connections,
        own_writer: bool,
    ) -> StoreResult<Self> {
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            // No memory map (`mmap_size`): each commit that grew the file made
            // every connection remap it, and the unmaps' TLB shootdowns cost
            // more than the page copies a map saves (warm turns and event
            // rates both measured faster without).
            .busy_timeout(BUSY_TIMEOUT);
        // With a pool, WAL checkpoints run beside the event writer, not in
        // its commits (`writer::checkpoints`); alone, in its commits.
        let options = match connections {
            Connections::Pooled => options.pragma(
                "wal_autocheckpoint",
                writer::checkpoints::FALLBACK_PAGES.to_string(),
            ),
            Connections::One | Connections::OneShot => options,
        };

        let pool_options = match connections {
            // Everything waits for the one connection, a long write (a fork's
            // copy, another process's lock for up to `BUSY_TIMEOUT` each try)
            // included: not sqlx's 30 s and a "pool timed out" error.
            Connections::One | Connections::OneShot => SqlitePoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .acquire_timeout(ONE_CONNECTION_WAIT)
                .idle_timeout(None)
                .max_lifetime(None),
            Connections::Pooled => SqlitePoolOptions::new().max_connections(FILE_POOL_SIZE),
        };
        // A local file connection does not go stale; skip the ping per acquire.
        let pool = pool_options
            .test_before_acquire(false)
            .connect_with(options.clone())
            .await
            .map_err(|e| StoreError::Database(format!("opening sqlite database: {e}")))?;

        migrator(MIGRATIONS)
            .run(&pool)
            .await
            .map_err(|e| StoreError::Database(format!("migrating sqlite database: {e}")))?;

        if connections == Connections::OneShot && own_writer {
            LEFT_OPEN
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(pool.clone());
        }
        let writes = match connections {
            Connections::One | Connections::OneShot => pool.clone(),
            // Up to three connections, not one, for the writes other than
            // the event writer's (it has its own): sqlx hands a released
            // connection back to the pool from a task on the releasing
            // runtime, so the next writer must not wait for that task
            // (`write_lock` still admits one writer at a time). They open when
            // first needed, and each costs a schema parse and its own prepared
            // statements.
            Connections::Pooled => SqlitePoolOptions::new()
                .max_connections(3)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .test_before_acquire(false)
                .connect_with(options.clone().row_buffer_size(WRITE_ROW_BUFFER))
                .await
                .map_err(|e| StoreError::Database(format!("opening sqlite database: {e}")))?,
        };
        let write_lock = Arc::new(Mutex::new(()));
        // The event writer has a connection of its own (see `writer::conn`),
        // opened at its first commit.
        let writer_conn = if !own_writer {
            writer::WriterConn::pooled(writes.clone())
        } else {
            // Alone, the writer checkpoints in its commits at SQLite's
            // default; pooled, checkpoints run beside it.
            let checkpoint_pages = match connections {
                Connections::Pooled => writer::checkpoints::FALLBACK_PAGES,
                Connections::One | Connections::OneShot => DEFAULT_CHECKPOINT_PAGES,
            };
            writer::WriterConn::own(options.get_filename().to_path_buf(), checkpoint_pages)
        };
        let checkpoint_on = (connections == Connections::Pooled).then(|| pool.clone());
        // Not for one connection (`agentd run`): each connection opened
        // costs a schema parse, more than the hops it would save there.
        let direct = (connections == Connections::Pooled && own_writer)
            .then(|| Arc::new(direct::DirectReads::new(options.get_filename())));
        let recent_commit = Arc::new(recent_commit::RecentCommit::default());
        let appends = writer::spawn(
            writer_conn,
            writes.clone(),
            write_lock.clone(),
            checkpoint_on,
            recent_commit.clone(),
        );
        Ok(Self {
            pool,
            writes,
            write_lock,
            write_queue: Arc::new(Mutex::new(())),
            appends,
            recent_commit,
            direct,
        })
    }

    /// The underlying pool, for modules that add tables of their own.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Close all connections (waits for checked-out ones to come back).
    pub async fn close(&self) {
        if let Some(direct) = &self.direct {
            direct.close();
        }
        self.writes.close().await;
        self.pool.close().await;
    }

    /// Taken around every write transaction so that writers queue fairly here
    /// instead of spinning on SQLITE_BUSY (the event writer jumps the queue).
    async fn write_guard(&self) -> WriteGuard<'_> {
        let queued = self.write_queue.lock().await;
        WriteGuard {
            _lock: self.write_lock.lock().await,
            _queued: queued,
        }
    }

    /// A write transaction (take `write_guard` first): IMMEDIATE, so it holds
    /// SQLite's write lock from the start instead of upgrading a read later.
    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, sqlx::Error> {
        self.writes.begin_with("BEGIN IMMEDIATE").await
    }

    /// A read transaction: it sees one snapshot (WAL) from its first read on.
    async fn begin_read(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, sqlx::Error> {
        self.pool.begin().await
    }

    /// The pool writes run on (with `write_guard` held).
    fn writer(&self) -> &SqlitePool {
        &self.writes
    }

    /// Every row of `sql`, read on this thread (see `direct`); `None`: ask
    /// the pool.
    fn read_here<T>(
        &self,
        sql: &str,
        args: &[&dyn rusqlite::ToSql],
        context: &str,
        decode: impl Fn(&rusqlite::Row<'_>) -> StoreResult<T>,
    ) -> Option<StoreResult<Vec<T>>> {
        self.direct.as_ref()?.rows(sql, args, context, decode)
    }
}

/// Held for a write: the store's write lock, then the place in the queue.
struct WriteGuard<'a> {
    _lock: MutexGuard<'a, ()>,
    _queued: MutexGuard<'a, ()>,
}

crate::queries::roles!(SqliteStore, sqlx::Sqlite);
crate::queries::search::find_sessions_impl!(
    SqliteStore,
    crate::queries::search::SQLITE_SEARCH,
    crate::SearchText::fts5_query
);

/// Create the database file's directory (0700) and the file itself (0600) so
/// that transcripts are private from the start; SQLite gives the WAL and SHM
/// files the same permissions as the database file.
fn prepare_file(path: &Path) -> StoreResult<()> {
    let io = |what: &str, e: std::io::Error| {
        StoreError::Database(format!("{what} {}: {e}", path.display()))
    };
    // Only directories we create get 0700; an existing one is the user's.
    if let Some(parent) = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && !p.exists())
    {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(parent)
            .map_err(|e| io("creating the directory of", e))?;
    }
    let mut file = std::fs::OpenOptions::new();
    file.write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
    file.open(path).map_err(|e| io("creating", e))?;
    Ok(())
}

#[async_trait]
impl HealthStore for SqliteStore {
    async fn probe_write(&self) -> StoreResult<()> {
        if self.recent_commit.within(recent_commit::PROBE_FRESH) {
            return Ok(());
        }
        let _write = self.write_guard().await;
        let query = sqlx::query(
            "INSERT INTO health_probe (id, at) VALUES (1, ?) \
             ON CONFLICT (id) DO UPDATE SET at = excluded.at",
        )
        .bind(to_ms(now()));
        match execute(self.writer(), query, "probing a write").await {
            Ok(_) => self.recent_commit.committed(),
            Err(err) => {
                self.recent_commit.failed();
                return Err(err);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::UsageWindow;
    use chrono::{Duration, Utc};

    #[test]
    fn every_migration_file_is_embedded() {
        crate::migrate::assert_every_file_embedded("sqlite", MIGRATIONS);
    }

    /// A database from before spend was kept by day keeps what it spent.
    #[tokio::test]
    async fn spend_from_before_days_is_carried_into_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let options = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true);
        let old = SqlitePool::connect_with(options).await.unwrap();
        let before_days = MIGRATIONS.iter().position(|m| m.1 == "spend_days").unwrap();
        migrator(&MIGRATIONS[..before_days])
            .run(&old)
            .await
            .unwrap();
        let today = Utc::now()
            .date_naive()
            .and_hms_opt(0, 0, 0)
            .unwrap()
            .and_utc();
        let yesterday = today - Duration::days(1);
        for (owner, at, usd) in [
            ("alice", yesterday + Duration::hours(10), 0.5),
            ("alice", today + Duration::hours(1), 0.25),
            ("alice", today + Duration::hours(2), 0.125),
            ("bob", today + Duration::hours(1), 4.0),
        ] {
            sqlx::query("INSERT INTO spend (owner, at, cost_usd) VALUES (?, ?, ?)")
                .bind(owner)
                .bind(to_ms(at))
                .bind(usd)
                .execute(&old)
                .await
                .unwrap();
        }
        old.close().await;

        let store = SqliteStore::open(&path).await.unwrap();
        let days: Vec<(String, i64)> =
            sqlx::query_as("SELECT owner, day FROM spend_days ORDER BY owner, day")
                .fetch_all(store.pool())
                .await
                .unwrap();
        let (today_ms, yesterday_ms) = (to_ms(today), to_ms(yesterday));
        let expected = [
            ("alice", yesterday_ms),
            ("alice", today_ms),
            ("bob", today_ms),
        ]
        .map(|(owner, day)| (owner.to_string(), day));
        assert_eq!(days, expected, "one row per owner and day, at its midnight");
        let window = UsageWindow {
            turns_since: today,
            day_start: today,
            month_start: yesterday,
        };
        let usage = store.user_usage("alice", window).await.unwrap();
        assert_eq!((usage.spend_day_usd, usage.spend_month_usd), (0.375, 0.875));
        store.record_spend("alice", 1.0).await.unwrap();
        let usage = store.user_usage("alice", window).await.unwrap();
        assert_eq!((usage.spend_day_usd, usage.spend_month_usd), (1.375, 1.875));
    }
}
