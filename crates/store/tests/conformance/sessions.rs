use agentd_protocol::Usage;
use agentd_store::prelude::*;
use agentd_store::{NewSession, SessionStatus, SessionUpdate, StoreError};

use crate::{new_session, session, store};

#[tokio::test]
async fn create_then_get_returns_the_same_record() {
    let (_dir, store) = store().await;
    let created = session(&store, "alice").await;
    assert_eq!(created.owner, "alice");
    assert_eq!(created.status, SessionStatus::Idle);
    assert_eq!(created.usage, Usage::default());
    assert_eq!(
        (created.turns, created.last_seq, created.cost_usd),
        (0, 0, 0.0)
    );
    assert_eq!(created.created_at, created.updated_at);
    assert_eq!(
        uuid::Uuid::parse_str(&created.id)
            .unwrap()
            .get_version_num(),
        7
    );

    let read = store.get_session(&created.id).await.unwrap().unwrap();
    assert_eq!(read, created);
    assert!(store.get_session("nope").await.unwrap().is_none());
}

#[tokio::test]
async fn caller_chosen_id_is_kept_and_must_be_unique() {
    let (_dir, store) = store().await;
    let new = NewSession {
        id: Some("my-id".into()),
        title: None,
        ..new_session("alice")
    };
    let created = store.create_session(new.clone()).await.unwrap();
    assert_eq!(created.id, "my-id");
    assert_eq!(created.title, None);
    assert!(!created.existing_workspace);
    let existing = NewSession {
        id: Some("on-a-directory".into()),
        existing_workspace: true,
        ..new_session("alice")
    };
    store.create_session(existing).await.unwrap();
    let read = store.get_session("on-a-directory").await.unwrap().unwrap();
    assert!(read.existing_workspace, "kept as created");
    let err = store.create_session(new).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Database(ref m) if m.contains("already exists")),
        "{err}"
    );
}

/// What one `PATCH` asks (title, model, thinking budget) is one write:
/// every field changes together, `updated_at` once, and an unknown session
/// changes nothing.
#[tokio::test]
async fn title_model_and_thinking_change_in_one_update() {
    let (_dir, store) = store().await;
    let created = session(&store, "alice").await;
    assert_eq!(created.thinking_budget, None, "none until set");
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let patch = SessionUpdate {
        title: Some("renamed".into()),
        model: Some("quick".into()),
        thinking_budget: Some(Some(1_000_000)),
        ..SessionUpdate::default()
    };
    let changed = store.update_session(&created.id, patch).await.unwrap();
    let read = store.get_session(&created.id).await.unwrap().unwrap();
    assert_eq!(read, changed);
    assert_eq!(
        (
            read.title.as_deref(),
            read.model.as_str(),
            read.thinking_budget
        ),
        (Some("renamed"), "quick", Some(1_000_000))
    );
    assert!(read.updated_at > created.updated_at);
    assert_eq!(
        (read.status, read.turns, read.cost_usd),
        (created.status, 0, 0.0),
        "the rest is kept"
    );

    // Fields left out are kept; `Some(None)` clears the budget.
    let keep = SessionUpdate {
        title: Some("again".into()),
        ..SessionUpdate::default()
    };
    let read = store.update_session(&created.id, keep).await.unwrap();
    assert_eq!(
        (read.model.as_str(), read.thinking_budget),
        ("quick", Some(1_000_000))
    );
    let clear = SessionUpdate {
        thinking_budget: Some(None),
        ..SessionUpdate::default()
    };
    let read = store.update_session(&created.id, clear).await.unwrap();
    assert_eq!(read.thinking_budget, None, "back to the profile's");
    assert_eq!(
        (read.title.as_deref(), read.model.as_str()),
        (Some("again"), "quick")
    );

    let unknown = SessionUpdate {
        model: Some("quick".into()),
        thinking_budget: Some(Some(4096)),
        ..SessionUpdate::default()
    };
    let err = store
        .update_session("no-such-session", unknown)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
}

#[tokio::test]
async fn list_is_newest_first_with_cursor_pages() {
    let (_dir, store) = store().await;
    // Created quickly, many share a millisecond: the id breaks the tie.
    let mut ids = Vec::new();
    for _ in 0..25 {
        ids.push(session(&store, "alice").await.id);
    }
    ids.reverse();

    let mut seen = Vec::new();
    let mut before: Option<String> = None;
    loop {
        let page = store
            .list_sessions("alice", before.as_deref(), 10)
            .await
            .unwrap();
        assert!(page.len() <= 10);
        if page.is_empty() {
            break;
        }
        before = page.last().map(|s| s.id.clone());
        seen.extend(page.into_iter().map(|s| s.id));
    }
    assert_eq!(seen, ids);

    let all = store.list_sessions("alice", None, 100).await.unwrap();
    for pair in all.windows(2) {
        assert!((pair[0].created_at, &pair[0].id) > (pair[1].created_at, &pair[1].id));
    }
    assert!(
        store
            .list_sessions("alice", None, 0)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn list_orders_by_created_at_before_id() {
    let (_dir, store) = store().await;
    // Ids that sort opposite to creation time.
    for id in ["c", "b", "a"] {
        let new = NewSession {
            id: Some(id.into()),
            ..new_session("alice")
        };
        store.create_session(new).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    let ids: Vec<_> = store
        .list_sessions("alice", None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, ["a", "b", "c"]);
    let page: Vec<_> = store
        .list_sessions("alice", Some("a"), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(page, ["b", "c"]);
}

#[tokio::test]
async fn owners_see_only_their_own_sessions() {
    let (_dir, store) = store().await;
    let a = session(&store, "alice").await;
    let b = session(&store, "bob").await;
    let alice = store.list_sessions("alice", None, 10).await.unwrap();
    assert_eq!(alice, vec![a.clone()]);
    let bob = store.list_sessions("bob", None, 10).await.unwrap();
    assert_eq!(bob, vec![b.clone()]);
    assert!(
        store
            .list_sessions("carol", None, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // Someone else's id, or an unknown one, is not a valid cursor.
    let err = store
        .list_sessions("alice", Some(&b.id), 10)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    let err = store
        .list_sessions("alice", Some("gone"), 10)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
}

#[tokio::test]
async fn update_adds_totals_and_sets_fields() {
    let (_dir, store) = store().await;
    let created = session(&store, "alice").await;
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;

    let usage = Usage {
        input_tokens: 100,
        output_tokens: 20,
        cache_read_tokens: 5,
        cache_write_tokens: 7,
    };
    let update = SessionUpdate {
        title: Some("renamed ✓".into()),
        status: Some(SessionStatus::Running),
        add_usage: Some(usage),
        add_cost_usd: Some(0.25),
        add_turns: Some(1),
        ..SessionUpdate::default()
    };
    let once = store
        .update_session(&created.id, update.clone())
        .await
        .unwrap();
    assert_eq!(once.title.as_deref(), Some("renamed ✓"));
    assert_eq!(once.status, SessionStatus::Running);
    assert_eq!(once.usage, usage);
    assert_eq!(once.cost_usd, 0.25);
    assert_eq!(once.turns, 1);
    assert!(once.updated_at > created.updated_at);
    assert_eq!(once.created_at, created.created_at);

    let twice = store
        .update_session(
            &created.id,
            SessionUpdate {
                title: None,
                status: Some(SessionStatus::Waiting),
                ..update
            },
        )
        .await
        .unwrap();
    assert_eq!(twice.title.as_deref(), Some("renamed ✓"));
    assert_eq!(twice.status, SessionStatus::Waiting);
    assert_eq!(twice.usage.input_tokens, 200);
    assert_eq!(twice.usage.cache_write_tokens, 14);
    assert_eq!(twice.cost_usd, 0.5);
    assert_eq!(twice.turns, 2);
    assert_eq!(
        store.get_session(&created.id).await.unwrap().unwrap(),
        twice
    );

    // An empty update only bumps updated_at.
    let same = store
        .update_session(&created.id, SessionUpdate::default())
        .await
        .unwrap();
    assert_eq!(same.usage, twice.usage);
    assert_eq!(same.status, SessionStatus::Waiting);

    let err = store
        .update_session("nope", SessionUpdate::default())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
}

#[tokio::test]
async fn delete_removes_the_session_and_all_its_rows() {
    use agentd_protocol::Message;

    let (_dir, store) = store().await;
    let doomed = session(&store, "alice").await;
    let kept = session(&store, "alice").await;
    for s in [&doomed, &kept] {
        store.append_event(&s.id, &crate::delta("x")).await.unwrap();
        store
            .append_message(&s.id, Some("t1"), &Message::user_text("hi"))
            .await
            .unwrap();
        store
            .start_turn(&s.id, &format!("turn-{}", s.id), None)
            .await
            .unwrap();
    }

    assert!(store.delete_session(&doomed.id).await.unwrap());
    assert!(store.get_session(&doomed.id).await.unwrap().is_none());
    for table in ["events", "messages", "turns"] {
        assert_eq!(
            crate::count_rows(&store, table, &doomed.id).await,
            0,
            "{table}"
        );
        assert_eq!(
            crate::count_rows(&store, table, &kept.id).await,
            1,
            "{table}"
        );
    }
    assert!(
        store
            .events_after(&doomed.id, 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.messages(&doomed.id).await.unwrap().is_empty());
    assert_eq!(store.running_turns().await.unwrap().len(), 1);

    assert!(!store.delete_session(&doomed.id).await.unwrap());
    assert!(!store.delete_session("never").await.unwrap());
}

#[tokio::test]
async fn sessions_updated_before_lists_idle_old_sessions_oldest_first() {
    use agentd_protocol::TurnStatus;

    let (_dir, store) = store().await;
    let a = session(&store, "alice").await;
    let b = session(&store, "bob").await;
    let busy = session(&store, "alice").await;
    store.start_turn(&busy.id, "turn-busy", None).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let cutoff = chrono::Utc::now();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let fresh = session(&store, "alice").await;

    // Of all owners; the one with a running turn and the fresh one are left out.
    let old = store.sessions_updated_before(cutoff, 100).await.unwrap();
    let ids: Vec<_> = old.iter().map(|s| s.id.as_str()).collect();
    let mut want = [(a.updated_at, a.id.as_str()), (b.updated_at, b.id.as_str())];
    want.sort();
    assert_eq!(ids, want.iter().map(|w| w.1).collect::<Vec<_>>());
    assert_eq!(old[0], store.get_session(ids[0]).await.unwrap().unwrap());
    assert_eq!(
        store
            .sessions_updated_before(cutoff, 1)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        store
            .sessions_updated_before(cutoff, 0)
            .await
            .unwrap()
            .is_empty()
    );

    // A finished turn no longer holds it back; an update makes a session new.
    store
        .finish_turn("turn-busy", TurnStatus::Completed)
        .await
        .unwrap();
    store
        .update_session(&a.id, SessionUpdate::default())
        .await
        .unwrap();
    let ids: Vec<String> = store
        .sessions_updated_before(cutoff, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert!(ids.contains(&busy.id) && ids.contains(&b.id), "{ids:?}");
    assert!(!ids.contains(&a.id) && !ids.contains(&fresh.id), "{ids:?}");

    let later = chrono::Utc::now() + chrono::Duration::seconds(1);
    assert_eq!(
        store
            .sessions_updated_before(later, 100)
            .await
            .unwrap()
            .len(),
        4
    );
}
