//! Signing keys of tokens for tools: added unless a newer one exists,
//! listed newest first, kept across a reopen, pruned by age.

use agentd_store::SigningKeyRecord;
use agentd_store::prelude::*;
use chrono::{DateTime, Duration, TimeZone, Utc};

use crate::{reopen, store};

fn key(kid: &str, created_at: DateTime<Utc>) -> SigningKeyRecord {
    SigningKeyRecord {
        kid: kid.into(),
        algorithm: "EdDSA".into(),
        private_key: format!("private-{kid}"),
        public_key: format!("public-{kid}"),
        created_at,
    }
}

fn at(day: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, day, 12, 0, 0).unwrap()
}

#[tokio::test]
async fn a_key_is_added_unless_a_newer_one_exists_and_kept_on_reopen() {
    let (guard, store) = store().await;
    assert!(store.signing_keys().await.unwrap().is_empty());

    let first = key("k1", at(1));
    assert!(store.add_signing_key(&first, at(1)).await.unwrap());
    // Another node rotated meanwhile: a key since day 1 exists, so this one
    // is not added.
    assert!(
        !store
            .add_signing_key(&key("k1b", at(1)), at(1))
            .await
            .unwrap()
    );
    let second = key("k2", at(8));
    assert!(store.add_signing_key(&second, at(8)).await.unwrap());
    assert_eq!(
        store.signing_keys().await.unwrap(),
        [second.clone(), first.clone()]
    );

    let err = store
        .add_signing_key(&key("k2", at(20)), at(20))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"k2\" is taken"), "{err}");

    drop(store);
    let store = reopen(&guard).await;
    assert_eq!(
        store.signing_keys().await.unwrap(),
        [second.clone(), first.clone()]
    );

    assert_eq!(
        store
            .delete_signing_keys_before(at(8) - Duration::milliseconds(1))
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.signing_keys().await.unwrap(), [second]);
}
