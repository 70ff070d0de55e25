//! SQLite's search queue with messages whose content agentd did not write
//! (PostgreSQL's `jsonb` column cannot hold them).

use agentd_protocol::Message;
use agentd_store::prelude::*;
use agentd_store::{SearchText, SessionFilter};

use crate::{session, store};

/// Content that is not JSON, or JSON that is not a block list, stored behind
/// the store's back (a hand edit, an import): each gets no document, the
/// queue still drains, and the messages around them are found.
#[tokio::test]
async fn a_message_whose_text_cannot_be_read_does_not_stop_the_queue() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    store
        .append_message(&s.id, None, &Message::user_text("capybara"))
        .await
        .unwrap();
    for (n, content) in [
        "not json at all",
        r#"{"role":"user","content":"a string"}"#,
        r#"{"role":"user","content":["a string block"]}"#,
        r#"{"role":"user","content":[7]}"#,
    ]
    .into_iter()
    .enumerate()
    {
        let content = content.replace('\'', "''");
        crate::exec(
            &store,
            &format!(
                "INSERT INTO messages (id, session_id, turn_id, position, role, content, created_at) \
                 VALUES ('odd-{n}', '{}', NULL, {}, 'user', '{content}', 0)",
                s.id,
                100 + n
            ),
        )
        .await;
    }
    store
        .append_message(&s.id, None, &Message::user_text("ocelot"))
        .await
        .unwrap();

    assert_eq!(store.index_pending_search(256).await.unwrap(), 6);
    assert_eq!(store.index_pending_search(256).await.unwrap(), 0);
    for word in ["capybara", "ocelot"] {
        let filter = SessionFilter {
            text: Some(SearchText::parse(word).unwrap()),
            ..SessionFilter::of("alice", 50)
        };
        let hits = store.find_sessions(&filter).await.unwrap();
        assert_eq!(hits.len(), 1, "{word}");
    }
    let documents = crate::strings(
        &store,
        "SELECT message_id FROM search_docs WHERE session_id = $1 AND message_id IS NOT NULL",
        &s.id,
    )
    .await;
    assert_eq!(documents.len(), 2, "{documents:?}");
}
