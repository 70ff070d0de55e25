use std::collections::HashSet;
use std::time::Duration;

use agentd_store::prelude::*;
use agentd_store::{AttemptResult, DeliveryStatus, NewDelivery};
use chrono::Utc;

use crate::store;

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
    for (id, session) in [("d1", "s1"), ("d2", "s1"), ("d3", "s2")] {
        store
            .enqueue_delivery(&delivery(id, session))
            .await
            .unwrap();
    }

    // The second of s1 waits for the first; s2's goes at once.
    let first = store
        .claim_deliveries("a", Utc::now(), lease(), 10)
        .await
        .unwrap();
    assert_eq!(ids(&first), ["d1", "d3"]);
    // Leased: nobody else gets them, and d2 still waits.
    let other = store
        .claim_deliveries("b", Utc::now(), lease(), 10)
        .await
        .unwrap();
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
    let again = store
        .claim_deliveries("b", Utc::now(), lease(), 10)
        .await
        .unwrap();
    assert_eq!(ids(&again), ["d1"]);
    assert_eq!(again[0].attempts, 1);
    assert_eq!(again[0].last_status, Some(500));
    assert!(store.record_attempt("d1", "b", &delivered()).await.unwrap());

    let next = store
        .claim_deliveries("a", Utc::now(), lease(), 10)
        .await
        .unwrap();
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
    assert!(
        store
            .claim_deliveries("a", Utc::now(), lease(), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_later_attempt_waits_for_its_time_and_an_expired_lease_is_taken_over() {
    let (_dir, store) = store().await;
    store.enqueue_delivery(&delivery("d1", "s1")).await.unwrap();
    let short = Utc::now() + Duration::from_millis(1);
    assert_eq!(
        store
            .claim_deliveries("a", Utc::now(), short, 1)
            .await
            .unwrap()
            .len(),
        1
    );
    tokio::time::sleep(Duration::from_millis(5)).await;
    // `a` stopped answering: its lease ran out, `b` takes the row.
    let taken = store
        .claim_deliveries("b", Utc::now(), lease(), 1)
        .await
        .unwrap();
    assert_eq!(ids(&taken), ["d1"]);
    let later = AttemptResult {
        next_attempt_at: Some(Utc::now() + Duration::from_secs(60)),
        ..retry_now("timed out")
    };
    assert!(store.record_attempt("d1", "b", &later).await.unwrap());
    assert!(
        store
            .claim_deliveries("b", Utc::now(), lease(), 1)
            .await
            .unwrap()
            .is_empty()
    );
    let soon = Utc::now() + Duration::from_secs(61);
    assert_eq!(
        store
            .claim_deliveries("b", soon, lease(), 1)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn concurrent_claimers_never_get_the_same_delivery() {
    let (_dir, store) = store().await;
    for n in 0..40 {
        let id = format!("d{n}");
        store
            .enqueue_delivery(&delivery(&id, &format!("s{n}")))
            .await
            .unwrap();
    }
    let claimers = (0..4).map(|n| {
        let store = store.clone();
        tokio::spawn(async move {
            let owner = format!("node{n}");
            store
                .claim_deliveries(&owner, Utc::now(), lease(), 40)
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
