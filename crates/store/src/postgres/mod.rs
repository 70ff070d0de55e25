//! PostgreSQL backend, for agentd run as shared infrastructure: a connection
//! pool, its own migration set (`migrations/postgres`), and the same semantics
//! as the SQLite backend. Writes that must be atomic are single statements or
//! transactions; the per-session `seq` is taken from `sessions.last_seq` under
//! that row's lock, so concurrent appends (from any number of processes)
//! serialize per session and never leave gaps.

mod agent_uids;
mod backend;
mod blobs;
pub mod cluster;
mod events;
mod messages;
mod turns;
mod util;

use std::borrow::Cow;
use std::str::FromStr;
use std::time::Duration;

use agentd_protocol::{Event, EventEnvelope, Message, TurnStatus};
use async_trait::async_trait;
use sqlx::Connection;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};

use crate::prelude::*;
use crate::{
    CheckpointRecord, CompactionRecord, LatestCheckpoints, StoreError, StoreResult, StoredMessage,
    TurnRecord, TurnStart,
};

const POOL_SIZE: u32 = 10;
/// How long a request waits for a connection: short, so that while the
/// database is down requests fail fast instead of hanging (the pool
/// reconnects by itself once it is back).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// The migration set, embedded at build time. Append new files here; applied
/// migrations must never change (sqlx checks their checksums).
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "init",
        include_str!("../../migrations/postgres/0001_init.sql"),
    ),
    (
        2,
        "session_rules",
        include_str!("../../migrations/postgres/0002_session_rules.sql"),
    ),
    (
        3,
        "checkpoints_compactions",
        include_str!("../../migrations/postgres/0003_checkpoints_compactions.sql"),
    ),
    (
        4,
        "cluster",
        include_str!("../../migrations/postgres/0004_cluster.sql"),
    ),
    (
        5,
        "agent_uids",
        include_str!("../../migrations/postgres/0005_agent_uids.sql"),
    ),
    (
        6,
        "access",
        include_str!("../../migrations/postgres/0006_access.sql"),
    ),
    (
        7,
        "health_probe",
        include_str!("../../migrations/postgres/0007_health_probe.sql"),
    ),
];

fn migrator() -> Migrator {
    let migrations = MIGRATIONS
        .iter()
        .map(|(version, description, sql)| {
            Migration::new(
                *version,
                Cow::Borrowed(*description),
                MigrationType::Simple,
                Cow::Borrowed(*sql),
                false,
            )
        })
        .collect::<Vec<_>>();
    Migrator {
        migrations: Cow::Owned(migrations),
        ..Migrator::DEFAULT
    }
}

/// The PostgreSQL store. Cheap to clone; clones share the pool.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// Appends send `NOTIFY agentd_events` (cluster mode; see `events`).
    notify_events: bool,
}

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
        migrator()
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
        })
    }

    /// Every event append also notifies other nodes (cluster mode). Off by
    /// default: NOTIFY serializes commits database-wide.
    pub fn with_event_notifications(mut self) -> Self {
        self.notify_events = true;
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

    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, sqlx::Error> {
        self.pool.begin().await
    }
}

crate::history::history_impl!(PostgresStore);

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
impl TranscriptStore for PostgresStore {
    async fn append_message(
        &self,
        session_id: &str,
        turn_id: Option<&str>,
        message: &Message,
    ) -> StoreResult<StoredMessage> {
        self.append_message_impl(session_id, turn_id, message).await
    }

    async fn messages(&self, session_id: &str) -> StoreResult<Vec<StoredMessage>> {
        crate::queries::parts::messages(self, session_id).await
    }

    async fn messages_from(
        &self,
        session_id: &str,
        from_position: u64,
    ) -> StoreResult<Vec<StoredMessage>> {
        self.messages_from_impl(session_id, from_position).await
    }

    async fn add_compaction(&self, record: &CompactionRecord) -> StoreResult<()> {
        self.add_compaction_impl(record).await
    }

    async fn latest_compaction(&self, session_id: &str) -> StoreResult<Option<CompactionRecord>> {
        self.latest_compaction_impl(session_id).await
    }

    async fn turn_position(&self, session_id: &str, turn_id: &str) -> StoreResult<Option<i64>> {
        self.turn_position_impl(session_id, turn_id).await
    }

    async fn truncate_history(&self, session_id: &str, from_position: i64) -> StoreResult<u64> {
        self.truncate_history_impl(session_id, from_position).await
    }
}

#[async_trait]
impl EventLog for PostgresStore {
    async fn append_event(&self, session_id: &str, event: &Event) -> StoreResult<EventEnvelope> {
        self.append_event_impl(session_id, event).await
    }

    async fn append_events(
        &self,
        session_id: &str,
        events: &[Event],
    ) -> StoreResult<Vec<EventEnvelope>> {
        self.append_events_impl(session_id, events).await
    }

    async fn events_after(
        &self,
        session_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<EventEnvelope>> {
        crate::queries::parts::events_after(self, session_id, after, limit).await
    }
}

#[async_trait]
impl TurnStore for PostgresStore {
    async fn start_turn(
        &self,
        session_id: &str,
        turn_id: &str,
        client_request_id: Option<&str>,
    ) -> StoreResult<TurnStart> {
        self.start_turn_impl(session_id, turn_id, client_request_id)
            .await
    }

    async fn finish_turn(&self, turn_id: &str, status: TurnStatus) -> StoreResult<()> {
        crate::queries::parts::finish_turn(self, turn_id, status).await
    }

    async fn running_turns(&self) -> StoreResult<Vec<TurnRecord>> {
        crate::queries::parts::running_turns(self).await
    }

    async fn find_turn(
        &self,
        session_id: &str,
        client_request_id: &str,
    ) -> StoreResult<Option<TurnRecord>> {
        crate::queries::parts::find_turn(self, session_id, client_request_id).await
    }
}

#[async_trait]
impl HealthStore for PostgresStore {
    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(|_| ())
            .map_err(|e| StoreError::Database(format!("pinging postgres: {e}")))
    }

    async fn probe_write(&self) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO health_probe (id, at) VALUES (1, now()) \
             ON CONFLICT (id) DO UPDATE SET at = excluded.at",
        )
        .execute(&self.pool)
        .await
        .map(|_| ())
        .map_err(|e| StoreError::Database(format!("probing a write: {e}")))
    }
}

#[async_trait]
impl CheckpointStore for PostgresStore {
    async fn put_blobs(&self, blobs: &[(String, Vec<u8>)]) -> StoreResult<()> {
        self.put_blobs_impl(blobs).await
    }

    async fn missing_blobs(&self, hashes: &[String]) -> StoreResult<Vec<String>> {
        self.missing_blobs_impl(hashes).await
    }

    async fn get_blob(&self, hash: &str) -> StoreResult<Option<Vec<u8>>> {
        crate::queries::parts::get_blob(self, hash).await
    }

    async fn create_checkpoint(&self, record: &CheckpointRecord) -> StoreResult<()> {
        self.create_checkpoint_impl(record).await
    }

    async fn list_checkpoints(&self, session_id: &str) -> StoreResult<Vec<CheckpointRecord>> {
        self.list_checkpoints_impl(session_id).await
    }

    async fn latest_checkpoints(&self, session_id: &str) -> StoreResult<LatestCheckpoints> {
        self.latest_checkpoints_impl(session_id).await
    }

    async fn get_checkpoint(&self, id: &str) -> StoreResult<Option<CheckpointRecord>> {
        self.get_checkpoint_impl(id).await
    }
}

#[cfg(test)]
mod tests {
    use super::{MIGRATIONS, redact};

    /// A file dropped into the migrations folder but not listed would be
    /// silently skipped; catch that here.
    #[test]
    fn every_migration_file_is_embedded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/postgres");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sql"))
            .collect();
        files.sort();
        let listed: Vec<String> = MIGRATIONS
            .iter()
            .map(|(v, d, _)| format!("{v:04}_{d}.sql"))
            .collect();
        assert_eq!(files, listed);
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
