//! `export_session` / `import_session`: a session moves with nothing lost.

use agentd_protocol::{Message, TurnStatus, Usage};
use agentd_store::prelude::*;
use agentd_store::{PendingRecord, SessionExport, SessionUpdate, Store, StoreError};
use serde_json::json;

use crate::{delta, session, store};

/// A session with something in every table of it.
pub async fn busy_session(store: &impl Store) -> String {
    let s = session(store, "alice").await;
    store.start_turn(&s.id, "t1", Some("r1")).await.unwrap();
    store
        .append_message(&s.id, Some("t1"), &Message::user_text("héllo 🦀"))
        .await
        .unwrap();
    for i in 0..20 {
        store
            .append_event(&s.id, &delta(&format!("d{i}")))
            .await
            .unwrap();
    }
    store
        .append_message(&s.id, Some("t1"), &Message::user_text("second"))
        .await
        .unwrap();
    store
        .finish_turn("t1", TurnStatus::Completed)
        .await
        .unwrap();
    store.start_turn(&s.id, "t2", None).await.unwrap();
    for (id, resolve) in [("p1", true), ("p2", false)] {
        store
            .create_pending(&PendingRecord {
                id: id.into(),
                session_id: s.id.clone(),
                turn_id: Some("t2".into()),
                kind: "permission".into(),
                call_id: Some("call".into()),
                data: json!({"input": {"command": "rm -rf x"}, "n": 1.5}),
                created_at: chrono::DateTime::from_timestamp_millis(1_700_000_000_123).unwrap(),
                resolved_at: None,
                resolution: None,
            })
            .await
            .unwrap();
        if resolve {
            store
                .resolve_pending(id, &json!({"decision": "allow"}))
                .await
                .unwrap();
        }
    }
    let thinking = SessionUpdate {
        thinking_budget: Some(Some(4096)),
        ..SessionUpdate::default()
    };
    store.update_session(&s.id, thinking).await.unwrap();
    store.add_session_rule(&s.id, "Bash(ls)").await.unwrap();
    store.add_session_rule(&s.id, "Read(**)").await.unwrap();
    store
        .update_session(
            &s.id,
            SessionUpdate {
                title: Some("a títle".into()),
                add_usage: Some(Usage {
                    input_tokens: 10,
                    output_tokens: 20,
                    cache_read_tokens: 3,
                    cache_write_tokens: 4,
                }),
                add_cost_usd: Some(0.125),
                add_turns: Some(1),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    s.id
}

/// Every part of `export` is there, in order.
pub fn assert_complete(export: &SessionExport) {
    assert_eq!(export.format, SessionExport::FORMAT);
    assert_eq!(export.messages.len(), 2);
    assert_eq!(export.events.len(), 20);
    assert_eq!(export.session.last_seq, 20);
    assert_eq!(export.session.thinking_budget, Some(4096));
    assert_eq!(export.turns.len(), 2);
    assert_eq!(export.pending.len(), 2);
    assert!(export.pending[0].resolution.is_some());
    assert_eq!(export.rules, ["Bash(ls)", "Read(**)"]);
}

#[tokio::test]
async fn a_session_moves_between_stores_with_nothing_lost() {
    let (_a, from) = store().await;
    let (_b, to) = store().await;
    let id = busy_session(&from).await;
    let export = from.export_session(&id).await.unwrap().unwrap();
    assert_complete(&export);
    // Through JSON, as `agentd sessions export`/`import` do.
    let text = serde_json::to_string(&export).unwrap();
    let export: SessionExport = serde_json::from_str(&text).unwrap();

    to.import_session(&export).await.unwrap();
    assert_eq!(to.export_session(&id).await.unwrap().unwrap(), export);
    assert_eq!(to.get_session(&id).await.unwrap().unwrap(), export.session);
    assert_eq!(to.open_pending(Some(&id)).await.unwrap().len(), 1);
    assert_eq!(to.running_turns().await.unwrap().len(), 1);
    assert!(to.find_turn(&id, "r1").await.unwrap().is_some());

    // The imported session goes on where it stopped.
    assert_eq!(to.append_event(&id, &delta("next")).await.unwrap().seq, 21);
    let m = to
        .append_message(&id, None, &Message::user_text("third"))
        .await
        .unwrap();
    assert_eq!(m.position, 3);

    // Importing again is refused and changes nothing.
    let err = to.import_session(&export).await.unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err}");
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(to.events_after(&id, 0, 100).await.unwrap().len(), 21);

    assert!(from.export_session("nope").await.unwrap().is_none());
}

#[tokio::test]
async fn a_failed_import_leaves_nothing_behind() {
    let (_a, from) = store().await;
    let (_b, to) = store().await;
    let id = busy_session(&from).await;
    let mut export = from.export_session(&id).await.unwrap().unwrap();
    // Two events with one seq: the import fails half way.
    let dup = export.events[0].clone();
    export.events.push(dup);
    assert!(to.import_session(&export).await.is_err());
    assert!(to.get_session(&id).await.unwrap().is_none());
    assert_eq!(crate::count_rows(&to, "messages", &id).await, 0);
    assert_eq!(to.count_sessions().await.unwrap(), 0);
}

#[tokio::test]
async fn host_mounts_stay_behind_on_export() {
    let (_a, from) = store().await;
    let (_b, to) = store().await;
    let id = busy_session(&from).await;
    let mounts = r#"[{"host":"/srv/data/x","path":"/mnt/x","mode":"rw"}]"#;
    from.set_session_mounts(&id, mounts).await.unwrap();
    let export = from.export_session(&id).await.unwrap().unwrap();
    let text = serde_json::to_string(&export).unwrap();
    assert!(!text.contains("/srv/data/x"), "{text}");
    to.import_session(&export).await.unwrap();
    assert_eq!(to.session_mounts(&id).await.unwrap(), None);
}
