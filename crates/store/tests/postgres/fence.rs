//! Fenced appends (`EventLog::append_log_fenced`): a leased turn's events and
//! messages are stored only while its node holds the lease, serialised
//! against a takeover.

use agentd_store::prelude::*;
use std::time::Duration;

use agentd_protocol::Message;
use agentd_store::postgres::PostgresStore;
use agentd_store::postgres::cluster::ClusterStore;
use agentd_store::{Fence, LogEntry, StoreError};
use sqlx::Connection;

use super::cluster::{TIMEOUT, nodes, turn};
use super::{Schema, count_rows, delta, exec, session, store};

pub(super) fn fence(node: &str, turn: &str) -> Fence {
    Fence {
        node_id: node.into(),
        turn_id: turn.into(),
    }
}

/// One delta and one message of turn `t1`, appended with `fence`: how many
/// were stored, and the error that stopped them.
async fn append(
    store: &PostgresStore,
    session: &str,
    fence: &Fence,
) -> (usize, Option<StoreError>) {
    let (event, message) = (delta("d"), Message::user_text("m"));
    let entries = [
        LogEntry::Event(&event),
        LogEntry::Message {
            turn_id: Some("t1"),
            message: &message,
        },
    ];
    let appended = store.append_log_fenced(session, fence, &entries).await;
    (appended.stored.len(), appended.error)
}

/// A session whose turn `t1` node `n1` holds (`n2` is alive too).
pub(super) async fn leased_session() -> (Schema, PostgresStore, ClusterStore, String) {
    let (schema, store) = store().await;
    let cluster = store.cluster();
    nodes(&cluster, &["n1", "n2"]).await;
    let s = session(&store, "u").await.id;
    cluster
        .enqueue_turn(&turn(&s, "t1", None), false)
        .await
        .unwrap();
    let (_, lease) = cluster
        .claim_turn("n1", None, TIMEOUT)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.node_id, "n1");
    (schema, store, cluster, s)
}

/// `(events, messages)` stored in the session.
async fn counts(store: &PostgresStore, session: &str) -> (i64, i64) {
    (
        count_rows(store, "events", session).await,
        count_rows(store, "messages", session).await,
    )
}

#[tokio::test]
async fn only_the_node_holding_the_lease_appends_and_a_taken_over_turn_is_closed() {
    let (_schema, store, cluster, s) = leased_session().await;

    assert!(matches!(
        append(&store, &s, &fence("n1", "t1")).await,
        (2, None)
    ));
    assert_eq!(counts(&store, &s).await, (1, 1));
    // Another node, or another turn of the session: refused, nothing stored.
    for wrong in [fence("n2", "t1"), fence("n1", "t0")] {
        let (stored, error) = append(&store, &s, &wrong).await;
        assert_eq!(stored, 0);
        assert!(matches!(error, Some(StoreError::LeaseLost(_))), "{error:?}");
    }
    // A message first goes through its own (fenced) transaction.
    let message = Message::user_text("m");
    let only_message = [LogEntry::Message {
        turn_id: Some("t1"),
        message: &message,
    }];
    let appended = store
        .append_log_fenced(&s, &fence("n2", "t1"), &only_message)
        .await;
    assert!(matches!(appended.error, Some(StoreError::LeaseLost(_))));
    assert_eq!(counts(&store, &s).await, (1, 1));

    // n1 falls silent and n2 takes the turn over: n1 is fenced out, n2 (the
    // survivor recording the turn's end) is not.
    n1_falls_silent(&store).await;
    assert_eq!(
        cluster.take_dead_leases("n2", TIMEOUT).await.unwrap().len(),
        1
    );
    let (stored, error) = append(&store, &s, &fence("n1", "t1")).await;
    assert_eq!(stored, 0);
    let error = error.expect("refused");
    assert!(matches!(error, StoreError::LeaseLost(_)), "{error}");
    assert!(error.to_string().contains("n1"), "{error}");
    assert_eq!(counts(&store, &s).await, (1, 1));
    assert!(matches!(
        append(&store, &s, &fence("n2", "t1")).await,
        (2, None)
    ));
    // Unfenced appends (the survivor's own `turn.finished`, a rename) and
    // the seq stay as they were: gapless.
    store.append_event(&s, &delta("after")).await.unwrap();
    let seqs: Vec<u64> = store
        .events_after(&s, 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [1, 2, 3]);

    // Released: nobody's fence holds any more. A deleted session is not found.
    cluster.release_lease(&s, "t1", "n2").await.unwrap();
    let (_, error) = append(&store, &s, &fence("n2", "t1")).await;
    assert!(matches!(error, Some(StoreError::LeaseLost(_))), "{error:?}");
    let (_, error) = append(&store, "no-such-session", &fence("n2", "t1")).await;
    assert!(matches!(error, Some(StoreError::NotFound(_))), "{error:?}");
}

/// n1 (holding turn `t1`'s lease) stops beating: others may take it over.
pub(super) async fn n1_falls_silent(store: &PostgresStore) {
    exec(
        store,
        "UPDATE cluster_nodes SET heartbeat_at = now() - interval '1 hour' WHERE id = 'n1'",
    )
    .await;
}

/// A fenced append of `entry` waiting for its session's row (another
/// transaction holds it `FOR UPDATE`) already holds the turn's lease: a
/// takeover skips it meanwhile, and once the row is free it is stored.
async fn a_waiting_append_holds_the_lease(entry: LogEntry<'static>) {
    let (_schema, store, cluster, s) = leased_session().await;
    n1_falls_silent(&store).await;
    let options = (*store.pool().connect_options()).clone();
    let mut other = sqlx::PgConnection::connect_with(&options).await.unwrap();
    let holder: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut other)
        .await
        .unwrap();
    let mut tx = other.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE")
        .bind(&s)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    let appending = tokio::spawn({
        let (store, s) = (store.clone(), s.clone());
        async move {
            let appended = store
                .append_log_fenced(&s, &fence("n1", "t1"), &[entry])
                .await;
            (appended.stored.len(), appended.error)
        }
    });
    // Until the append is blocked by the row's holder (so it has taken
    // the lease row already): a fixed sleep could let the takeover go first
    // on a loaded machine.
    let waiting = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))";
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let blocked: i64 = sqlx::query_scalar(waiting)
            .bind(holder)
            .fetch_one(store.pool())
            .await
            .unwrap();
        if blocked > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline && !appending.is_finished(),
            "the append never waited for the session row"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        cluster
            .take_dead_leases("n2", TIMEOUT)
            .await
            .unwrap()
            .is_empty(),
        "a takeover skips the lease a waiting append holds"
    );
    tx.commit().await.unwrap();
    let (stored, error) = appending.await.unwrap();
    assert!(error.is_none(), "{error:?}");
    assert_eq!(stored, 1);
    // Once it committed, the takeover goes through.
    assert_eq!(
        cluster.take_dead_leases("n2", TIMEOUT).await.unwrap().len(),
        1
    );
}

#[tokio::test]
async fn a_fenced_event_append_waiting_for_its_session_holds_the_lease() {
    static DELTA: std::sync::LazyLock<agentd_protocol::Event> =
        std::sync::LazyLock::new(|| delta("d"));
    a_waiting_append_holds_the_lease(LogEntry::Event(&DELTA)).await;
}

#[tokio::test]
async fn a_fenced_message_append_waiting_for_its_session_holds_the_lease() {
    static MESSAGE: std::sync::LazyLock<Message> =
        std::sync::LazyLock::new(|| Message::user_text("m"));
    a_waiting_append_holds_the_lease(LogEntry::Message {
        turn_id: Some("t1"),
        message: &MESSAGE,
    })
    .await;
}

#[tokio::test]
async fn an_append_after_a_takeover_in_flight_waits_for_it_and_is_refused() {
    let (_schema, store, _cluster, s) = leased_session().await;
    let options = (*store.pool().connect_options()).clone();
    // A takeover in flight: the append waits for it, then is refused.
    let mut takeover = sqlx::PgConnection::connect_with(&options).await.unwrap();
    let mut tx = takeover.begin().await.unwrap();
    sqlx::query("UPDATE turn_leases SET node_id = 'n2' WHERE session_id = $1")
        .bind(&s)
        .execute(&mut *tx)
        .await
        .unwrap();
    let appending = tokio::spawn({
        let (store, s) = (store.clone(), s.clone());
        async move { append(&store, &s, &fence("n1", "t1")).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !appending.is_finished(),
        "the append waits for the takeover"
    );
    tx.commit().await.unwrap();
    let (stored, error) = appending.await.unwrap();
    assert_eq!(stored, 0);
    assert!(matches!(error, Some(StoreError::LeaseLost(_))), "{error:?}");
    assert_eq!(counts(&store, &s).await, (0, 0));
}
