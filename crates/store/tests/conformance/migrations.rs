//! Migrating an empty database, re-running migrations, and data that is not
//! what this code wrote.

use agentd_protocol::{Message, TurnStatus};
use agentd_store::prelude::*;
use agentd_store::{SessionStatus, SessionUpdate, StoreError};

use crate::{delta, session, store};

#[tokio::test]
async fn a_fresh_database_has_every_table_empty() {
    let (_guard, store) = store().await;
    for table in [
        "users",
        "api_tokens",
        "sessions",
        "messages",
        "events",
        "turns",
        "pending_requests",
        "checkpoints",
        "blobs",
        "session_rules",
        "compactions",
        "agent_uids",
        "grants",
        "spend_days",
        "turn_starts",
        "audit_log",
        "health_probe",
        "session_mounts",
        "signing_keys",
    ] {
        let n = crate::strings(
            &store,
            &format!("SELECT CAST(COUNT(*) AS TEXT) FROM {table} WHERE '' = $1"),
            "",
        )
        .await;
        assert_eq!(n, ["0"], "{table}");
    }
}

#[tokio::test]
async fn reopening_reruns_migrations_and_keeps_everything() {
    let (guard, store) = store().await;
    let s = session(&store, "alice").await;
    let events = vec![
        store.append_event(&s.id, &delta("one")).await.unwrap(),
        store.append_event(&s.id, &delta("two")).await.unwrap(),
    ];
    let message = store
        .append_message(&s.id, Some("t1"), &Message::user_text("hi"))
        .await
        .unwrap();
    store.start_turn(&s.id, "t1", Some("r1")).await.unwrap();
    store.add_session_rule(&s.id, "Bash(ls)").await.unwrap();
    let user = store.create_user("alice").await.unwrap();
    let s = store
        .update_session(
            &s.id,
            SessionUpdate {
                status: Some(SessionStatus::Running),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    drop(store);

    // Twice: migrating an up-to-date database is a no-op.
    for _ in 0..2 {
        let store = crate::reopen(&guard).await;
        assert_eq!(store.get_session(&s.id).await.unwrap().unwrap(), s);
        assert_eq!(store.events_after(&s.id, 0, 10).await.unwrap(), events);
        assert_eq!(store.messages(&s.id).await.unwrap(), vec![message.clone()]);
        assert_eq!(store.running_turns().await.unwrap().len(), 1);
        assert_eq!(store.session_rules(&s.id).await.unwrap(), ["Bash(ls)"]);
        assert_eq!(
            store.get_user_by_name("alice").await.unwrap().unwrap(),
            user
        );
    }
    let store = crate::reopen(&guard).await;
    // After a restart: interrupt what was running, and carry on.
    store
        .finish_turn("t1", TurnStatus::Interrupted)
        .await
        .unwrap();
    assert_eq!(
        store
            .append_event(&s.id, &delta("three"))
            .await
            .unwrap()
            .seq,
        3
    );
}

#[tokio::test]
async fn two_stores_on_one_database_share_data() {
    let (guard, first) = store().await;
    let second = crate::reopen(&guard).await;
    let s = session(&first, "alice").await;
    assert_eq!(second.get_session(&s.id).await.unwrap().unwrap(), s);
    let mut seqs = Vec::new();
    for i in 0..10 {
        let store = if i % 2 == 0 { &first } else { &second };
        seqs.push(store.append_event(&s.id, &delta("x")).await.unwrap().seq);
    }
    assert_eq!(seqs, (1..=10).collect::<Vec<_>>());
}

#[tokio::test]
async fn undecodable_rows_are_corrupt() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    store.append_event(&s.id, &delta("x")).await.unwrap();
    store
        .append_message(&s.id, None, &Message::user_text("x"))
        .await
        .unwrap();
    crate::exec(&store, "UPDATE events SET data = '{\"type\":\"nope\"}'").await;
    crate::exec(&store, "UPDATE messages SET content = 'not json'").await;
    let err = store.events_after(&s.id, 0, 10).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err}");
    let err = store.messages(&s.id).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err}");

    crate::exec(&store, "UPDATE sessions SET status = 'weird'").await;
    let err = store.get_session(&s.id).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err}");
}

/// Two stores on one database stand for two processes (two servers).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_stores_appending_at_once_stay_gapless() {
    let (guard, first) = store().await;
    let second = crate::reopen(&guard).await;
    let s = session(&first, "alice").await;
    let mut tasks = Vec::new();
    for t in 0..8 {
        let store = if t % 2 == 0 {
            first.clone()
        } else {
            second.clone()
        };
        let id = s.id.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..25 {
                store
                    .append_event(&id, &delta(&format!("{t}-{i}")))
                    .await
                    .unwrap();
                if i % 5 == 0 {
                    store
                        .append_message(&id, None, &Message::user_text(format!("{t}-{i}")))
                        .await
                        .unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let seqs: Vec<_> = second
        .events_after(&s.id, 0, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (1..=200).collect::<Vec<_>>());
    let positions: Vec<_> = first
        .messages(&s.id)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.position)
        .collect();
    assert_eq!(positions, (1..=40).collect::<Vec<_>>());
}

#[tokio::test]
async fn probe_write_keeps_one_row_however_often_it_runs() {
    let (_guard, store) = store().await;
    for _ in 0..3 {
        store.probe_write().await.unwrap();
    }
    let n = crate::strings(
        &store,
        "SELECT CAST(COUNT(*) AS TEXT) FROM health_probe WHERE '' = $1",
        "",
    )
    .await;
    assert_eq!(n, ["1"]);
}
