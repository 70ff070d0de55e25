use agentd_store::PendingRecord;
use agentd_store::prelude::*;
use serde_json::json;

use crate::{session, store};

fn request(id: &str, session_id: &str) -> PendingRecord {
    PendingRecord {
        id: id.into(),
        session_id: session_id.into(),
        turn_id: Some("t1".into()),
        kind: "permission".into(),
        call_id: Some("c1".into()),
        data: json!({"tool": "Bash", "input": {"command": "rm -rf x"}}),
        created_at: chrono::Utc::now(),
        resolved_at: None,
        resolution: None,
    }
}

#[tokio::test]
async fn open_requests_are_listed_until_the_first_answer() {
    let (_dir, store) = store().await;
    let a = session(&store, "alice").await;
    let b = session(&store, "bob").await;
    store.create_pending(&request("r1", &a.id)).await.unwrap();
    store.create_pending(&request("r2", &b.id)).await.unwrap();

    let open = store.open_pending(Some(&a.id)).await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].data["input"]["command"], "rm -rf x");
    assert_eq!(store.open_pending(None).await.unwrap().len(), 2);

    assert!(
        store
            .resolve_pending("r1", &json!({"decision": "deny"}))
            .await
            .unwrap()
    );
    assert!(
        !store
            .resolve_pending("r1", &json!({"decision": "allow"}))
            .await
            .unwrap(),
        "the first answer wins"
    );
    assert!(!store.resolve_pending("nope", &json!({})).await.unwrap());
    assert!(store.open_pending(Some(&a.id)).await.unwrap().is_empty());
    let resolved = store.get_pending("r1").await.unwrap().unwrap();
    assert_eq!(resolved.resolution, Some(json!({"decision": "deny"})));
    assert!(resolved.resolved_at.is_some());
}

#[tokio::test]
async fn session_rules_are_kept_per_session_and_deleted_with_it() {
    let (_dir, store) = store().await;
    let a = session(&store, "alice").await;
    let b = session(&store, "alice").await;
    store
        .add_session_rule(&a.id, "Bash(git status)")
        .await
        .unwrap();
    store
        .add_session_rule(&a.id, "Bash(git status)")
        .await
        .unwrap();
    store.add_session_rule(&a.id, "Edit").await.unwrap();
    assert_eq!(
        store.session_rules(&a.id).await.unwrap(),
        ["Bash(git status)", "Edit"]
    );
    assert!(store.session_rules(&b.id).await.unwrap().is_empty());
    store.create_pending(&request("r1", &a.id)).await.unwrap();
    store.delete_session(&a.id).await.unwrap();
    assert!(store.session_rules(&a.id).await.unwrap().is_empty());
    assert!(store.get_pending("r1").await.unwrap().is_none());
}

#[tokio::test]
async fn session_mounts_are_kept_per_session_replaced_and_deleted_with_it() {
    let (_dir, store) = store().await;
    let a = session(&store, "alice").await;
    let b = session(&store, "alice").await;
    assert_eq!(store.session_mounts(&a.id).await.unwrap(), None);
    store.set_session_mounts(&a.id, "[1]").await.unwrap();
    store.set_session_mounts(&a.id, "[2]").await.unwrap();
    assert_eq!(
        store.session_mounts(&a.id).await.unwrap().as_deref(),
        Some("[2]")
    );
    assert_eq!(store.session_mounts(&b.id).await.unwrap(), None);
    store.delete_session(&a.id).await.unwrap();
    assert_eq!(store.session_mounts(&a.id).await.unwrap(), None);
}
