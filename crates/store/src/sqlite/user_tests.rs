//! Users, tokens and turn lookups on an in-memory SQLite store (the
//! conformance suite covers both backends; these are quick to run alone).

#![allow(clippy::unwrap_used)]

use crate::prelude::*;
use crate::sqlite::SqliteStore;

async fn store() -> SqliteStore {
    SqliteStore::open_url("sqlite::memory:").await.unwrap()
}

#[tokio::test]
async fn users_are_unique_by_name() {
    let store = store().await;
    let alice = store.create_user("alice").await.unwrap();
    assert_eq!(
        store.get_user_by_name("alice").await.unwrap().unwrap(),
        alice
    );
    assert!(store.get_user_by_name("bob").await.unwrap().is_none());
    let err = store.create_user("alice").await.unwrap_err().to_string();
    assert!(err.contains("taken"), "{err}");
}

#[tokio::test]
async fn tokens_are_found_by_hash_listed_and_revoked() {
    let store = store().await;
    let alice = store.create_user("alice").await.unwrap();
    let bob = store.create_user("bob").await.unwrap();
    let t1 = store
        .create_token(&alice.id, "laptop", "hash-1", "agentd_ab")
        .await
        .unwrap();
    store
        .create_token(&bob.id, "", "hash-2", "agentd_cd")
        .await
        .unwrap();
    assert_eq!(t1.user_name, "alice");
    assert!(t1.is_usable(chrono::Utc::now()));

    let found = store.token_by_hash("hash-1").await.unwrap().unwrap();
    assert_eq!(found, t1);
    assert!(store.token_by_hash("nope").await.unwrap().is_none());
    assert_eq!(store.list_tokens(None).await.unwrap().len(), 2);
    let mine = store.list_tokens(Some(&alice.id)).await.unwrap();
    assert_eq!(mine, vec![t1.clone()]);

    assert!(store.revoke_token(&t1.id).await.unwrap());
    let revoked = store.token_by_hash("hash-1").await.unwrap().unwrap();
    assert!(!revoked.is_usable(chrono::Utc::now()));
    let first = revoked.revoked_at;
    assert!(store.revoke_token(&t1.id).await.unwrap());
    let again = store.token_by_hash("hash-1").await.unwrap().unwrap();
    assert_eq!(again.revoked_at, first, "the first revocation time stays");
    assert!(!store.revoke_token("missing").await.unwrap());

    let err = store
        .create_token("no-such-user", "", "hash-3", "")
        .await
        .unwrap_err();
    assert!(matches!(err, crate::StoreError::NotFound(_)), "{err}");
}

#[tokio::test]
async fn turns_are_found_by_client_request_id() {
    let store = store().await;
    let session = store
        .create_session(crate::NewSession {
            id: None,
            owner: "local".into(),
            title: None,
            workspace: "/tmp".into(),
            model: "demo".into(),
            profile: "default".into(),
        })
        .await
        .unwrap();
    assert!(store.find_turn(&session.id, "r1").await.unwrap().is_none());
    store
        .start_turn(&session.id, "t1", Some("r1"))
        .await
        .unwrap();
    let turn = store.find_turn(&session.id, "r1").await.unwrap().unwrap();
    assert_eq!(turn.id, "t1");
    assert_eq!(store.count_sessions().await.unwrap(), 1);
}
