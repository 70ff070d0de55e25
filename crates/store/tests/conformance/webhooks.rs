use std::collections::HashSet;
use std::time::Duration;

use agentd_store::prelude::*;
use agentd_store::{AttemptResult, DeliveryStatus, NewDelivery};
use chrono::Utc;

use crate::{count_rows, session, store};

fn delivery(id: &str, session_id: &str) -> NewDelivery {
    NewDelivery {
        id: id.into(),
        webhook: "ops".into(),
        event: "turn.finished".into(),
        session_id: session_id.into(),
        payload: format!("{{\"delivery_id\":\"{id}\"}}"),
        created_at: Utc::now(),
    }
}

fn ops() -> Vec<String> {
    vec!["ops".to_string()]
}

/// Sessions that exist, by the short names the tests use.
async fn sessions(store: &impl Store, count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..count {
        ids.push(session(store, "alice").await.id);
    }
    ids
}

async fn queue(store: &impl Store, id: &str, session_id: &str) {
    store
        .enqueue_delivery(&delivery(id, session_id))
        .await
        .unwrap();
}

/// What `owner` claims now of `ops`' deliveries, under a 30 s lease.
async fn claim(store: &impl Store, owner: &str, limit: u32) -> Vec<agentd_store::DeliveryRecord> {
    store
        .claim_deliveries(owner, &ops(), Utc::now(), lease(), limit)
        .await
        .unwrap()
}

fn lease() -> chrono::DateTime<Utc> {
    Utc::now() + Duration::from_secs(30)
}

fn ids(records: &[agentd_store::DeliveryRecord]) -> Vec<&str> {
    records.iter().map(|r| r.id.as_str()).collect()
}

fn retry_now(error: &str) -> AttemptResult {
    AttemptResult {
        status: DeliveryStatus::Pending,
        http_status: Some(500),
        error: Some(error.into()),
        next_attempt_at: Some(Utc::now()),
    }
}

fn delivered() -> AttemptResult {
    AttemptResult {
        status: DeliveryStatus::Delivered,
        http_status: Some(204),
        error: None,
        next_attempt_at: None,
    }
}

#[tokio::test]
async fn deliveries_go_out_in_order_per_session_and_leased_once() {
    let (_dir, store) = store().await;
    let s = sessions(&store, 2).await;
    for (id, session) in [("d1", &s[0]), ("d2", &s[0]), ("d3", &s[1])] {
        store
            .enqueue_delivery(&delivery(id, session))
            .await
            .unwrap();
    }

    // The second of s1 waits for the first; s2's goes at once.
    let first = claim(&store, "a", 10).await;
    assert_eq!(ids(&first), ["d1", "d3"]);
    // Leased: nobody else gets them, and d2 still waits.
    let other = claim(&store, "b", 10).await;
    assert!(other.is_empty(), "{other:?}");

    // A failed attempt keeps d1 first in line.
    assert!(
        store
            .record_attempt("d1", "a", &retry_now("HTTP 500"))
            .await
            .unwrap()
    );
    // Only the lease holder records.
    assert!(!store.record_attempt("d3", "b", &delivered()).await.unwrap());
    assert!(store.record_attempt("d3", "a", &delivered()).await.unwrap());
    let again = claim(&store, "b", 10).await;
    assert_eq!(ids(&again), ["d1"]);
    assert_eq!(again[0].attempts, 1);
    assert_eq!(again[0].last_status, Some(500));
    assert!(store.record_attempt("d1", "b", &delivered()).await.unwrap());

    let next = claim(&store, "a", 10).await;
    assert_eq!(ids(&next), ["d2"]);
    let gave_up = AttemptResult {
        status: DeliveryStatus::Failed,
        http_status: None,
        error: Some("connection refused".into()),
        next_attempt_at: None,
    };
    assert!(store.record_attempt("d2", "a", &gave_up).await.unwrap());

    let log = store.list_deliveries(None, 10).await.unwrap();
    assert_eq!(ids(&log), ["d3", "d2", "d1"]);
    let d1 = &log[2];
    assert_eq!((d1.status, d1.attempts), (DeliveryStatus::Delivered, 2));
    assert!(d1.delivered_at.is_some());
    assert_eq!(log[1].last_error.as_deref(), Some("connection refused"));
    let failed = store
        .list_deliveries(Some(DeliveryStatus::Failed), 10)
        .await
        .unwrap();
    assert_eq!(ids(&failed), ["d2"]);
    assert!(claim(&store, "a", 10).await.is_empty());
}

#[tokio::test]
async fn a_later_attempt_waits_for_its_time_and_an_expired_lease_is_taken_over() {
    let (_dir, store) = store().await;
    let s = sessions(&store, 1).await;
    queue(&store, "d1", &s[0]).await;
    let short = Utc::now() + Duration::from_millis(1);
    assert_eq!(
        store
            .claim_deliveries("a", &ops(), Utc::now(), short, 1)
            .await
            .unwrap()
            .len(),
        1
    );
    tokio::time::sleep(Duration::from_millis(5)).await;
    // `a` stopped answering: its lease ran out, `b` takes the row.
    let taken = claim(&store, "b", 1).await;
    assert_eq!(ids(&taken), ["d1"]);
    let later = AttemptResult {
        next_attempt_at: Some(Utc::now() + Duration::from_secs(60)),
        ..retry_now("timed out")
    };
    assert!(store.record_attempt("d1", "b", &later).await.unwrap());
    assert!(claim(&store, "b", 1).await.is_empty());
    let soon = Utc::now() + Duration::from_secs(61);
    assert_eq!(
        store
            .claim_deliveries("b", &ops(), soon, lease(), 1)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn concurrent_claimers_never_get_the_same_delivery() {
    let (_dir, store) = store().await;
    let s = sessions(&store, 40).await;
    for (n, session) in s.iter().enumerate() {
        let id = format!("d{n}");
        store
            .enqueue_delivery(&delivery(&id, session))
            .await
            .unwrap();
    }
    let claimers = (0..4).map(|n| {
        let store = store.clone();
        tokio::spawn(async move {
            let owner = format!("node{n}");
            store
                .claim_deliveries(&owner, &ops(), Utc::now(), lease(), 40)
                .await
                .unwrap()
        })
    });
    let mut seen = HashSet::new();
    for claimer in claimers {
        for record in claimer.await.unwrap() {
            assert!(
                seen.insert(record.id.clone()),
                "{} claimed twice",
                record.id
            );
        }
    }
    assert_eq!(seen.len(), 40);
}

/// A sender that read a row before another rescheduled it must not send it
/// before its time (that would skip the backoff and count an attempt twice).
#[tokio::test]
async fn a_row_rescheduled_meanwhile_is_not_claimed() {
    let (_dir, store) = store().await;
    let s = sessions(&store, 1).await;
    queue(&store, "d1", &s[0]).await;
    let read_at = Utc::now();
    let short = Utc::now() + Duration::from_millis(1);
    let taken = store
        .claim_deliveries("b", &ops(), read_at, short, 1)
        .await
        .unwrap();
    assert_eq!(ids(&taken), ["d1"]);
    let later = AttemptResult {
        next_attempt_at: Some(Utc::now() + Duration::from_secs(60)),
        ..retry_now("HTTP 503")
    };
    assert!(store.record_attempt("d1", "b", &later).await.unwrap());
    // `a` read the row as due at `read_at`, before `b` rescheduled it.
    let stale = store
        .claim_deliveries("a", &ops(), read_at, lease(), 1)
        .await
        .unwrap();
    assert!(stale.is_empty(), "{stale:?}");
}

/// A delivery given up does not hold back the session's later ones; a
/// webhook not named by the claimer is left alone.
#[tokio::test]
async fn a_given_up_delivery_lets_the_next_go_and_other_webhooks_wait() {
    let (_dir, store) = store().await;
    let s = sessions(&store, 1).await;
    queue(&store, "d1", &s[0]).await;
    queue(&store, "d2", &s[0]).await;
    let elsewhere = NewDelivery {
        webhook: "gone".into(),
        ..delivery("g1", &s[0])
    };
    store.enqueue_delivery(&elsewhere).await.unwrap();
    let first = claim(&store, "a", 10).await;
    assert_eq!(ids(&first), ["d1"]);
    let gave_up = AttemptResult {
        status: DeliveryStatus::Failed,
        http_status: Some(410),
        error: Some("HTTP 410".into()),
        next_attempt_at: None,
    };
    assert!(store.record_attempt("d1", "a", &gave_up).await.unwrap());
    let next = claim(&store, "a", 10).await;
    assert_eq!(ids(&next), ["d2"]);
    let pending = store
        .list_deliveries(Some(DeliveryStatus::Pending), 10)
        .await
        .unwrap();
    assert!(ids(&pending).contains(&"g1"), "{pending:?}");
}

/// A stopping sender's leases are handed back at once; enqueueing an id
/// twice adds one row; a deleted session takes its deliveries along.
#[tokio::test]
async fn leases_released_ids_once_and_rows_go_with_their_session() {
    let (_dir, store) = store().await;
    let s = sessions(&store, 2).await;
    queue(&store, "d1", &s[0]).await;
    queue(&store, "d1", &s[0]).await;
    queue(&store, "d2", &s[1]).await;
    assert_eq!(count_rows(&store, "webhook_deliveries", &s[0]).await, 1);
    let taken = claim(&store, "a", 10).await;
    assert_eq!(taken.len(), 2);
    assert_eq!(store.release_deliveries("a").await.unwrap(), 2);
    let again = claim(&store, "b", 10).await;
    assert_eq!(again.len(), 2);

    store.delete_session(&s[0]).await.unwrap();
    assert_eq!(count_rows(&store, "webhook_deliveries", &s[0]).await, 0);
    // A delivery of a session deleted before it was queued is dropped.
    queue(&store, "d3", &s[0]).await;
    assert_eq!(count_rows(&store, "webhook_deliveries", &s[0]).await, 0);
    assert_eq!(count_rows(&store, "webhook_deliveries", &s[1]).await, 1);
}

/// Delivered and failed rows older than the retention are pruned; pending
/// ones and newer ones stay; the next due time is the earliest pending one.
#[tokio::test]
async fn finished_deliveries_are_pruned_after_their_retention() {
    let (_dir, store) = store().await;
    let s = sessions(&store, 3).await;
    let old = Utc::now() - chrono::Duration::days(10);
    for (id, session, created_at) in [
        ("old-done", &s[0], old),
        ("old-pending", &s[1], old),
        ("new-done", &s[2], Utc::now()),
    ] {
        let row = NewDelivery {
            created_at,
            ..delivery(id, session)
        };
        store.enqueue_delivery(&row).await.unwrap();
    }
    assert_eq!(
        store
            .next_delivery_due(&ops())
            .await
            .unwrap()
            .map(|t| t.timestamp()),
        Some(old.timestamp())
    );
    let taken = claim(&store, "a", 10).await;
    for record in &taken {
        if record.id != "old-pending" {
            assert!(
                store
                    .record_attempt(&record.id, "a", &delivered())
                    .await
                    .unwrap()
            );
        }
    }
    let week_ago = Utc::now() - chrono::Duration::days(7);
    assert_eq!(store.prune_deliveries("other", week_ago).await.unwrap(), 0);
    assert_eq!(store.prune_deliveries("ops", week_ago).await.unwrap(), 1);
    let mut left: Vec<String> = store
        .list_deliveries(None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    left.sort();
    assert_eq!(left, ["new-done", "old-pending"]);
    assert_eq!(
        store.next_delivery_due(&["other".into()]).await.unwrap(),
        None
    );
}
