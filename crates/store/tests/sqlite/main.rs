//! Behaviour of `SqliteStore` through the `Store` trait.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod durability;
mod events;
mod messages;
mod pending;
mod sessions;
mod turns;

use agentd_protocol::{DeltaKind, Event};
use agentd_store::sqlite::SqliteStore;
use agentd_store::{NewSession, SessionRecord, Store};
use tempfile::TempDir;

/// A fresh store in its own temp dir (kept alive by the returned guard).
pub async fn store() -> (TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("agentd.db"))
        .await
        .unwrap();
    (dir, store)
}

pub fn new_session(owner: &str) -> NewSession {
    NewSession {
        id: None,
        owner: owner.into(),
        title: Some("a title".into()),
        workspace: "/tmp/ws".into(),
        model: "claude-sonnet".into(),
        profile: "default".into(),
    }
}

pub async fn session(store: &SqliteStore, owner: &str) -> SessionRecord {
    store.create_session(new_session(owner)).await.unwrap()
}

pub fn delta(text: &str) -> Event {
    Event::MessageDelta {
        turn_id: "t1".into(),
        index: 0,
        kind: DeltaKind::Text,
        text: text.into(),
    }
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
