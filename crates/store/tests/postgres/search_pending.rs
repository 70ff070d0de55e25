//! Search indexing after the append, PostgreSQL only (the queue itself is in
//! the conformance suite): a search waits for a batch another node is
//! committing rather than missing its messages.

use agentd_protocol::Message;
use agentd_store::prelude::*;
use agentd_store::{SearchText, SessionFilter};
use sqlx::Connection;

use super::{Schema, session, store};

fn search(owner: &str, query: &str) -> SessionFilter {
    SessionFilter {
        text: Some(SearchText::parse(query).unwrap()),
        ..SessionFilter::of(owner, 50)
    }
}

#[tokio::test]
async fn a_search_waits_for_a_batch_being_indexed_elsewhere() {
    let (Schema(schema), store) = store().await;
    let s = session(&store, "alice").await;
    let stored = store
        .append_message(&s.id, None, &Message::user_text("pangolin"))
        .await
        .unwrap();

    // Another node's indexer, mid-batch: the message taken from the queue
    // and indexed, not yet committed.
    let url = std::env::var("AGENTD_TEST_POSTGRES_URL").unwrap();
    let options = url
        .parse::<sqlx::postgres::PgConnectOptions>()
        .unwrap()
        .options([("search_path", schema.as_str())]);
    let mut other = sqlx::PgConnection::connect_with(&options).await.unwrap();
    let mut batch = other.begin().await.unwrap();
    sqlx::query("DELETE FROM search_pending WHERE message_id = $1")
        .bind(&stored.id)
        .execute(&mut *batch)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO search_docs (session_id, message_id, body) VALUES ($1, $2, 'pangolin')",
    )
    .bind(&s.id)
    .bind(&stored.id)
    .execute(&mut *batch)
    .await
    .unwrap();

    let searching = tokio::spawn({
        let store = store.clone();
        async move { store.find_sessions(&search("alice", "pangolin")).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !searching.is_finished(),
        "the search did not wait for the batch"
    );
    batch.commit().await.unwrap();
    let hits = searching.await.unwrap().unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
}
