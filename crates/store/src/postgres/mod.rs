//! PostgreSQL backend, for agentd run as shared infrastructure: a connection
//! pool, its own migration set (`migrations/postgres`), and the same semantics
//! as the SQLite backend. Writes that must be atomic are single statements or
//! transactions; the per-session `seq` is taken from `sessions.last_seq` under
//! that row's lock, so concurrent appends (from any number of processes)
//! serialize per session and never leave gaps.

mod agent_uids;
mod blobs;
pub mod cluster;
mod events;
mod fence;
mod messages;
mod search_index;
mod turns;

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};

use crate::migrate::{MigrationSet, migration_set, migrator};
use crate::prelude::*;
use crate::records::execute;
use crate::{StoreError, StoreResult};

const POOL_SIZE: u32 = 10;
/// How long a request waits for a connection: short, so that while the
/// database is down requests fail fast instead of hanging (the pool
/// reconnects by itself once it is back).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// The migration set (see `crate::migrate`).
const MIGRATIONS: MigrationSet = migration_set!(
    "postgres",
    (1, "0001", "init"),
    (2, "0002", "session_rules"),
    (3, "0003", "checkpoints_compactions"),
    (4, "0004", "cluster"),
    (5, "0005", "agent_uids"),
    (6, "0006", "access"),
    (7, "0007", "health_probe"),
    (8, "0008", "session_mounts"),
    (9, "0009", "existing_workspace"),
    (10, "0010", "session_thinking"),
    (11, "0011", "session_search"),
    (12, "0012", "webhook_deliveries"),
    (13, "0013", "signing_keys"),
    (14, "0014", "user_identities"),
    (15, "0015", "search_deferred"),
    (16, "0016", "session_lookups"),
    (17, "0017", "spend_days"),
);

/// The PostgreSQL store. Cheap to clone; clones share the pool.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// Appends send `NOTIFY agentd_events` (cluster mode; see `events`).
    notify_events: bool,
    /// How long a fenced message append's transaction may idle holding its
    /// turn's lease row (see `messages`): under the lease timeout.
    fence_hold_ms: u64,
}

/// [`PostgresStore::fence_hold_ms`] until [`PostgresStore::with_lease_timeout`]:
/// the shortest lease timeout agentd allows (2 s).
const DEFAULT_FENCE_HOLD_MS: u64 = 2000;

impl PostgresStore {
    /// Connect to `postgres://user@host:port/db` (or `postgresql://…`) and
    /// migrate. `?options=-c search_path=NAME` selects a schema.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(StoreError::Database(format!(
                "not a postgres url: {url:?} (expected postgres://user@host/db)"
            )));
        }
        let options = PgConnectOptions::from_str(url).map_err(|e| {
            StoreError::Database(format!("invalid postgres url {}: {e}", redact(url)))
        })?;
        Self::connect_with(options).await
    }

    /// Connect with explicit options and migrate. An unreachable server fails
    /// at once (one attempt) rather than after the pool's acquire timeout.
    pub async fn connect_with(options: PgConnectOptions) -> StoreResult<Self> {
        let mut conn = PgConnection::connect_with(&options)
            .await
            .map_err(|e| StoreError::Database(format!("connecting to postgres: {e}")))?;
        migrator(MIGRATIONS)
            .run(&mut conn)
            .await
            .map_err(|e| StoreError::Database(format!("migrating postgres database: {e}")))?;
        let _ = conn.close().await;
        let pool = PgPoolOptions::new()
            .max_connections(POOL_SIZE)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_lazy_with(options);
        Ok(Self {
            pool,
            notify_events: false,
            fence_hold_ms: DEFAULT_FENCE_HOLD_MS,
        })
    }

    /// Every event append also notifies other nodes (cluster mode). Off by
    /// default: NOTIFY serializes commits database-wide.
    pub fn with_event_notifications(mut self) -> Self {
        self.notify_events = true;
        self
    }

    /// The cluster's lease timeout: a fenced message append frozen between
    /// its two statements holds its lease row for one timeout at most. Not
    /// less: the idle clock also runs while a slow node (which keeps its
    /// leases until 4/5 of a timeout of silence) sends the message, and
    /// ending a live node's transaction would fail its turn; a takeover
    /// waits one heartbeat longer at worst.
    pub fn with_lease_timeout(mut self, timeout: Duration) -> Self {
        // PostgreSQL's setting is an int of milliseconds.
        let hold = timeout.as_millis().min(i32::MAX as u128);
        self.fence_hold_ms = u64::try_from(hold).unwrap_or(DEFAULT_FENCE_HOLD_MS);
        self
    }

    /// The underlying pool, for modules that add tables of their own.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Close all connections (waits for checked-out ones to come back).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Writers need no lock of this process: PostgreSQL locks rows. (For the
    /// code shared with SQLite, which takes one.)
    async fn write_guard(&self) {}

    fn writer(&self) -> &sqlx::PgPool {
        &self.pool
    }

    /// Every read goes through the pool: a PostgreSQL statement is a network
    /// round trip anyway. (For the code shared with SQLite, which reads some
    /// rows on the asking thread.)
    fn read_here<T>(
        &self,
        _sql: &str,
        _args: &[&dyn rusqlite::ToSql],
        _context: &str,
        _decode: impl Fn(&rusqlite::Row<'_>) -> StoreResult<T>,
    ) -> Option<StoreResult<Vec<T>>> {
        None
    }

    /// A read-only transaction over one snapshot.
    async fn begin_read(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, sqlx::Error> {
        self.pool.begin().await
    }
}

crate::queries::roles!(PostgresStore, sqlx::Postgres);
crate::queries::search::find_sessions_impl!(
    PostgresStore,
    crate::queries::search::POSTGRES_SEARCH,
    crate::SearchText::terms
);

/// The URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.find(':') {
                Some(colon) => format!("{}:***{}", &url[..scheme + 3 + colon], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[async_trait]
impl HealthStore for PostgresStore {
    async fn ping(&self) -> StoreResult<()> {
        execute(&self.pool, sqlx::query("SELECT 1"), "pinging postgres").await?;
        Ok(())
    }

    async fn probe_write(&self) -> StoreResult<()> {
        let query = sqlx::query(
            "INSERT INTO health_probe (id, at) VALUES (1, now()) \
             ON CONFLICT (id) DO UPDATE SET at = excluded.at",
        );
        execute(&self.pool, query, "probing a write").await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{MIGRATIONS, redact};

    #[test]
    fn every_migration_file_is_embedded() {
        crate::migrate::assert_every_file_embedded("postgres", MIGRATIONS);
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
    }
}
