//! Admin flags, grants, per-user usage (spend kept past deleting a session)
//! and the append-only audit log.

use agentd_protocol::TurnStatus;
use agentd_store::prelude::*;
use agentd_store::{AuditQuery, GrantKind, NewAudit, SessionUpdate, UsageWindow};
use chrono::{Duration, Utc};

use crate::{session, store};

/// As the server asks: the last hour; spend since midnight UTC and (here)
/// the 30 days before it.
fn window() -> UsageWindow {
    let now = Utc::now();
    let midnight = now.date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    UsageWindow {
        turns_since: now - Duration::hours(1),
        day_start: midnight,
        month_start: midnight - Duration::days(30),
    }
}

#[tokio::test]
async fn admin_and_disabled_flags_change_only_what_is_asked() {
    let (_guard, store) = store().await;
    store.create_user("bob").await.unwrap();
    store.create_user("alice").await.unwrap();
    assert!(
        store
            .set_user_flags("alice", Some(true), None)
            .await
            .unwrap()
    );
    assert!(
        !store
            .set_user_flags("nobody", Some(true), None)
            .await
            .unwrap()
    );
    let users = store.list_users().await.unwrap();
    let names: Vec<_> = users
        .iter()
        .map(|u| (u.name.as_str(), u.is_admin))
        .collect();
    assert_eq!(names, [("alice", true), ("bob", false)]);

    assert!(
        store
            .set_user_flags("alice", None, Some(true))
            .await
            .unwrap()
    );
    let alice = store.get_user_by_name("alice").await.unwrap().unwrap();
    assert!(alice.is_admin, "disabling keeps the admin flag");
    let first = alice.disabled_at.expect("disabled");
    store
        .set_user_flags("alice", None, Some(true))
        .await
        .unwrap();
    let again = store.get_user_by_name("alice").await.unwrap().unwrap();
    assert_eq!(again.disabled_at, Some(first), "the first time stays");
    store
        .set_user_flags("alice", Some(false), Some(false))
        .await
        .unwrap();
    let alice = store.get_user_by_name("alice").await.unwrap().unwrap();
    assert!(!alice.is_admin && alice.disabled_at.is_none());
}

#[tokio::test]
async fn grants_are_added_once_listed_and_taken_back() {
    let (_guard, store) = store().await;
    assert!(
        store
            .set_grant("alice", GrantKind::Profile, "yolo", true)
            .await
            .unwrap()
    );
    assert!(
        !store
            .set_grant("alice", GrantKind::Profile, "yolo", true)
            .await
            .unwrap(),
        "granting twice changes nothing"
    );
    store
        .set_grant("alice", GrantKind::Model, "opus", true)
        .await
        .unwrap();
    store
        .set_grant("bob", GrantKind::Model, "opus", true)
        .await
        .unwrap();
    let alice = store.grants(Some("alice")).await.unwrap();
    let mine: Vec<_> = alice.iter().map(|g| (g.kind, g.name.as_str())).collect();
    assert_eq!(
        mine,
        [(GrantKind::Model, "opus"), (GrantKind::Profile, "yolo")],
        "by kind, then name"
    );
    assert_eq!(store.grants(None).await.unwrap().len(), 3);
    assert!(
        store
            .set_grant("alice", GrantKind::Model, "opus", false)
            .await
            .unwrap()
    );
    assert!(
        !store
            .set_grant("alice", GrantKind::Model, "opus", false)
            .await
            .unwrap()
    );
    assert_eq!(store.grants(Some("alice")).await.unwrap().len(), 1);
}

#[tokio::test]
async fn usage_counts_turns_and_spend_by_owner_and_spend_outlives_the_session() {
    let (_guard, store) = store().await;
    let mine = session(&store, "alice").await;
    let other = session(&store, "bob").await;
    store.start_turn(&mine.id, "t1", None).await.unwrap();
    store.start_turn(&mine.id, "t2", None).await.unwrap();
    store.start_turn(&other.id, "t3", None).await.unwrap();
    let cost = |usd| SessionUpdate {
        add_cost_usd: Some(usd),
        ..Default::default()
    };
    store
        .finish_turn_with_session("t1", TurnStatus::Completed, &mine.id, cost(0.25))
        .await
        .unwrap();
    store.update_session(&mine.id, cost(0.5)).await.unwrap();
    store.update_session(&mine.id, cost(0.0)).await.unwrap();
    store.update_session(&other.id, cost(2.0)).await.unwrap();

    let usage = store.user_usage("alice", window()).await.unwrap();
    assert_eq!(usage.running_turns, 1);
    assert_eq!(usage.recent_turns, 2);
    assert!(usage.oldest_recent_turn.is_some());
    assert!((usage.spend_day_usd - 0.75).abs() < 1e-9, "{usage:?}");
    assert!((usage.spend_month_usd - 0.75).abs() < 1e-9, "{usage:?}");
    assert_eq!(usage.sessions, 1);

    let later = UsageWindow {
        turns_since: Utc::now() + Duration::hours(1),
        day_start: Utc::now() + Duration::hours(1),
        month_start: Utc::now() - Duration::days(1),
    };
    let usage = store.user_usage("alice", later).await.unwrap();
    assert_eq!((usage.recent_turns, usage.oldest_recent_turn), (0, None));
    assert_eq!(usage.spend_day_usd, 0.0);
    assert!((usage.spend_month_usd - 0.75).abs() < 1e-9);

    store.delete_session(&mine.id).await.unwrap();
    let usage = store.user_usage("alice", window()).await.unwrap();
    assert_eq!(usage.sessions, 0);
    assert_eq!(
        usage.recent_turns, 2,
        "deleting a session does not give its turns back"
    );
    assert!(
        (usage.spend_day_usd - 0.75).abs() < 1e-9,
        "deleting a session does not give its spend back: {usage:?}"
    );
    // A model call outside any session (the gateway) counts too.
    store.record_spend("alice", 0.125).await.unwrap();
    let usage = store.user_usage("alice", window()).await.unwrap();
    assert!((usage.spend_day_usd - 0.875).abs() < 1e-9, "{usage:?}");
    assert!((usage.spend_month_usd - 0.875).abs() < 1e-9, "{usage:?}");
    // Kept by day: a row per day spent on (today's, and yesterday's if the
    // test ran across midnight), each at the day's first millisecond.
    let days = crate::strings(
        &store,
        "SELECT CAST(day % 86400000 AS TEXT) FROM spend_days WHERE owner = $1",
        "alice",
    )
    .await;
    assert!(!days.is_empty() && days.len() <= 2, "{days:?}");
    assert!(days.iter().all(|rest| rest == "0"), "{days:?}");
    let nobody = store.user_usage("carol", window()).await.unwrap();
    assert_eq!(nobody, Default::default());
}

#[tokio::test]
async fn the_audit_log_is_read_in_order_filtered_and_never_rewritten() {
    let (_guard, store) = store().await;
    let entry = |actor: &str, action: &str| NewAudit {
        actor: actor.into(),
        action: action.into(),
        target: Some("s1".into()),
        detail: serde_json::json!({"profile": "default", "note": "zoë 🦀"}),
    };
    let first = store
        .append_audit(&entry("alice", "session.create"))
        .await
        .unwrap();
    store
        .append_audit(&entry("bob", "session.create"))
        .await
        .unwrap();
    let third = store
        .append_audit(&entry("alice", "session.delete"))
        .await
        .unwrap();
    assert!(first.id < third.id);

    let all = store
        .audit_log(&AuditQuery {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[0], first);
    assert_eq!(all[2], third);
    let alices = store
        .audit_log(&AuditQuery {
            limit: 100,
            actor: Some("alice".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(alices.len(), 2);
    let after = store
        .audit_log(&AuditQuery {
            after: Some(first.id),
            limit: 1,
            action: Some("session.create".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].actor, "bob");

    let mut refused = vec![
        "UPDATE audit_log SET actor = 'mallory'",
        "DELETE FROM audit_log",
    ];
    if crate::BACKEND == "postgres" {
        refused.push("TRUNCATE audit_log");
    }
    for sql in refused {
        let err = crate::try_exec(&store, sql).await.unwrap_err();
        assert!(err.contains("append-only"), "{sql}: {err}");
    }
    assert_eq!(
        store
            .audit_log(&AuditQuery {
                limit: 100,
                ..Default::default()
            })
            .await
            .unwrap(),
        all
    );
}
