//! The write probe before a turn is accepted: a commit of the event writer a
//! moment ago answers it; without one it writes its own row.

use std::time::Duration;

use agentd_store::prelude::*;

use crate::{delta, session, store};

/// The probe row's `at`, if it was ever written.
async fn probe_row_at(store: &agentd_store::sqlite::SqliteStore) -> Option<String> {
    let at = crate::strings(
        store,
        "SELECT CAST(at AS TEXT) FROM health_probe WHERE id = $1",
        "1",
    );
    at.await.pop()
}

#[tokio::test]
async fn a_fresh_commit_answers_the_probe_and_an_old_one_does_not() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    store.append_event(&s.id, &delta("one")).await.unwrap();
    store.probe_write().await.unwrap();
    assert_eq!(
        probe_row_at(&store).await,
        None,
        "an event committed just now: no probe row written"
    );
    // Older than the freshness window (250 ms): the probe writes.
    tokio::time::sleep(Duration::from_millis(300)).await;
    store.probe_write().await.unwrap();
    assert!(
        probe_row_at(&store).await.is_some(),
        "the probe wrote its row"
    );
    // Its own commit counts as fresh too.
    crate::exec(&store, "UPDATE health_probe SET at = 7").await;
    store.probe_write().await.unwrap();
    assert_eq!(
        probe_row_at(&store).await,
        Some("7".into()),
        "a fresh probe wrote again"
    );
}

#[tokio::test]
async fn a_failed_commit_makes_the_next_probe_write() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    crate::exec(
        &store,
        "CREATE TRIGGER poison BEFORE INSERT ON events WHEN NEW.data LIKE '%poison%' \
         BEGIN SELECT RAISE(ABORT, 'poisoned'); END",
    )
    .await;
    store.append_event(&s.id, &delta("one")).await.unwrap();
    let refused = store.append_event(&s.id, &delta("poison")).await;
    assert!(refused.is_err(), "{refused:?}");
    store.probe_write().await.unwrap();
    assert!(
        probe_row_at(&store).await.is_some(),
        "after a failed commit the probe writes, however recent the last good one"
    );
}
