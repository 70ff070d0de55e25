//! The write probe before a turn is accepted: a commit of the event writer a
//! moment ago answers it; without one it writes its own row.

use std::time::Duration;

use agentd_store::prelude::*;

use crate::{delta, session, store};

async fn probe_row_at(store: &agentd_store::sqlite::SqliteStore) -> Option<i64> {
    sqlx::query_scalar("SELECT at FROM health_probe WHERE id = 1")
        .fetch_optional(store.pool())
        .await
        .unwrap()
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
    let first = probe_row_at(&store).await.expect("the probe wrote its row");
    // Its own commit counts as fresh too.
    store.probe_write().await.unwrap();
    assert_eq!(probe_row_at(&store).await, Some(first));
}
