use agentd_protocol::TurnStatus;
use agentd_store::prelude::*;
use agentd_store::{SessionStatus, SessionUpdate, StoreError, TurnStart};

use crate::{session, store};

#[tokio::test]
async fn start_finish_and_running_turns() {
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    let TurnStart::Started(t1) = store.start_turn(&s.id, "t1", Some("req-1")).await.unwrap() else {
        panic!("expected Started");
    };
    assert_eq!(t1.id, "t1");
    assert_eq!(t1.session_id, s.id);
    assert_eq!(t1.status, None);
    assert_eq!(t1.client_request_id.as_deref(), Some("req-1"));
    assert_eq!(t1.finished_at, None);
    let session = store.get_session(&s.id).await.unwrap().unwrap();
    assert_eq!(session.status, SessionStatus::Running);
    let idle = SessionUpdate {
        status: Some(SessionStatus::Idle),
        ..SessionUpdate::default()
    };
    store.update_session(&s.id, idle.clone()).await.unwrap();
    let TurnStart::Started(t2) = store.start_turn(&s.id, "t2", None).await.unwrap() else {
        panic!("expected Started");
    };

    assert_eq!(
        store.running_turns().await.unwrap(),
        vec![t1.clone(), t2.clone()]
    );

    store
        .finish_turn("t1", TurnStatus::Completed)
        .await
        .unwrap();
    assert_eq!(store.running_turns().await.unwrap(), vec![t2]);

    // The first finish wins; a second one changes nothing.
    store
        .finish_turn("t1", TurnStatus::Interrupted)
        .await
        .unwrap();
    let TurnStart::Duplicate(done) = store.start_turn(&s.id, "t9", Some("req-1")).await.unwrap()
    else {
        panic!("expected Duplicate");
    };
    assert_eq!(done.id, "t1");
    // A repeated request starts nothing: the session stays as it was, also
    // when it repeats the turn id too.
    store.update_session(&s.id, idle).await.unwrap();
    let again = store.start_turn(&s.id, "t1", Some("req-1")).await.unwrap();
    assert!(matches!(again, TurnStart::Duplicate(ref t) if t.id == "t1"));
    let session = store.get_session(&s.id).await.unwrap().unwrap();
    assert_eq!(session.status, SessionStatus::Idle);
    assert_eq!(done.status, Some(TurnStatus::Completed));
    let finished_at = done.finished_at.unwrap();
    assert!(finished_at >= done.started_at);
    assert_eq!(done.started_at, t1.started_at);

    store
        .finish_turn("t2", TurnStatus::BudgetExceeded)
        .await
        .unwrap();
    assert!(store.running_turns().await.unwrap().is_empty());
}

#[tokio::test]
async fn every_status_round_trips() {
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    let all = [
        TurnStatus::Completed,
        TurnStatus::Interrupted,
        TurnStatus::Failed,
        TurnStatus::MaxTurns,
        TurnStatus::Timeout,
        TurnStatus::BudgetExceeded,
        TurnStatus::CircuitBreaker,
    ];
    for (i, status) in all.iter().enumerate() {
        let req = format!("r{i}");
        let id = format!("t{i}");
        store.start_turn(&s.id, &id, Some(&req)).await.unwrap();
        store.finish_turn(&id, *status).await.unwrap();
        let TurnStart::Duplicate(t) = store.start_turn(&s.id, "x", Some(&req)).await.unwrap()
        else {
            panic!("expected Duplicate");
        };
        assert_eq!(t.status, Some(*status));
    }
}

#[tokio::test]
async fn client_request_ids_are_scoped_per_session() {
    let (_dir, store) = store().await;
    let a = session(&store, "alice").await;
    let b = session(&store, "alice").await;
    let started = |r: TurnStart| matches!(r, TurnStart::Started(_));
    assert!(started(
        store.start_turn(&a.id, "a1", Some("same")).await.unwrap()
    ));
    assert!(started(
        store.start_turn(&b.id, "b1", Some("same")).await.unwrap()
    ));
    // Without a client_request_id turns never collide.
    assert!(started(store.start_turn(&a.id, "a2", None).await.unwrap()));
    assert!(started(store.start_turn(&a.id, "a3", None).await.unwrap()));
    // A duplicate writes nothing.
    assert!(!started(
        store.start_turn(&a.id, "a4", Some("same")).await.unwrap()
    ));
    assert_eq!(crate::count_rows(&store, "turns", &a.id).await, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn duplicate_client_request_id_race_starts_exactly_one_turn() {
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    for round in 0..20 {
        let req = format!("req-{round}");
        let mut tasks = Vec::new();
        for i in 0..5 {
            let store = store.clone();
            let sid = s.id.clone();
            let req = req.clone();
            tasks.push(tokio::spawn(async move {
                store
                    .start_turn(&sid, &format!("turn-{round}-{i}"), Some(&req))
                    .await
                    .unwrap()
            }));
        }
        let mut started = Vec::new();
        let mut duplicates = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                TurnStart::Started(t) => started.push(t),
                TurnStart::Duplicate(t) => duplicates.push(t),
            }
        }
        assert_eq!(started.len(), 1, "round {round}");
        assert_eq!(duplicates.len(), 4);
        assert!(duplicates.iter().all(|d| *d == started[0]));
    }
    assert_eq!(crate::count_rows(&store, "turns", &s.id).await, 20);
}

#[tokio::test]
async fn unknown_ids_are_not_found() {
    let (_dir, store) = store().await;
    let err = store.start_turn("nope", "t1", None).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    let err = store
        .finish_turn("nope", TurnStatus::Completed)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
}

#[tokio::test]
async fn reusing_a_turn_id_is_an_error() {
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    store.start_turn(&s.id, "t1", None).await.unwrap();
    let err = store.start_turn(&s.id, "t1", None).await.unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err}");
}

#[tokio::test]
async fn a_turn_finishes_with_its_session_totals() {
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    store.start_turn(&s.id, "t1", None).await.unwrap();
    let update = || SessionUpdate {
        title: Some("first".into()),
        status: Some(SessionStatus::Idle),
        add_usage: Some(agentd_protocol::Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Default::default()
        }),
        add_cost_usd: Some(0.25),
        add_turns: Some(1),
        ..SessionUpdate::default()
    };
    let after = store
        .finish_turn_with_session("t1", TurnStatus::Completed, &s.id, update())
        .await
        .unwrap();
    assert_eq!(after.status, SessionStatus::Idle);
    assert_eq!(after.title.as_deref(), Some("first"));
    assert_eq!(
        (after.usage.input_tokens, after.usage.output_tokens),
        (10, 5)
    );
    assert_eq!((after.cost_usd, after.turns), (0.25, 1));
    assert_eq!(store.get_session(&s.id).await.unwrap(), Some(after.clone()));
    assert!(store.running_turns().await.unwrap().is_empty());

    // An unknown turn: NotFound, and the session is left as it was.
    let err = store
        .finish_turn_with_session("nope", TurnStatus::Completed, &s.id, update())
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::NotFound(ref what) if what.contains("nope")),
        "{err}"
    );
    assert_eq!(store.get_session(&s.id).await.unwrap(), Some(after));
}
