//! Users and tokens, `find_turn`, `count_sessions` and `ping`.

use agentd_store::StoreError;
use agentd_store::prelude::*;

use crate::{session, store};

#[tokio::test]
async fn users_are_unique_by_name() {
    let (_guard, store) = store().await;
    let alice = store.create_user("alice").await.unwrap();
    assert!(!alice.is_admin);
    assert!(alice.disabled_at.is_none());
    assert_eq!(
        store.get_user_by_name("alice").await.unwrap().unwrap(),
        alice
    );
    assert!(store.get_user_by_name("bob").await.unwrap().is_none());
    let err = store.create_user("alice").await.unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err}");
    assert!(err.to_string().contains("taken"), "{err}");
    let unicode = store.create_user("zoë 🦀").await.unwrap();
    assert_eq!(
        store.get_user_by_name("zoë 🦀").await.unwrap().unwrap(),
        unicode
    );
}

#[tokio::test]
async fn tokens_are_found_by_hash_listed_and_revoked() {
    let (_guard, store) = store().await;
    let alice = store.create_user("alice").await.unwrap();
    let bob = store.create_user("bob").await.unwrap();
    let t1 = store
        .create_token(&alice.id, "laptop", "hash-1", "agentd_ab")
        .await
        .unwrap();
    let t2 = store
        .create_token(&bob.id, "", "hash-2", "agentd_cd")
        .await
        .unwrap();
    assert_eq!(t1.user_name, "alice");
    assert_eq!(t1.user_id, alice.id);
    assert_eq!(
        (t1.name.as_str(), t1.prefix.as_str()),
        ("laptop", "agentd_ab")
    );
    assert!(!t1.user_disabled);
    assert!(t1.is_usable(chrono::Utc::now()));

    let found = store.token_by_hash("hash-1").await.unwrap().unwrap();
    assert_eq!(found, t1);
    assert!(store.token_by_hash("nope").await.unwrap().is_none());
    // Newest first.
    assert_eq!(store.list_tokens(None).await.unwrap(), vec![t2, t1.clone()]);
    let mine = store.list_tokens(Some(&alice.id)).await.unwrap();
    assert_eq!(mine, vec![t1.clone()]);
    assert!(store.list_tokens(Some("nobody")).await.unwrap().is_empty());

    assert!(store.revoke_token(&t1.id).await.unwrap());
    let revoked = store.token_by_hash("hash-1").await.unwrap().unwrap();
    assert!(!revoked.is_usable(chrono::Utc::now()));
    let first = revoked.revoked_at;
    assert!(first.is_some());
    assert!(store.revoke_token(&t1.id).await.unwrap());
    let again = store.token_by_hash("hash-1").await.unwrap().unwrap();
    assert_eq!(again.revoked_at, first, "the first revocation time stays");
    assert!(!store.revoke_token("missing").await.unwrap());

    let err = store
        .create_token("no-such-user", "", "hash-3", "")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    let err = store
        .create_token(&alice.id, "", "hash-2", "")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err}");
}

#[tokio::test]
async fn disabled_users_tokens_are_unusable() {
    let (_guard, store) = store().await;
    let alice = store.create_user("alice").await.unwrap();
    store
        .create_token(&alice.id, "", "hash-1", "")
        .await
        .unwrap();
    crate::exec(
        &store,
        "UPDATE users SET disabled_at = 1700000000000 WHERE name = 'alice'",
    )
    .await;
    let token = store.token_by_hash("hash-1").await.unwrap().unwrap();
    assert!(token.user_disabled);
    assert!(!token.is_usable(chrono::Utc::now()));
    let user = store.get_user_by_name("alice").await.unwrap().unwrap();
    assert_eq!(
        user.disabled_at.map(|t| t.timestamp_millis()),
        Some(1_700_000_000_000)
    );
}

#[tokio::test]
async fn turns_are_found_by_client_request_id_and_sessions_counted() {
    let (_guard, store) = store().await;
    store.ping().await.unwrap();
    assert_eq!(store.count_sessions().await.unwrap(), 0);
    let s = session(&store, "local").await;
    session(&store, "someone else").await;
    assert!(store.find_turn(&s.id, "r1").await.unwrap().is_none());
    let started = match store.start_turn(&s.id, "t1", Some("r1")).await.unwrap() {
        agentd_store::TurnStart::Started(t) => t,
        other => panic!("{other:?}"),
    };
    let turn = store.find_turn(&s.id, "r1").await.unwrap().unwrap();
    assert_eq!(turn, started);
    assert!(store.find_turn(&s.id, "r2").await.unwrap().is_none());
    assert!(store.find_turn("other", "r1").await.unwrap().is_none());
    store
        .finish_turn("t1", agentd_protocol::TurnStatus::Completed)
        .await
        .unwrap();
    let turn = store.find_turn(&s.id, "r1").await.unwrap().unwrap();
    assert_eq!(turn.status, Some(agentd_protocol::TurnStatus::Completed));
    assert!(turn.finished_at.is_some());
    assert_eq!(store.count_sessions().await.unwrap(), 2);
    store.delete_session(&s.id).await.unwrap();
    assert_eq!(store.count_sessions().await.unwrap(), 1);
}
