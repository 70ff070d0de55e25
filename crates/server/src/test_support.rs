//! Shared set-up of the crate's unit tests.

use agentd_store::prelude::*;
use std::sync::Arc;

use agentd_store::sqlite::SqliteStore;
use agentd_store::{NewSession, Store};

/// An in-memory SQLite store holding one session; the store and the session's id.
pub(crate) async fn store_with_session() -> (Arc<dyn Store>, String) {
    let (store, session_id) = sqlite_with_session().await;
    (Arc::new(store), session_id)
}

/// [`store_with_session`] as the SQLite store itself (to reach its pool).
pub(crate) async fn sqlite_with_session() -> (SqliteStore, String) {
    let store = SqliteStore::open_url("sqlite::memory:").await.unwrap();
    let session = store
        .create_session(NewSession {
            id: None,
            owner: "local".into(),
            title: None,
            workspace: "/tmp".into(),
            existing_workspace: false,
            model: "demo".into(),
            profile: "default".into(),
        })
        .await
        .unwrap();
    (store, session.id)
}
