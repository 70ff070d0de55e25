//! Behaviour of `PostgresStore` through the `Store` trait: the conformance
//! suite of `tests/conformance`, shared with SQLite.
//!
//! Needs a running PostgreSQL named by `AGENTD_TEST_POSTGRES_URL`; `make test`
//! starts a throwaway one (`scripts/postgres.sh`). Each test gets its own
//! schema, so tests run in parallel.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster;
#[path = "../conformance/mod.rs"]
mod conformance;
mod fence;
mod fence_writes;
mod search_pending;

use agentd_store::prelude::*;
use std::str::FromStr;

use agentd_store::StoreError;
use agentd_store::postgres::PostgresStore;
pub use conformance::{delta, new_session, session};
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

pub const BACKEND: &str = "postgres";
/// Events appended by the throughput printout (per concurrent run).
pub const PRINTOUT_EVENTS: usize = 5_000;
pub type TestStore = PostgresStore;

/// The schema a test's store lives in.
pub struct Schema(String);

fn base_options() -> PgConnectOptions {
    let url = std::env::var("AGENTD_TEST_POSTGRES_URL").unwrap_or_default();
    assert!(
        !url.is_empty(),
        "AGENTD_TEST_POSTGRES_URL is not set: the PostgreSQL store tests need a \
         running PostgreSQL. Run them via `make test` (it starts a throwaway \
         cluster), or `eval \"$(scripts/postgres.sh start)\"` and export the URL."
    );
    PgConnectOptions::from_str(&url).expect("AGENTD_TEST_POSTGRES_URL is not a postgres url")
}

/// A fresh store in a schema of its own.
pub async fn store() -> (Schema, PostgresStore) {
    let schema = empty_schema().await;
    let store = reopen(&schema).await;
    (schema, store)
}

async fn empty_schema() -> Schema {
    let options = base_options();
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    let mut conn = PgConnection::connect_with(&options).await.unwrap();
    sqlx::query(&format!("CREATE SCHEMA {name}"))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    Schema(name)
}

/// The schema of `store()` opened again (migrations run again).
pub async fn reopen(schema: &Schema) -> PostgresStore {
    let options = base_options().options([("search_path", schema.0.as_str())]);
    PostgresStore::connect_with(options).await.unwrap()
}

/// Rows of `table` belonging to `session_id`, counted behind the trait's back.
pub async fn count_rows(store: &PostgresStore, table: &str, session_id: &str) -> i64 {
    sqlx::query_scalar(&format!(
        "SELECT COUNT(*) FROM {table} WHERE session_id = $1"
    ))
    .bind(session_id)
    .fetch_one(store.pool())
    .await
    .unwrap()
}

/// The first column of `sql` (one `$1` parameter) as strings.
pub async fn strings(store: &PostgresStore, sql: &str, arg: &str) -> Vec<String> {
    sqlx::query_scalar(sql)
        .bind(arg)
        .fetch_all(store.pool())
        .await
        .unwrap()
}

/// Run a statement behind the trait's back.
pub async fn exec(store: &PostgresStore, sql: &str) {
    sqlx::query(sql).execute(store.pool()).await.unwrap();
}

/// The plan PostgreSQL gives `sql` as a prepared statement once it stops
/// planning each call (`plan_cache_mode = force_generic_plan`), for the
/// parameter `types`, executed with `args` (SQL literals), as EXPLAIN's lines.
pub async fn generic_plan(store: &PostgresStore, sql: &str, types: &str, args: &str) -> String {
    // PREPARE and SET hold for one connection only; it is not given back.
    let mut conn = store.pool().acquire().await.unwrap();
    conn.close_on_drop();
    for statement in [
        "SET plan_cache_mode = force_generic_plan".to_string(),
        format!("PREPARE planned ({types}) AS {sql}"),
    ] {
        sqlx::query(&statement).execute(&mut *conn).await.unwrap();
    }
    let lines: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN EXECUTE planned({args})"))
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    lines.join("\n")
}

/// `plan` (EXPLAIN's lines) reads no table whole and finds its rows by an
/// index condition on `condition`.
pub fn assert_index_scan(plan: &str, condition: &str) {
    assert!(!plan.contains("Seq Scan"), "{plan}");
    assert!(
        plan.lines()
            .any(|line| line.trim_start().starts_with("Index Cond:") && line.contains(condition)),
        "no index scan on {condition}:\n{plan}"
    );
}

/// `sql`, which may be refused: the database's error as text.
pub async fn try_exec(store: &PostgresStore, sql: &str) -> Result<(), String> {
    sqlx::query(sql)
        .execute(store.pool())
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// A fresh schema migrated only up to `version` (by the migration files,
/// which must match the embedded ones), then `statements` run in it.
pub async fn database_at_version(version: i64, statements: &[&str]) -> Schema {
    use sqlx::migrate::Migrator;

    let schema = empty_schema().await;
    let options = base_options().options([("search_path", schema.0.as_str())]);
    let mut conn = PgConnection::connect_with(&options).await.unwrap();
    let mut migrator = Migrator::new(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/migrations/postgres"
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
    schema
}

#[tokio::test]
async fn connect_rejects_other_urls_and_reports_unreachable_servers() {
    let err = PostgresStore::connect("sqlite::memory:").await.unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err}");
    // Nothing listens on port 1.
    let err = PostgresStore::connect("postgres://u:secret@127.0.0.1:1/db")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err}");
    assert!(!err.to_string().contains("secret"), "{err}");
}

#[tokio::test]
async fn connect_by_url_with_a_search_path() {
    let (schema, store) = store().await;
    let s = session(&store, "alice").await;
    let url = std::env::var("AGENTD_TEST_POSTGRES_URL").unwrap();
    let sep = if url.contains('?') { '&' } else { '?' };
    let url = format!("{url}{sep}options=-c%20search_path%3D{}", schema.0);
    let other = PostgresStore::connect(&url).await.unwrap();
    assert_eq!(other.get_session(&s.id).await.unwrap().unwrap(), s);
    // The long scheme name works too.
    let long = url.replacen("postgres://", "postgresql://", 1);
    let other = PostgresStore::connect(&long).await.unwrap();
    assert_eq!(other.get_session(&s.id).await.unwrap().unwrap(), s);
}

#[tokio::test]
async fn a_session_moves_sqlite_to_postgres_and_back_with_nothing_lost() {
    use agentd_store::sqlite::SqliteStore;
    use conformance::transfer::{assert_complete, busy_session};

    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(&dir.path().join("a.db")).await.unwrap();
    let id = busy_session(&sqlite).await;
    let export = sqlite.export_session(&id).await.unwrap().unwrap();
    assert_complete(&export);

    let (_schema, postgres) = store().await;
    postgres.import_session(&export).await.unwrap();
    let from_postgres = postgres.export_session(&id).await.unwrap().unwrap();
    assert_eq!(from_postgres, export);

    let back = SqliteStore::open(&dir.path().join("b.db")).await.unwrap();
    back.import_session(&from_postgres).await.unwrap();
    assert_eq!(back.export_session(&id).await.unwrap().unwrap(), export);
    assert_eq!(
        serde_json::to_string(&back.export_session(&id).await.unwrap()).unwrap(),
        serde_json::to_string(&Some(export)).unwrap()
    );
}
