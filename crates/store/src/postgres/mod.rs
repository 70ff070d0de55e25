//! PostgreSQL backend, for agentd run as shared infrastructure: a connection
//! pool, its own migration set (`migrations/postgres`), and the same semantics
//! as the SQLite backend. Writes that must be atomic are single statements or
//! transactions; the per-session `seq` is taken from `sessions.last_seq` under
//! that row's lock, so concurrent appends (from any number of processes)
//! serialize per session and never leave gaps.

mod access;
mod agent_uids;
mod blobs;
pub mod cluster;
mod events;
mod messages;
mod pending;
mod sessions;
mod transfer;
mod turns;
mod users;
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
    AuditQuery, AuditRecord, CheckpointRecord, CompactionRecord, GrantKind, GrantRecord,
    LatestCheckpoints, NewAudit, NewSession, PendingRecord, SessionExport, SessionRecord,
    SessionUpdate, StoreError, StoreResult, StoredMessage, TokenRecord, TurnRecord, TurnStart,
    UsageWindow, UserRecord, UserUsage,
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
impl SessionStore for PostgresStore {
    async fn create_session(&self, new: NewSession) -> StoreResult<SessionRecord> {
        self.create_session_impl(new).await
    }

    async fn get_session(&self, id: &str) -> StoreResult<Option<SessionRecord>> {
        self.get_session_impl(id).await
    }

    async fn list_sessions(
        &self,
        owner: &str,
        before: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<SessionRecord>> {
        self.list_sessions_impl(owner, before, limit).await
    }

    async fn update_session(&self, id: &str, update: SessionUpdate) -> StoreResult<SessionRecord> {
        self.update_session_impl(id, update).await
    }

    async fn delete_session(&self, id: &str) -> StoreResult<bool> {
        self.delete_session_impl(id).await
    }

    async fn sessions_updated_before(
        &self,
        cutoff: chrono::DateTime<chrono::Utc>,
        limit: u32,
    ) -> StoreResult<Vec<SessionRecord>> {
        self.sessions_updated_before_impl(cutoff, limit).await
    }

    async fn count_sessions(&self) -> StoreResult<u64> {
        self.count_sessions_impl().await
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
        self.messages_impl(session_id).await
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
        self.events_after_impl(session_id, after, limit).await
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
        self.finish_turn_impl(turn_id, status).await
    }

    async fn running_turns(&self) -> StoreResult<Vec<TurnRecord>> {
        self.running_turns_impl().await
    }

    async fn find_turn(
        &self,
        session_id: &str,
        client_request_id: &str,
    ) -> StoreResult<Option<TurnRecord>> {
        self.find_turn_impl(session_id, client_request_id).await
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
impl UserStore for PostgresStore {
    async fn create_user(&self, name: &str) -> StoreResult<UserRecord> {
        self.create_user_impl(name).await
    }

    async fn get_user_by_name(&self, name: &str) -> StoreResult<Option<UserRecord>> {
        self.get_user_by_name_impl(name).await
    }

    async fn create_token(
        &self,
        user_id: &str,
        name: &str,
        token_hash: &str,
        prefix: &str,
    ) -> StoreResult<TokenRecord> {
        self.create_token_impl(user_id, name, token_hash, prefix)
            .await
    }

    async fn token_by_hash(&self, token_hash: &str) -> StoreResult<Option<TokenRecord>> {
        self.token_by_hash_impl(token_hash).await
    }

    async fn list_tokens(&self, user_id: Option<&str>) -> StoreResult<Vec<TokenRecord>> {
        self.list_tokens_impl(user_id).await
    }

    async fn revoke_token(&self, id: &str) -> StoreResult<bool> {
        self.revoke_token_impl(id).await
    }

    async fn agent_uid(&self, user: &str, first: u32, last: u32) -> StoreResult<u32> {
        self.agent_uid_impl(user, first, last).await
    }

    async fn list_users(&self) -> StoreResult<Vec<UserRecord>> {
        self.list_users_impl().await
    }

    async fn set_user_flags(
        &self,
        name: &str,
        admin: Option<bool>,
        disabled: Option<bool>,
    ) -> StoreResult<bool> {
        self.set_user_flag_impl(name, admin, disabled).await
    }
}

#[async_trait]
impl AccessStore for PostgresStore {
    async fn set_grant(
        &self,
        user: &str,
        kind: GrantKind,
        name: &str,
        granted: bool,
    ) -> StoreResult<bool> {
        self.set_grant_impl(user, kind, name, granted).await
    }

    async fn grants(&self, user: Option<&str>) -> StoreResult<Vec<GrantRecord>> {
        self.grants_impl(user).await
    }

    async fn user_usage(&self, owner: &str, window: UsageWindow) -> StoreResult<UserUsage> {
        self.user_usage_impl(owner, window).await
    }

    async fn append_audit(&self, entry: &NewAudit) -> StoreResult<AuditRecord> {
        self.append_audit_impl(entry).await
    }

    async fn audit_log(&self, query: &AuditQuery) -> StoreResult<Vec<AuditRecord>> {
        self.audit_log_impl(query).await
    }
}

#[async_trait]
impl PendingStore for PostgresStore {
    async fn create_pending(&self, record: &PendingRecord) -> StoreResult<()> {
        self.create_pending_impl(record).await
    }

    async fn resolve_pending(&self, id: &str, resolution: &serde_json::Value) -> StoreResult<bool> {
        self.resolve_pending_impl(id, resolution).await
    }

    async fn get_pending(&self, id: &str) -> StoreResult<Option<PendingRecord>> {
        self.get_pending_impl(id).await
    }

    async fn open_pending(&self, session_id: Option<&str>) -> StoreResult<Vec<PendingRecord>> {
        self.open_pending_impl(session_id).await
    }

    async fn add_session_rule(&self, session_id: &str, rule: &str) -> StoreResult<()> {
        self.add_session_rule_impl(session_id, rule).await
    }

    async fn session_rules(&self, session_id: &str) -> StoreResult<Vec<String>> {
        self.session_rules_impl(session_id).await
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
        self.get_blob_impl(hash).await
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

#[async_trait]
impl TransferStore for PostgresStore {
    async fn export_session(&self, id: &str) -> StoreResult<Option<SessionExport>> {
        self.export_session_impl(id).await
    }

    async fn import_session(&self, export: &SessionExport) -> StoreResult<()> {
        self.import_session_impl(export).await
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
