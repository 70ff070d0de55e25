//! The cluster tables (`store::postgres::cluster`): claims, leases, failover,
//! fencing and notifications, against a real PostgreSQL.

use agentd_store::prelude::*;
use std::time::Duration;

use agentd_protocol::{Event, TurnFinished, TurnStatus, Usage};
use agentd_store::postgres::cluster::{
    ClusterStore, EVENTS_IN_RANGES, Enqueued, LAST_TURN, QueuedTurn, Signal,
};

use super::{delta, exec, session, store};

pub(super) const TIMEOUT: Duration = Duration::from_secs(15);

pub(super) fn turn(session: &str, id: &str, request: Option<&str>) -> QueuedTurn {
    QueuedTurn {
        turn_id: id.into(),
        session_id: session.into(),
        text: format!("message of {id}"),
        client_request_id: request.map(str::to_string),
    }
}

pub(super) async fn nodes(cluster: &ClusterStore, ids: &[&str]) {
    for id in ids {
        assert!(cluster.register_node(id, "", id, TIMEOUT).await.unwrap());
    }
}

fn finished(turn_id: &str) -> Event {
    Event::TurnFinished(TurnFinished {
        agent_status: None,
        turn_id: turn_id.into(),
        status: TurnStatus::Completed,
        result: None,
        usage: Usage::default(),
        cost_usd: 0.0,
        num_model_calls: 0,
        duration_ms: 0,
        error: None,
    })
}

#[tokio::test]
async fn turns_are_taken_oldest_first_one_per_session_at_a_time() {
    let (_schema, store) = store().await;
    let cluster = store.cluster();
    nodes(&cluster, &["n1", "n2"]).await;
    let (a, b) = (session(&store, "u").await.id, session(&store, "u").await.id);
    assert_eq!(
        cluster
            .enqueue_turn(&turn(&a, "a1", None), false)
            .await
            .unwrap(),
        Enqueued::Started
    );
    assert_eq!(
        cluster
            .enqueue_turn(&turn(&a, "a2", None), false)
            .await
            .unwrap(),
        Enqueued::Busy
    );
    assert_eq!(
        cluster
            .enqueue_turn(&turn(&a, "a2", None), true)
            .await
            .unwrap(),
        Enqueued::Queued
    );
    assert_eq!(
        cluster
            .enqueue_turn(&turn(&b, "b1", None), false)
            .await
            .unwrap(),
        Enqueued::Started
    );
    assert_eq!(
        store
            .get_session(&a)
            .await
            .unwrap()
            .unwrap()
            .status
            .as_str(),
        "running"
    );

    let (first, lease) = cluster
        .claim_turn("n1", None, TIMEOUT)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (first.turn_id.as_str(), lease.node_id.as_str()),
        ("a1", "n1")
    );
    assert_eq!(first.text, "message of a1");
    let (second, _) = cluster
        .claim_turn("n2", None, TIMEOUT)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.turn_id, "b1", "a2 waits for a1");
    assert!(
        cluster
            .claim_turn("n2", None, TIMEOUT)
            .await
            .unwrap()
            .is_none()
    );
    assert!(cluster.busy(&a).await.unwrap());

    // a1's end is stored: the session takes a message again (queued behind a2).
    store.append_event(&a, &finished("a1")).await.unwrap();
    cluster.release_lease(&a, "a1", "n1").await.unwrap();
    let (third, _) = cluster
        .claim_turn("n2", Some(&a), TIMEOUT)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(third.turn_id, "a2");
    store.append_event(&a, &finished("a2")).await.unwrap();
    assert!(
        !cluster.busy(&a).await.unwrap(),
        "finished: bookkeeping only"
    );
}

#[tokio::test]
async fn a_request_id_is_a_duplicate_while_queued_leased_or_recorded() {
    let (_schema, store) = store().await;
    let cluster = store.cluster();
    nodes(&cluster, &["n1"]).await;
    let s = session(&store, "u").await.id;
    cluster
        .enqueue_turn(&turn(&s, "t1", Some("r1")), false)
        .await
        .unwrap();
    let dup = Enqueued::Duplicate("t1".into());
    assert_eq!(
        cluster
            .enqueue_turn(&turn(&s, "t2", Some("r1")), true)
            .await
            .unwrap(),
        dup
    );
    // Taken, but its `turns` row is not written yet.
    cluster
        .claim_turn("n1", None, TIMEOUT)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        cluster
            .enqueue_turn(&turn(&s, "t3", Some("r1")), false)
            .await
            .unwrap(),
        dup
    );
    assert_eq!(
        cluster
            .enqueue_turn(&turn(&s, "t4", Some("r1")), true)
            .await
            .unwrap(),
        dup
    );
}

#[tokio::test]
async fn a_dead_nodes_lease_goes_to_one_live_node_which_fences_the_old_owner() {
    let (_schema, store) = store().await;
    let cluster = store.cluster();
    nodes(&cluster, &["n1", "n2", "n3"]).await;
    let (s, other) = (session(&store, "u").await.id, session(&store, "u").await.id);
    cluster
        .enqueue_turn(&turn(&s, "t1", None), false)
        .await
        .unwrap();
    cluster
        .enqueue_turn(&turn(&other, "o1", None), false)
        .await
        .unwrap();
    cluster
        .claim_turn("n1", None, TIMEOUT)
        .await
        .unwrap()
        .unwrap();
    cluster
        .claim_turn("n2", None, TIMEOUT)
        .await
        .unwrap()
        .unwrap();
    assert!(
        cluster
            .take_dead_leases("n3", TIMEOUT)
            .await
            .unwrap()
            .is_empty(),
        "all alive"
    );

    exec(
        &store,
        "UPDATE cluster_nodes SET heartbeat_at = now() - interval '1 hour' WHERE id = 'n1'",
    )
    .await;
    let taken = cluster.take_dead_leases("n3", TIMEOUT).await.unwrap();
    assert_eq!(taken.len(), 1, "only the dead node's lease: {taken:?}");
    assert_eq!(
        (taken[0].turn_id.as_str(), taken[0].node_id.as_str()),
        ("t1", "n1")
    );
    assert!(
        cluster
            .take_dead_leases("n2", TIMEOUT)
            .await
            .unwrap()
            .is_empty(),
        "taken once"
    );

    // n1 wakes up: it can neither release nor overwrite what n3 now owns,
    // and it may not take new work before it has beaten its heart again.
    cluster.release_lease(&s, "t1", "n1").await.unwrap();
    assert_eq!(cluster.lease(&s).await.unwrap().unwrap().node_id, "n3");
    assert!(
        !cluster
            .save_workspace(&s, "hash-n1", "n1", Some("t1"))
            .await
            .unwrap()
    );
    assert!(
        cluster
            .save_workspace(&s, "hash-n3", "n3", Some("t1"))
            .await
            .unwrap()
    );
    assert_eq!(
        cluster.workspace(&s).await.unwrap().as_deref(),
        Some("hash-n3")
    );
    cluster
        .enqueue_turn(&turn(&other, "o2", None), true)
        .await
        .unwrap();
    cluster.release_lease(&other, "o1", "n2").await.unwrap();
    assert!(
        cluster
            .claim_turn("n1", None, TIMEOUT)
            .await
            .unwrap()
            .is_none()
    );
    let held = cluster.heartbeat("n1", "", "n1", false).await.unwrap();
    assert!(held.is_empty(), "n1 holds nothing any more: {held:?}");
    assert_eq!(
        cluster
            .claim_turn("n1", None, TIMEOUT)
            .await
            .unwrap()
            .unwrap()
            .0
            .turn_id,
        "o2"
    );
}

#[tokio::test]
async fn a_second_live_process_cannot_take_a_node_id() {
    let (_schema, store) = store().await;
    let cluster = store.cluster();
    assert!(
        cluster
            .register_node("api-1", "", "first", TIMEOUT)
            .await
            .unwrap()
    );
    assert!(
        !cluster
            .register_node("api-1", "", "second", TIMEOUT)
            .await
            .unwrap()
    );
    assert!(
        cluster
            .register_node("api-1", "", "first", TIMEOUT)
            .await
            .unwrap(),
        "itself again"
    );
    assert_eq!(cluster.live_nodes(TIMEOUT).await.unwrap(), 1);
    exec(
        &store,
        "UPDATE cluster_nodes SET heartbeat_at = now() - interval '1 hour'",
    )
    .await;
    assert!(
        cluster
            .register_node("api-1", "", "second", TIMEOUT)
            .await
            .unwrap(),
        "timed out"
    );
}

#[tokio::test]
async fn signals_reach_their_node_once_and_appends_notify_only_in_cluster_mode() {
    let (schema, store) = store().await;
    let cluster = store.cluster();
    let signal = Signal {
        kind: "interrupt".into(),
        target: "s".into(),
        data: "{}".into(),
    };
    cluster.send_signal("n1", &signal).await.unwrap();
    assert!(cluster.take_signals("n2").await.unwrap().is_empty());
    assert_eq!(cluster.take_signals("n1").await.unwrap(), [signal]);
    assert!(cluster.take_signals("n1").await.unwrap().is_empty());

    let mut listener = cluster.listener().await.unwrap();
    let s = session(&store, "u").await.id;
    store.append_event(&s, &delta("quiet")).await.unwrap();
    let notifying = super::reopen(&schema).await.with_event_notifications();
    notifying
        .append_events(&s, &[delta("a"), delta("b")])
        .await
        .unwrap();
    // Other tests share the database (and its channels): skip their news.
    let note = loop {
        let note = tokio::time::timeout(Duration::from_secs(10), listener.recv())
            .await
            .unwrap()
            .unwrap();
        if note.channel() == "agentd_events" && note.payload().starts_with(&s) {
            break note;
        }
    };
    assert_eq!(
        note.payload(),
        format!("{s} 2 3"),
        "the plain append sent nothing"
    );
    let events = cluster
        .events_in_ranges(&[(s.clone(), 1, 3)], 100)
        .await
        .unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
}

/// Other nodes' streams catch up by reading each session's new range through
/// the index, also under the generic plan a prepared statement ends up with:
/// a plan that scans the events table makes every relayed event cost in
/// proportion to all the events ever stored.
#[tokio::test]
async fn catching_up_reads_only_the_ranges_asked_for() {
    let (_schema, store) = store().await;
    let (a, b) = (session(&store, "u").await.id, session(&store, "u").await.id);
    let batch: Vec<Event> = (0..200).map(|i| delta(&format!("d{i}"))).collect();
    store.append_events(&a, &batch).await.unwrap();
    store.append_events(&b, &batch).await.unwrap();
    exec(&store, "ANALYZE events").await;

    let plan = super::generic_plan(
        &store,
        EVENTS_IN_RANGES,
        "text[], bigint[], bigint[], bigint",
        &format!("ARRAY['{a}', '{b}'], ARRAY[10, 20]::bigint[], ARRAY[20, 40]::bigint[], 100"),
    )
    .await;
    super::assert_index_scan(&plan, "session_id = w.session_id");

    let events = store
        .cluster()
        .events_in_ranges(&[(a.clone(), 10, 13), (b.clone(), 20, 22)], 100)
        .await
        .unwrap();
    let got: Vec<(String, u64)> = events
        .iter()
        .map(|e| (e.session_id.clone(), e.seq))
        .collect();
    let mut want = vec![
        (a.clone(), 11),
        (a.clone(), 12),
        (a.clone(), 13),
        (b.clone(), 21),
        (b.clone(), 22),
    ];
    want.sort();
    assert_eq!(got, want);
}

/// A node looks up a session's latest turn before each turn it takes: through
/// an index of the session's turns, not a walk back through every session's
/// (which is what the generic plan did for a session with no turn yet).
#[tokio::test]
async fn a_sessions_latest_turn_is_found_through_its_own_turns() {
    let (_schema, store) = store().await;
    let mut busy = Vec::new();
    for _ in 0..40 {
        busy.push(session(&store, "u").await.id);
    }
    let new = session(&store, "u").await.id;
    for (i, id) in busy.iter().enumerate() {
        exec(
            &store,
            &format!(
                "INSERT INTO turns (id, session_id, status, started_at, finished_at) \
                 SELECT 'turn-{i:02}-' || lpad(n::text, 3, '0'), '{id}', 'completed', n, n \
                 FROM generate_series(1, 50) AS n"
            ),
        )
        .await;
    }
    exec(&store, "ANALYZE turns").await;
    let plan = super::generic_plan(&store, LAST_TURN, "text", &format!("'{new}'")).await;
    super::assert_index_scan(&plan, "session_id = $1");
    let cluster = store.cluster();
    assert_eq!(cluster.last_turn(&new).await.unwrap(), None);
    assert_eq!(
        cluster.last_turn(&busy[7]).await.unwrap().as_deref(),
        Some("turn-07-050")
    );
}
