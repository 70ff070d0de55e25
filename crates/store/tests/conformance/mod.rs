//! The store conformance suite: every `Store` method, concurrency, large and
//! unicode payloads, migrations. Each backend's test entry (`tests/sqlite`,
//! `tests/postgres`) includes this module and provides, at its crate root:
//!
//! - `BACKEND: &str` and `type TestStore` (the backend's store type);
//! - `store() -> (Guard, TestStore)`: a fresh, empty, migrated store;
//! - `reopen(&Guard) -> TestStore`: the same database opened (and migrated) again;
//! - `count_rows(&store, table, session_id)`, `strings(&store, sql, arg)` and
//!   `exec(&store, sql)` (and `try_exec`, which returns the error): looks behind the trait's back (SQL placeholders are
//!   written `$1`);
//! - `database_at_version(version, statements) -> Guard`: a fresh database
//!   migrated only up to `version`, then `statements` run on it (for upgrade
//!   tests; open it with `reopen`).

mod access;
mod agent_uids;
mod checkpoints;
mod events;
mod history;
mod identities;
mod messages;
mod migrations;
mod pending;
mod search;
mod sessions;
mod signing_keys;
pub mod transfer;
mod turns;
mod users;
mod webhooks;

use agentd_protocol::{DeltaKind, Event};
use agentd_store::{NewSession, SessionRecord, Store};

pub fn new_session(owner: &str) -> NewSession {
    NewSession {
        id: None,
        owner: owner.into(),
        title: Some("a title".into()),
        workspace: "/tmp/ws".into(),
        existing_workspace: false,
        model: "claude-sonnet".into(),
        profile: "default".into(),
    }
}

pub async fn session(store: &impl Store, owner: &str) -> SessionRecord {
    store.create_session(new_session(owner)).await.unwrap()
}

pub fn delta(text: &str) -> Event {
    Event::MessageDelta {
        parent_call_id: None,
        turn_id: "t1".into(),
        index: 0,
        kind: DeltaKind::Text,
        text: text.into(),
    }
}
