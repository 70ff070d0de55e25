//! Provider accounts linked to users, and what their groups gave.

use agentd_store::prelude::*;
use agentd_store::{GrantKind, GroupGiven, GroupGrant, StoreError};

use crate::store;

const ISSUER: &str = "https://idp.example";

#[tokio::test]
async fn accounts_are_linked_once_and_found_by_issuer_and_subject() {
    let (_guard, store) = store().await;
    let alice = store.create_user("alice").await.unwrap();
    assert!(
        store
            .user_by_identity(ISSUER, "s-1")
            .await
            .unwrap()
            .is_none()
    );
    store.link_identity(&alice.id, ISSUER, "s-1").await.unwrap();
    let found = store
        .user_by_identity(ISSUER, "s-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.user, alice);
    assert_eq!(
        (found.issuer.as_str(), found.subject.as_str()),
        (ISSUER, "s-1")
    );
    assert_eq!(found.group_given, GroupGiven::default());
    // The same subject of another issuer is another account.
    assert!(
        store
            .user_by_identity("https://other.example", "s-1")
            .await
            .unwrap()
            .is_none()
    );
    // An account links to one user only.
    let bob = store.create_user("bob").await.unwrap();
    let err = store
        .link_identity(&bob.id, ISSUER, "s-1")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err}");
    assert!(err.to_string().contains("linked already"), "{err}");
    let err = store
        .link_identity("nobody", ISSUER, "s-9")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    // A user may have accounts at several issuers.
    store
        .link_identity(&alice.id, "https://other.example", "a")
        .await
        .unwrap();
    let mine = store.identities_of(&alice.id).await.unwrap();
    let issuers: Vec<&str> = mine.iter().map(|i| i.issuer.as_str()).collect();
    assert_eq!(issuers, vec![ISSUER, "https://other.example"]);
    assert!(store.identities_of(&bob.id).await.unwrap().is_empty());
}

#[tokio::test]
async fn what_groups_gave_is_kept_per_account() {
    let (_guard, store) = store().await;
    let alice = store.create_user("alice").await.unwrap();
    store.link_identity(&alice.id, ISSUER, "s-1").await.unwrap();
    let given = GroupGiven {
        admin: true,
        grants: vec![
            GroupGrant {
                kind: GrantKind::Profile,
                name: "yolo".into(),
            },
            GroupGrant {
                kind: GrantKind::Model,
                name: "big 🦀".into(),
            },
        ],
    };
    assert!(store.set_group_given(ISSUER, "s-1", &given).await.unwrap());
    let found = store
        .user_by_identity(ISSUER, "s-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.group_given, given);
    assert!(
        store
            .set_group_given(ISSUER, "s-1", &GroupGiven::default())
            .await
            .unwrap()
    );
    let found = store
        .user_by_identity(ISSUER, "s-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.group_given, GroupGiven::default());
    assert!(
        !store
            .set_group_given(ISSUER, "nobody", &given)
            .await
            .unwrap()
    );
}
