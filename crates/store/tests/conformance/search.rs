//! Finding sessions: full-text search over titles and transcripts (tool
//! results and inputs included), filters, pin/archive/tags, pinned first.

use agentd_protocol::{ContentBlock, Message};
use agentd_store::prelude::*;
use agentd_store::{
    ListCursor, NewSession, SearchText, SessionFilter, SessionHit, SessionOrder, SessionStatus,
    SessionUpdate,
};
use serde_json::json;

use crate::{new_session, session, store};

fn search(owner: &str, query: &str) -> SessionFilter {
    SessionFilter {
        text: Some(SearchText::parse(query).unwrap()),
        ..SessionFilter::of(owner, 50)
    }
}

fn ids(hits: &[SessionHit]) -> Vec<&str> {
    hits.iter().map(|hit| hit.session.id.as_str()).collect()
}

/// A turn that ran `ls` and read a file: the words of each block.
async fn a_turn_with_tools(store: &impl Store, session_id: &str) {
    let messages = [
        Message::user_text("please look around the quokka enclosure"),
        Message::assistant(vec![
            ContentBlock::Thinking {
                thinking: "pondering wombats".into(),
                signature: None,
            },
            ContentBlock::Text {
                text: "Listing the platypus directory".into(),
            },
            ContentBlock::ToolUse {
                id: "tu1".into(),
                name: "Bash".into(),
                input: json!({"command": "ls /srv/narwhal-data", "timeout": 5}),
            },
        ]),
        Message {
            role: agentd_protocol::Role::User,
            content: vec![ContentBlock::tool_result(
                "tu1",
                "axolotl.txt\nbeaver.csv",
                false,
            )],
        },
    ];
    for message in &messages {
        store
            .append_message(session_id, Some("t1"), message)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn every_kind_of_text_is_found_but_thinking_is_not() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    let other = session(&store, "alice").await;
    a_turn_with_tools(&store, &s.id).await;
    for (query, in_snippet) in [
        ("axolotl", "axolotl"),             // a tool result only
        ("narwhal", "narwhal"),             // a tool call's input
        ("bash", "Bash"),                   // the tool's name
        ("quokka", "quokka"),               // user text
        ("PLATYPUS directory", "platypus"), // assistant text, any case, all words
        ("\"a title\"", "a title"),         // the title, as a phrase
    ] {
        let hits = store.find_sessions(&search("alice", query)).await.unwrap();
        let expected = match query {
            "\"a title\"" => 2,
            _ => 1,
        };
        assert_eq!(hits.len(), expected, "{query}: {hits:?}");
        let hit = hits.iter().find(|hit| hit.session.id == s.id).unwrap();
        let snippet = hit.snippet.as_deref().unwrap_or_default();
        assert!(snippet.contains(in_snippet), "{query}: {snippet:?}");
    }
    let none = store
        .find_sessions(&search("alice", "wombats"))
        .await
        .unwrap();
    assert!(none.is_empty(), "thinking is not searched: {none:?}");
    let both_words_apart = search("alice", "quokka axolotl");
    assert!(
        store
            .find_sessions(&both_words_apart)
            .await
            .unwrap()
            .is_empty(),
        "all words in one message"
    );
    let _ = other;
}

#[tokio::test]
async fn another_owners_sessions_are_never_found() {
    let (_guard, store) = store().await;
    let mine = session(&store, "alice").await;
    let theirs = session(&store, "bob").await;
    a_turn_with_tools(&store, &mine.id).await;
    a_turn_with_tools(&store, &theirs.id).await;
    let hits = store
        .find_sessions(&search("alice", "axolotl"))
        .await
        .unwrap();
    assert_eq!(ids(&hits), [mine.id.as_str()]);
    let listed = store
        .find_sessions(&SessionFilter::of("alice", 50))
        .await
        .unwrap();
    assert_eq!(ids(&listed), [mine.id.as_str()]);
}

#[tokio::test]
async fn query_syntax_never_reaches_the_database() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    a_turn_with_tools(&store, &s.id).await;
    for hostile in [
        "\"a OR b*",
        "NEAR(",
        "axolotl OR",
        "col:axolotl",
        "axolotl*",
        "'; DROP TABLE sessions; --",
        "!(axolotl & beaver) <-> :*",
        "\\ ' \" ^ { } [ ]",
    ] {
        let text = match SearchText::parse(hostile) {
            Ok(text) => text,
            Err(_) => continue,
        };
        let filter = SessionFilter {
            text: Some(text),
            ..SessionFilter::of("alice", 50)
        };
        let hits = store.find_sessions(&filter).await;
        assert!(hits.is_ok(), "{hostile}: {hits:?}");
    }
    // Operators are words: `axolotl OR` needs the word "or" too.
    let hits = store
        .find_sessions(&search("alice", "axolotl OR"))
        .await
        .unwrap();
    assert!(hits.is_empty(), "{hits:?}");
    let hits = store
        .find_sessions(&search("alice", "col:axolotl txt"))
        .await
        .unwrap();
    assert!(hits.is_empty(), "col:axolotl is the phrase \"col axolotl\"");
    assert_eq!(store.count_sessions().await.unwrap(), 1);
}

#[tokio::test]
async fn renames_rewinds_and_deletes_keep_the_index_right() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    a_turn_with_tools(&store, &s.id).await;
    let rename = SessionUpdate {
        title: Some("Migrating the gazebo".into()),
        ..SessionUpdate::default()
    };
    store.update_session(&s.id, rename).await.unwrap();
    let found = |query: &'static str| {
        let store = store.clone();
        async move {
            let hits = store.find_sessions(&search("alice", query)).await.unwrap();
            hits.len()
        }
    };
    assert_eq!(found("gazebo").await, 1);
    assert_eq!(found("\"a title\"").await, 0, "the old title is gone");
    store.truncate_history(&s.id, 3).await.unwrap();
    assert_eq!(found("axolotl").await, 0, "the rewound result is gone");
    assert_eq!(found("narwhal").await, 1);
    store.delete_session(&s.id).await.unwrap();
    assert_eq!(found("narwhal").await, 0);
    assert_eq!(found("gazebo").await, 0);
    // Nothing of them is left in the index behind the join either.
    assert_eq!(crate::count_rows(&store, "search_docs", &s.id).await, 0);
    if crate::BACKEND == "sqlite" {
        for word in ["narwhal", "axolotl", "gazebo", "title"] {
            let stale = crate::strings(
                &store,
                "SELECT 'x' FROM search_fts WHERE search_fts MATCH $1",
                word,
            )
            .await;
            assert!(stale.is_empty(), "{word} is still in search_fts");
        }
        crate::exec(
            &store,
            "INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)",
        )
        .await;
    }
}

#[tokio::test]
async fn pin_archive_and_tags_are_kept_and_listed_pinned_first() {
    let (_guard, store) = store().await;
    let first = session(&store, "alice").await;
    let second = session(&store, "alice").await;
    let third = session(&store, "alice").await;
    let update = SessionUpdate {
        pinned: Some(true),
        tags: Some(vec!["ops".into(), "db_1".into()]),
        ..SessionUpdate::default()
    };
    let pinned = store.update_session(&first.id, update).await.unwrap();
    assert!(pinned.pinned && !pinned.archived);
    assert_eq!(pinned.tags, ["ops", "db_1"]);
    assert_eq!(store.get_session(&first.id).await.unwrap().unwrap(), pinned);
    let archive = SessionUpdate {
        archived: Some(true),
        ..SessionUpdate::default()
    };
    store.update_session(&second.id, archive).await.unwrap();

    let list = |filter: SessionFilter| {
        let store = store.clone();
        async move {
            let hits = store.find_sessions(&filter).await.unwrap();
            hits.into_iter().map(|h| h.session.id).collect::<Vec<_>>()
        }
    };
    let all = SessionFilter::of("alice", 50);
    assert_eq!(
        list(all.clone()).await,
        [first.id.as_str(), third.id.as_str(), second.id.as_str()],
        "pinned first, then newest first"
    );
    // Pages of one follow the same order.
    let mut paged = Vec::new();
    let mut before = None;
    loop {
        let filter = SessionFilter {
            before: before.clone(),
            ..SessionFilter::of("alice", 1)
        };
        let page = store.find_sessions(&filter).await.unwrap();
        let Some(last) = page.last() else { break };
        before = Some(ListCursor::after(&last.session));
        paged.extend(page.into_iter().map(|hit| hit.session.id));
    }
    assert_eq!(
        paged,
        [first.id.as_str(), third.id.as_str(), second.id.as_str()]
    );

    let unarchived = SessionFilter {
        archived: Some(false),
        ..all.clone()
    };
    assert_eq!(
        list(unarchived).await,
        [first.id.as_str(), third.id.as_str()]
    );
    let archived = SessionFilter {
        archived: Some(true),
        ..all.clone()
    };
    assert_eq!(list(archived).await, [second.id.as_str()]);
    let pinned_only = SessionFilter {
        pinned: Some(true),
        ..all.clone()
    };
    assert_eq!(list(pinned_only).await, [first.id.as_str()]);
    for (tag, expected) in [("db_1", 1), ("ops", 1), ("db", 0), ("db%1", 0), ("op", 0)] {
        let tagged = SessionFilter {
            tag: Some(tag.into()),
            ..all.clone()
        };
        assert_eq!(list(tagged).await.len(), expected, "{tag}");
    }
    let cleared = SessionUpdate {
        tags: Some(Vec::new()),
        pinned: Some(false),
        ..SessionUpdate::default()
    };
    let read = store.update_session(&first.id, cleared).await.unwrap();
    assert!(read.tags.is_empty() && !read.pinned);
    assert_eq!(
        list(all).await,
        [third.id.as_str(), second.id.as_str(), first.id.as_str()]
    );
}

#[tokio::test]
async fn status_date_and_workspace_filters_narrow() {
    let (_guard, store) = store().await;
    let before = session(&store, "alice").await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let elsewhere = NewSession {
        workspace: "/srv/project".into(),
        ..new_session("alice")
    };
    let later = store.create_session(elsewhere).await.unwrap();
    let running = SessionUpdate {
        status: Some(SessionStatus::Running),
        ..SessionUpdate::default()
    };
    store.update_session(&later.id, running).await.unwrap();
    let all = SessionFilter::of("alice", 50);
    let ids_of = |filter: SessionFilter| {
        let store = store.clone();
        async move {
            let hits = store.find_sessions(&filter).await.unwrap();
            hits.into_iter().map(|h| h.session.id).collect::<Vec<_>>()
        }
    };
    let status = |status| SessionFilter {
        status: Some(status),
        ..all.clone()
    };
    assert_eq!(
        ids_of(status(SessionStatus::Running)).await,
        [later.id.as_str()]
    );
    assert_eq!(
        ids_of(status(SessionStatus::Idle)).await,
        [before.id.as_str()]
    );
    assert!(ids_of(status(SessionStatus::Waiting)).await.is_empty());
    let since = SessionFilter {
        since: Some(later.created_at),
        ..all.clone()
    };
    assert_eq!(ids_of(since).await, [later.id.as_str()]);
    let until = SessionFilter {
        until: Some(later.created_at),
        ..all.clone()
    };
    assert_eq!(ids_of(until).await, [before.id.as_str()]);
    let workspace = SessionFilter {
        workspace: Some("/srv/project".into()),
        ..all.clone()
    };
    assert_eq!(ids_of(workspace).await, [later.id.as_str()]);
    // The filters apply to a search too.
    let searched = SessionFilter {
        status: Some(SessionStatus::Running),
        ..search("alice", "title")
    };
    assert_eq!(ids_of(searched).await, [later.id.as_str()]);
}

#[tokio::test]
async fn search_pages_by_offset_best_first() {
    let (_guard, store) = store().await;
    let weak = session(&store, "alice").await;
    let strong = session(&store, "alice").await;
    let say = |text: &str| Message::user_text(text);
    store
        .append_message(
            &weak.id,
            None,
            &say("a long message that mentions lemur once among many other words here"),
        )
        .await
        .unwrap();
    store
        .append_message(&strong.id, None, &say("lemur lemur lemur"))
        .await
        .unwrap();
    let first = SessionFilter {
        limit: 1,
        ..search("alice", "lemur")
    };
    let page = store.find_sessions(&first).await.unwrap();
    assert_eq!(ids(&page), [strong.id.as_str()]);
    let next = SessionFilter { offset: 1, ..first };
    let page = store.find_sessions(&next).await.unwrap();
    assert_eq!(ids(&page), [weak.id.as_str()]);
}

/// A session pinned or unpinned between two pages moves, but the next
/// page goes on from where the previous one ended: no other is skipped.
#[tokio::test]
async fn pages_go_on_from_where_they_ended() {
    let (_guard, store) = store().await;
    let oldest = session(&store, "alice").await;
    let middle = session(&store, "alice").await;
    let newest = session(&store, "alice").await;
    let pin = |pinned| SessionUpdate {
        pinned: Some(pinned),
        ..SessionUpdate::default()
    };
    for s in [&middle, &newest] {
        store.update_session(&s.id, pin(true)).await.unwrap();
    }
    let first = store
        .find_sessions(&SessionFilter::of("alice", 1))
        .await
        .unwrap();
    assert_eq!(ids(&first), [newest.id.as_str()]);
    store.update_session(&newest.id, pin(false)).await.unwrap();
    let next = SessionFilter {
        before: Some(ListCursor::after(&first[0].session)),
        ..SessionFilter::of("alice", 5)
    };
    // The other pinned one is not skipped; the unpinned one is in its new
    // place, among the unpinned.
    let rest = store.find_sessions(&next).await.unwrap();
    assert_eq!(
        ids(&rest),
        [middle.id.as_str(), newest.id.as_str(), oldest.id.as_str()]
    );
}

/// `SessionOrder::Newest` ignores pins ("the latest session"), in pages too.
#[tokio::test]
async fn newest_first_ignores_pins() {
    let (_guard, store) = store().await;
    let old = session(&store, "alice").await;
    let new = session(&store, "alice").await;
    let pin = SessionUpdate {
        pinned: Some(true),
        ..SessionUpdate::default()
    };
    store.update_session(&old.id, pin).await.unwrap();
    let newest = SessionFilter {
        order: SessionOrder::Newest,
        ..SessionFilter::of("alice", 1)
    };
    let first = store.find_sessions(&newest).await.unwrap();
    assert_eq!(ids(&first), [new.id.as_str()]);
    let next = SessionFilter {
        before: Some(ListCursor::after(&first[0].session)),
        ..newest
    };
    assert_eq!(
        ids(&store.find_sessions(&next).await.unwrap()),
        [old.id.as_str()]
    );
}

/// Sessions stored before the search migration are found after it.
#[tokio::test]
async fn the_migration_indexes_what_was_there() {
    let before_search = if crate::BACKEND == "sqlite" { 9 } else { 10 };
    let guard = crate::database_at_version(
        before_search,
        &[
            "INSERT INTO sessions (id, owner, title, workspace, model, profile, created_at, updated_at) \
             VALUES ('s1', 'alice', 'Old ocelot work', '/w', 'm', 'p', 1, 1)",
            "INSERT INTO messages (id, session_id, turn_id, position, role, content, created_at) \
             VALUES ('m1', 's1', NULL, 1, 'user', \
             '{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"x\",\"content\":\"capybara found\",\"is_error\":false}]}', 1)",
        ],
    )
    .await;
    let store = crate::reopen(&guard).await;
    for word in ["capybara", "ocelot"] {
        let hits = store.find_sessions(&search("alice", word)).await.unwrap();
        assert_eq!(ids(&hits), ["s1"], "{word}");
    }
    let read = store.get_session("s1").await.unwrap().unwrap();
    assert!(!read.pinned && !read.archived && read.tags.is_empty());
}

/// A pasted log of megabytes of distinct words: PostgreSQL refuses a
/// tsvector over 1 MiB, which must not refuse the message with it.
#[tokio::test]
async fn a_message_of_megabytes_of_distinct_words_is_kept_and_found() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    let words: Vec<String> = (0..120_000u64)
        .map(|i| format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
        .collect();
    let log = format!("okapi {}", words.join(" "));
    assert!(log.len() > 2_000_000);
    let message = Message {
        role: agentd_protocol::Role::User,
        content: vec![ContentBlock::tool_result("tu1", log.clone(), false)],
    };
    let stored = store
        .append_message(&s.id, Some("t1"), &message)
        .await
        .unwrap();
    store
        .append_message(&s.id, Some("t1"), &Message::user_text("after the log"))
        .await
        .unwrap();
    assert_eq!(store.messages(&s.id).await.unwrap()[0], stored);
    for word in ["okapi", words[1].as_str()] {
        let hits = store.find_sessions(&search("alice", word)).await.unwrap();
        assert_eq!(ids(&hits), [s.id.as_str()], "{word}");
    }
}

#[tokio::test]
async fn non_ascii_words_and_nul_are_searched_as_the_rest() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    for text in [
        "Deploy to Москва — «naïve» 東京 plan",
        "a nul \0 then a pangolin",
    ] {
        store
            .append_message(&s.id, None, &Message::user_text(text))
            .await
            .unwrap();
    }
    for query in [
        "москва",
        "deploy МОСКВА",
        "naïve 東京",
        "pangolin",
        "\"nul then\"",
    ] {
        let hits = store.find_sessions(&search("alice", query)).await.unwrap();
        assert_eq!(ids(&hits), [s.id.as_str()], "{query}");
    }
    // Every word counts: an unknown one is not dropped.
    for query in ["deploy берлин", "naive"] {
        let hits = store.find_sessions(&search("alice", query)).await.unwrap();
        assert!(hits.is_empty(), "{query}: {hits:?}");
    }
}

/// An imported session's messages are searched as appended ones are.
#[tokio::test]
async fn an_imported_session_is_found() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    a_turn_with_tools(&store, &s.id).await;
    let export = store.export_session(&s.id).await.unwrap().unwrap();
    let (_other_guard, other) = crate::store().await;
    other.import_session(&export).await.unwrap();
    let hits = other
        .find_sessions(&search("alice", "narwhal"))
        .await
        .unwrap();
    assert_eq!(ids(&hits), [s.id.as_str()]);
}

/// Filing a session away is no activity: pin, archive and tags keep its
/// `updated_at`; a pinned session is never a retention candidate.
#[tokio::test]
async fn filing_keeps_updated_at_and_pins_keep_from_retention() {
    let (_guard, store) = store().await;
    let pinned = session(&store, "alice").await;
    let archived = session(&store, "alice").await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let pin = SessionUpdate {
        pinned: Some(true),
        tags: Some(vec!["keep".into()]),
        ..SessionUpdate::default()
    };
    let read = store.update_session(&pinned.id, pin).await.unwrap();
    assert_eq!(read.updated_at, pinned.updated_at);
    let archive = SessionUpdate {
        archived: Some(true),
        ..SessionUpdate::default()
    };
    let read = store.update_session(&archived.id, archive).await.unwrap();
    assert_eq!(read.updated_at, archived.updated_at);
    let later = chrono::Utc::now() + chrono::Duration::seconds(1);
    let old = store.sessions_updated_before(later, 100).await.unwrap();
    assert_eq!(ids_of(&old), [archived.id.as_str()]);
    // A rename is activity.
    let rename = SessionUpdate {
        title: Some("renamed".into()),
        ..SessionUpdate::default()
    };
    let read = store.update_session(&archived.id, rename).await.unwrap();
    assert!(read.updated_at > archived.updated_at);
}

fn ids_of(sessions: &[agentd_store::SessionRecord]) -> Vec<&str> {
    sessions.iter().map(|s| s.id.as_str()).collect()
}

/// Messages of `session_id` queued for search, not yet indexed.
async fn queued(store: &crate::TestStore, session_id: &str) -> usize {
    crate::strings(
        store,
        "SELECT p.message_id FROM search_pending AS p \
         JOIN messages AS m ON m.id = p.message_id WHERE m.session_id = $1",
        session_id,
    )
    .await
    .len()
}

#[tokio::test]
async fn appends_queue_messages_and_the_indexer_takes_them_in_batches() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    // The session's title is indexed at once.
    let title = crate::count_rows(&store, "search_docs", &s.id).await;
    for word in ["capybara", "ocelot", "tapir"] {
        store
            .append_message(&s.id, Some("t1"), &Message::user_text(word))
            .await
            .unwrap();
    }
    let indexed = async || crate::count_rows(&store, "search_docs", &s.id).await - title;
    assert_eq!((queued(&store, &s.id).await, indexed().await), (3, 0));
    assert_eq!(store.index_pending_search(2).await.unwrap(), 2);
    assert_eq!((queued(&store, &s.id).await, indexed().await), (1, 2));
    assert_eq!(store.index_pending_search(2).await.unwrap(), 1);
    assert_eq!(store.index_pending_search(2).await.unwrap(), 0);
    assert_eq!((queued(&store, &s.id).await, indexed().await), (0, 3));
    let hits = store
        .find_sessions(&search("alice", "ocelot"))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);

    // A search indexes what is queued before it reads the index.
    store
        .append_message(&s.id, None, &Message::user_text("okapi"))
        .await
        .unwrap();
    assert_eq!(queued(&store, &s.id).await, 1);
    let hits = store
        .find_sessions(&search("alice", "okapi"))
        .await
        .unwrap();
    assert_eq!(ids(&hits), [s.id.as_str()]);
    assert_eq!((queued(&store, &s.id).await, indexed().await), (0, 4));

    // A deleted session leaves nothing queued.
    let gone = session(&store, "alice").await;
    store
        .append_message(&gone.id, None, &Message::user_text("quoll"))
        .await
        .unwrap();
    assert_eq!(queued(&store, &gone.id).await, 1);
    assert!(store.delete_session(&gone.id).await.unwrap());
    assert_eq!(queued(&store, &gone.id).await, 0);
    assert_eq!(store.index_pending_search(10).await.unwrap(), 0);
}
