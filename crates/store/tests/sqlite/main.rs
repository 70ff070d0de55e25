//! Behaviour of `SqliteStore` through the `Store` trait: the conformance suite
//! (`tests/conformance`, shared with PostgreSQL) plus SQLite-only checks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../conformance/mod.rs"]
mod conformance;
mod durability;
mod probe;
mod search_queue;

use agentd_store::sqlite::SqliteStore;
pub use conformance::{delta, new_session, session};
use tempfile::TempDir;

pub const BACKEND: &str = "sqlite";
/// Events appended by the throughput printout (per concurrent run).
pub const PRINTOUT_EVENTS: usize = 20_000;
pub type TestStore = SqliteStore;

/// A fresh store in its own temp dir (kept alive by the returned guard).
pub async fn store() -> (TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen(&dir).await;
    (dir, store)
}

/// The database of `store()` opened again (migrations run again).
pub async fn reopen(dir: &TempDir) -> SqliteStore {
    SqliteStore::open(&dir.path().join("agentd.db"))
        .await
        .unwrap()
}

/// Rows of `table` belonging to `session_id`, counted behind the trait's back.
pub async fn count_rows(store: &SqliteStore, table: &str, session_id: &str) -> i64 {
    sqlx::query_scalar(&format!(
        "SELECT COUNT(*) FROM {table} WHERE session_id = ?"
    ))
    .bind(session_id)
    .fetch_one(store.pool())
    .await
    .unwrap()
}

/// The first column of `sql` (one `$1` parameter) as strings.
pub async fn strings(store: &SqliteStore, sql: &str, arg: &str) -> Vec<String> {
    sqlx::query_scalar(sql)
        .bind(arg)
        .fetch_all(store.pool())
        .await
        .unwrap()
}

/// Run a statement behind the trait's back.
pub async fn exec(store: &SqliteStore, sql: &str) {
    sqlx::query(sql).execute(store.pool()).await.unwrap();
}

/// `sql`, which may be refused: the database's error as text.
pub async fn try_exec(store: &SqliteStore, sql: &str) -> Result<(), String> {
    sqlx::query(sql)
        .execute(store.pool())
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// A fresh database migrated only up to `version` (by the migration files,
/// which must match the embedded ones), then `statements` run on it.
pub async fn database_at_version(version: i64, statements: &[&str]) -> TempDir {
    use sqlx::Connection;
    use sqlx::migrate::Migrator;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};

    let dir = tempfile::tempdir().unwrap();
    let options = SqliteConnectOptions::new()
        .filename(dir.path().join("agentd.db"))
        .create_if_missing(true)
        .foreign_keys(true);
    let mut conn = SqliteConnection::connect_with(&options).await.unwrap();
    let mut migrator = Migrator::new(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/migrations/sqlite"
    )))
    .await
    .unwrap();
    let upto: Vec<_> = migrator
        .migrations
        .iter()
        .filter(|m| m.version <= version)
        .cloned()
        .collect();
    migrator.migrations = upto.into();
    migrator.run(&mut conn).await.unwrap();
    for sql in statements {
        sqlx::query(sql).execute(&mut conn).await.unwrap();
    }
    conn.close().await.unwrap();
    dir
}
