//! Search indexing after the append (migration 0015): a message is queued,
//! not indexed, by its append; the indexer's batches take the queue; a
//! search finds every stored message whether indexed yet or not, waiting for
//! a batch another node is committing rather than missing it.

use agentd_protocol::Message;
use agentd_store::prelude::*;
use agentd_store::{SearchText, SessionFilter};
use sqlx::Connection;

use super::{Schema, session, store};

async fn pending(store: &agentd_store::postgres::PostgresStore) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM search_pending")
        .fetch_one(store.pool())
        .await
        .unwrap()
}

async fn docs_of(store: &agentd_store::postgres::PostgresStore, session_id: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM search_docs WHERE message_id IS NOT NULL AND session_id = $1",
    )
    .bind(session_id)
    .fetch_one(store.pool())
    .await
    .unwrap()
}

fn search(owner: &str, query: &str) -> SessionFilter {
    SessionFilter {
        text: Some(SearchText::parse(query).unwrap()),
        ..SessionFilter::of(owner, 50)
    }
}

#[tokio::test]
async fn appends_queue_messages_and_the_indexer_takes_them_in_batches() {
    let (_schema, store) = store().await;
    let s = session(&store, "alice").await;
    for word in ["capybara", "ocelot", "tapir"] {
        store
            .append_message(&s.id, Some("t1"), &Message::user_text(word))
            .await
            .unwrap();
    }
    assert_eq!(
        (pending(&store).await, docs_of(&store, &s.id).await),
        (3, 0)
    );
    assert_eq!(store.index_pending_search(2).await.unwrap(), 2);
    assert_eq!(
        (pending(&store).await, docs_of(&store, &s.id).await),
        (1, 2)
    );
    assert_eq!(store.index_pending_search(2).await.unwrap(), 1);
    assert_eq!(store.index_pending_search(2).await.unwrap(), 0);
    assert_eq!(
        (pending(&store).await, docs_of(&store, &s.id).await),
        (0, 3)
    );
    let hits = store
        .find_sessions(&search("alice", "ocelot"))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);

    // A deleted session leaves nothing queued.
    let gone = session(&store, "alice").await;
    store
        .append_message(&gone.id, None, &Message::user_text("quoll"))
        .await
        .unwrap();
    assert_eq!(pending(&store).await, 1);
    assert!(store.delete_session(&gone.id).await.unwrap());
    assert_eq!(pending(&store).await, 0);
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
