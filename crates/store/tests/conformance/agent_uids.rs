//! `agent_uid`: the uid a user's agent works as, allocated once and kept.

use agentd_store::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

use agentd_store::StoreError;

use crate::store;

#[tokio::test]
async fn the_lowest_free_uid_is_allocated_once_per_user() {
    let (_guard, store) = store().await;
    assert_eq!(
        store.agent_uid("alice", 200_000, 200_002).await.unwrap(),
        200_000
    );
    assert_eq!(
        store.agent_uid("alice", 200_000, 200_002).await.unwrap(),
        200_000
    );
    assert_eq!(
        store.agent_uid("bob", 200_000, 200_002).await.unwrap(),
        200_001
    );
    assert_eq!(
        store.agent_uid("zoë 🦀", 200_000, 200_002).await.unwrap(),
        200_002
    );
    let uids = crate::strings(
        &store,
        "SELECT user_name || '=' || CAST(uid AS TEXT) FROM agent_uids WHERE '' = $1 ORDER BY uid",
        "",
    )
    .await;
    assert_eq!(uids, ["alice=200000", "bob=200001", "zoë 🦀=200002"]);

    // Full: a clear error, and nothing recorded; users with a uid keep it.
    let err = store
        .agent_uid("carol", 200_000, 200_002)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("200000-200002") && message.contains("carol"),
        "{message}"
    );
    assert_eq!(
        store.agent_uid("bob", 200_000, 200_002).await.unwrap(),
        200_001
    );
    assert_eq!(
        crate::strings(
            &store,
            "SELECT user_name FROM agent_uids WHERE user_name = $1",
            "carol"
        )
        .await
        .len(),
        0
    );
    // A wider range has room again.
    assert_eq!(
        store.agent_uid("carol", 200_000, 200_003).await.unwrap(),
        200_003
    );
}

#[tokio::test]
async fn gaps_are_filled_and_recorded_uids_outlive_the_range() {
    let (_guard, store) = store().await;
    crate::exec(
        &store,
        "INSERT INTO agent_uids (user_name, uid) VALUES ('old', 5001)",
    )
    .await;
    crate::exec(
        &store,
        "INSERT INTO agent_uids (user_name, uid) VALUES ('older', 5003)",
    )
    .await;
    assert_eq!(store.agent_uid("a", 5000, 5010).await.unwrap(), 5000);
    assert_eq!(store.agent_uid("b", 5000, 5010).await.unwrap(), 5002);
    assert_eq!(store.agent_uid("c", 5000, 5010).await.unwrap(), 5004);
    // Taken uids below the range do not matter.
    assert_eq!(store.agent_uid("d", 5001, 5010).await.unwrap(), 5005);
    // The range moved: a recorded uid stays its user's, new users get the new range.
    assert_eq!(
        store.agent_uid("old", 300_000, 300_010).await.unwrap(),
        5001
    );
    assert_eq!(
        store.agent_uid("e", 300_000, 300_010).await.unwrap(),
        300_000
    );
    // The largest uids fit.
    let top = u32::MAX - 1;
    assert_eq!(store.agent_uid("f", top, top).await.unwrap(), top);
    assert_eq!(store.agent_uid("f", 5000, 5010).await.unwrap(), top);
}

#[tokio::test]
async fn an_empty_or_zero_range_is_refused() {
    let (_guard, store) = store().await;
    for (first, last) in [(10, 9), (0, 10)] {
        let err = store.agent_uid("alice", first, last).await.unwrap_err();
        assert!(matches!(err, StoreError::Database(_)), "{err}");
    }
    assert_eq!(store.agent_uid("alice", 10, 10).await.unwrap(), 10);
}

/// Two stores on one database stand for two servers allocating at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn allocations_at_once_never_share_a_uid() {
    let (guard, first) = store().await;
    let second = crate::reopen(&guard).await;
    let mut tasks = Vec::new();
    for t in 0..8 {
        let store = if t % 2 == 0 {
            first.clone()
        } else {
            second.clone()
        };
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            // Every task asks for every user, in its own order.
            for i in 0..12 {
                let user = format!("user-{}", (i * 5 + t) % 12);
                let uid = store.agent_uid(&user, 700_000, 799_999).await.unwrap();
                got.push((user, uid));
            }
            got
        }));
    }
    let mut by_user: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for task in tasks {
        for (user, uid) in task.await.unwrap() {
            by_user.entry(user).or_default().insert(uid);
        }
    }
    assert_eq!(by_user.len(), 12);
    let uids: BTreeSet<u32> = by_user
        .values()
        .map(|uids| {
            assert_eq!(uids.len(), 1, "one uid per user: {by_user:?}");
            *uids.first().unwrap()
        })
        .collect();
    assert_eq!(
        uids,
        (700_000..700_012).collect(),
        "the lowest ones, each once"
    );
}
