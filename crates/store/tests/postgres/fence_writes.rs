//! A leased turn's own writes besides its appends (`TurnStore::*_fenced`,
//! `add_compaction_fenced`): its row, its status, its session's update and
//! its compactions are written only while its node holds the turn's lease.

use agentd_store::prelude::*;

use agentd_protocol::{Message, TurnStatus};
use agentd_store::postgres::PostgresStore;
use agentd_store::{CompactionRecord, Fence, SessionStatus, SessionUpdate, StoreError, TurnStart};

use super::cluster::TIMEOUT;
use super::fence::{fence, leased_session, n1_falls_silent};
use super::{count_rows, strings};

fn compaction(id: &str, session: &str) -> CompactionRecord {
    CompactionRecord {
        id: id.into(),
        session_id: session.into(),
        turn_id: Some("t1".into()),
        trigger: "auto".into(),
        summary: "summary".into(),
        context: vec![Message::user_text("context")],
        first_kept_position: 1,
        tokens_before: 2,
        tokens_after: 1,
        created_at: chrono::Utc::now(),
    }
}

fn status(status: SessionStatus) -> SessionUpdate {
    SessionUpdate {
        status: Some(status),
        ..SessionUpdate::default()
    }
}

async fn session_status(store: &PostgresStore, session: &str) -> SessionStatus {
    store.get_session(session).await.unwrap().unwrap().status
}

fn lost<T: std::fmt::Debug>(result: Result<T, StoreError>) -> bool {
    matches!(result, Err(StoreError::LeaseLost(_)))
}

/// Every fenced write of `fence`'s turn is refused (`LeaseLost`).
async fn all_refused(store: &PostgresStore, s: &str, fence: &Fence) {
    assert!(lost(store.start_turn_fenced(s, fence, None).await));
    assert!(lost(
        store.finish_turn_fenced(s, fence, TurnStatus::Failed).await
    ));
    let running = status(SessionStatus::Running);
    assert!(lost(store.update_session_fenced(s, fence, running).await));
    let record = compaction("refused", s);
    assert!(lost(store.add_compaction_fenced(&record, fence).await));
}

#[tokio::test]
async fn only_the_node_holding_the_lease_starts_finishes_and_updates_its_turn() {
    let (_schema, store, _cluster, s) = leased_session().await;
    let (n1, n2) = (fence("n1", "t1"), fence("n2", "t1"));

    all_refused(&store, &s, &n2).await;
    assert!(store.running_turns().await.unwrap().is_empty());
    let started = store.start_turn_fenced(&s, &n1, Some("r1")).await.unwrap();
    assert!(matches!(started, TurnStart::Started(_)), "{started:?}");
    assert_eq!(session_status(&store, &s).await, SessionStatus::Running);
    // The same request again: the turn it started.
    let again = store.start_turn_fenced(&s, &n1, Some("r1")).await.unwrap();
    assert!(matches!(again, TurnStart::Duplicate(_)), "{again:?}");

    all_refused(&store, &s, &n2).await;
    assert_eq!(store.running_turns().await.unwrap().len(), 1);
    assert_eq!(session_status(&store, &s).await, SessionStatus::Running);
    store
        .add_compaction_fenced(&compaction("c1", &s), &n1)
        .await
        .unwrap();
    assert_eq!(count_rows(&store, "compactions", &s).await, 1);

    store
        .finish_turn_fenced(&s, &n1, TurnStatus::Completed)
        .await
        .unwrap();
    store
        .update_session_fenced(&s, &n1, status(SessionStatus::Idle))
        .await
        .unwrap();
    assert!(store.running_turns().await.unwrap().is_empty());
    assert_eq!(session_status(&store, &s).await, SessionStatus::Idle);
    // Finished already: the first status stays.
    store
        .finish_turn_fenced(&s, &n1, TurnStatus::Failed)
        .await
        .unwrap();
    let statuses = strings(&store, "SELECT status FROM turns WHERE id = $1", "t1").await;
    assert_eq!(statuses, ["completed"]);
    let unknown = fence("n1", "no-such-turn");
    let missing = store
        .finish_turn_fenced(&s, &unknown, TurnStatus::Failed)
        .await;
    assert!(lost(missing), "not this turn's lease");
    let gone = store
        .update_session_fenced("no-such-session", &n1, status(SessionStatus::Idle))
        .await;
    assert!(matches!(gone, Err(StoreError::NotFound(_))), "{gone:?}");
}

/// A node claims `t1`, pauses before recording its start; the survivor
/// finishes the turn, sets the session idle and releases the lease. The
/// woken node creates no turn row and cannot mark the session again (else
/// the next start's `orphan_turns` would end the turn a second time).
#[tokio::test]
async fn a_node_woken_after_a_takeover_records_nothing_of_its_turn() {
    let (_schema, store, cluster, s) = leased_session().await;
    n1_falls_silent(&store).await;
    assert_eq!(
        cluster.take_dead_leases("n2", TIMEOUT).await.unwrap().len(),
        1
    );
    let survivor = store.finish_turn("t1", TurnStatus::Interrupted).await;
    assert!(
        matches!(survivor, Err(StoreError::NotFound(_))),
        "no row yet"
    );
    store
        .update_session(&s, status(SessionStatus::Idle))
        .await
        .unwrap();
    cluster.release_lease(&s, "t1", "n2").await.unwrap();

    all_refused(&store, &s, &fence("n1", "t1")).await;
    assert_eq!(count_rows(&store, "compactions", &s).await, 0);
    assert!(store.running_turns().await.unwrap().is_empty());
    assert_eq!(session_status(&store, &s).await, SessionStatus::Idle);
    assert!(cluster.orphan_turns().await.unwrap().is_empty());
}
