use agentd_protocol::{Message, TurnStatus};
use agentd_store::prelude::*;
use agentd_store::sqlite::{Connections, SqliteStore};
use agentd_store::{SessionStatus, SessionUpdate, StoreError, TurnStart};

use crate::{delta, new_session, session};

#[tokio::test]
async fn data_survives_reopening_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/deeper/agentd.db");

    let store = SqliteStore::open(&path).await.unwrap();
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
    store.close().await;
    // Closed, it reads nothing more (its reads on the asking thread neither).
    assert!(store.get_session(&s.id).await.is_err());
    drop(store);

    // Reopening migrates again (a no-op) and finds everything.
    let store = SqliteStore::open(&path).await.unwrap();
    assert_eq!(store.get_session(&s.id).await.unwrap().unwrap(), s);
    assert_eq!(store.events_after(&s.id, 0, 10).await.unwrap(), events);
    assert_eq!(store.messages(&s.id).await.unwrap(), vec![message]);
    let running = store.running_turns().await.unwrap();
    assert_eq!(running.len(), 1);
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

/// A one-shot run's store (`agentd run`, `agentd claude`) is never closed:
/// the close of the last connection would fold the whole log into the file
/// and sync it on the process's exit path. Dropped, it leaves the log as a
/// crash would, and the next opener finds everything. A command's store of
/// one connection (`gc`, `tokens`, …) still folds it at its close.
#[tokio::test]
async fn a_one_shot_store_leaves_its_log_and_loses_nothing() {
    /// The log's size once it is gone, or after `wait`.
    async fn log_left_by(connections: Connections, wait: std::time::Duration) -> u64 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentd.db");
        let one = SqliteStore::open_with_connections(&path, connections)
            .await
            .unwrap();
        let s = session(&one, "alice").await;
        let appended = one.append_event(&s.id, &delta("kept")).await.unwrap();
        drop(one);
        // sqlx's and the writer's threads close theirs after the drop.
        let wal = dir.path().join("agentd.db-wal");
        let deadline = tokio::time::Instant::now() + wait;
        let log = loop {
            let log = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
            if log == 0 || tokio::time::Instant::now() >= deadline {
                break log;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        let pooled = SqliteStore::open(&path).await.unwrap();
        assert_eq!(
            pooled.events_after(&s.id, 0, 10).await.unwrap(),
            vec![appended]
        );
        log
    }
    let (long, short) = (
        std::time::Duration::from_secs(10),
        std::time::Duration::from_millis(300),
    );
    assert!(
        log_left_by(Connections::OneShot, short).await > 0,
        "the log was folded at the drop"
    );
    assert_eq!(
        log_left_by(Connections::One, long).await,
        0,
        "the log was not folded at the close"
    );
}

#[tokio::test]
async fn two_stores_on_one_file_share_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentd.db");
    let first = SqliteStore::open(&path).await.unwrap();
    let second = SqliteStore::open(&path).await.unwrap();
    let s = session(&first, "alice").await;
    assert_eq!(
        second.append_event(&s.id, &delta("a")).await.unwrap().seq,
        1
    );
    assert_eq!(first.append_event(&s.id, &delta("b")).await.unwrap().seq, 2);
    assert_eq!(second.events_after(&s.id, 0, 10).await.unwrap().len(), 2);
    // Same client_request_id through two stores (no shared in-process lock).
    assert!(matches!(
        first.start_turn(&s.id, "t1", Some("r")).await.unwrap(),
        TurnStart::Started(_)
    ));
    assert!(matches!(
        second.start_turn(&s.id, "t2", Some("r")).await.unwrap(),
        TurnStart::Duplicate(_)
    ));
}

/// `agentd run` opens one connection (and its event writer one of its own):
/// many tasks' statements take turns on it (none waits forever for a
/// second), beside a server's pool on the file.
#[tokio::test]
async fn a_one_connection_store_serves_many_tasks_beside_a_pool() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentd.db");
    let one = SqliteStore::open_with_connections(&path, Connections::One)
        .await
        .unwrap();
    let pooled = SqliteStore::open(&path).await.unwrap();
    let s = session(&one, "alice").await;
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let (one, id) = (one.clone(), s.id.clone());
            tokio::spawn(async move {
                let seq = one
                    .append_event(&id, &delta(&i.to_string()))
                    .await
                    .unwrap()
                    .seq;
                one.events_after(&id, seq - 1, 10).await.unwrap();
                one.append_message(&id, None, &Message::user_text(format!("m{i}")))
                    .await
                    .unwrap();
                seq
            })
        })
        .collect();
    let all = async {
        let mut seqs = Vec::new();
        for task in tasks {
            seqs.push(task.await.unwrap());
        }
        seqs
    };
    let mut seqs = tokio::time::timeout(std::time::Duration::from_secs(30), all)
        .await
        .expect("the tasks finish on one connection");
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=32).collect::<Vec<_>>());
    assert_eq!(pooled.events_after(&s.id, 0, 100).await.unwrap().len(), 32);
    assert_eq!(pooled.messages(&s.id).await.unwrap().len(), 32);
    assert_eq!(one.pool().size(), 1, "one pooled connection, never more");
}

#[cfg(unix)]
#[tokio::test]
async fn created_dirs_and_file_are_private() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("data");
    let path = parent.join("agentd.db");
    let _store = SqliteStore::open(&path).await.unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&parent), 0o700);
    assert_eq!(mode(&path), 0o600);
}

#[tokio::test]
async fn wal_and_foreign_keys_are_on() {
    let (_dir, store) = crate::store().await;
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    let fk: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(fk, 1);
    for table in [
        "users",
        "api_tokens",
        "pending_requests",
        "checkpoints",
        "blobs",
    ] {
        let n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(n, 0, "{table}");
    }
}

#[tokio::test]
async fn open_url_accepts_files_and_memory() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("u/agentd.db").display());
    let store = SqliteStore::open_url(&url).await.unwrap();
    let s = session(&store, "alice").await;
    store.close().await;
    let store = SqliteStore::open_url(&url).await.unwrap();
    assert!(store.get_session(&s.id).await.unwrap().is_some());

    let err = SqliteStore::open_url("postgres://x").await.unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_store_works_and_is_private() {
    let store = SqliteStore::open_url("sqlite::memory:").await.unwrap();
    let other = SqliteStore::open_url("sqlite::memory:").await.unwrap();
    let s = store.create_session(new_session("alice")).await.unwrap();
    assert!(other.get_session(&s.id).await.unwrap().is_none());

    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = store.clone();
        let id = s.id.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                store.append_event(&id, &delta("x")).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let seqs: Vec<_> = store
        .events_after(&s.id, 0, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (1..=200).collect::<Vec<_>>());
}

/// Appends commit with no checkpoint inside them; one runs beside the
/// writer soon after, so the WAL is copied back and reused rather than
/// growing with everything ever appended.
#[tokio::test]
async fn the_wal_is_checkpointed_beside_the_appends_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentd.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let s = session(&store, "alice").await;
    let wal = dir.path().join("agentd.db-wal");
    let text = "x".repeat(4000);
    let burst = || async {
        // ~8 MiB: 2 000 pages, over SQLite's own threshold of 1 000.
        for _ in 0..32 {
            let batch: Vec<_> = (0..64).map(|_| delta(&text)).collect();
            store.append_events(&s.id, &batch).await.unwrap();
        }
    };
    burst().await;
    let after_one = std::fs::metadata(&wal).unwrap().len();
    assert!(after_one > 8 << 20, "the WAL holds the burst: {after_one}");
    // The checkpoint beside the writer copies it back; the next burst then
    // writes the WAL from its start again.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    burst().await;
    let after_two = std::fs::metadata(&wal).unwrap().len();
    assert!(
        after_two < after_one + (after_one / 2),
        "the WAL grew with both bursts: {after_one} then {after_two}"
    );
    let events = store.events_after(&s.id, 0, 5000).await.unwrap();
    assert_eq!(events.len(), 2 * 32 * 64);
}
