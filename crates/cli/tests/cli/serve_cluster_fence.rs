//! A cluster node stopped (SIGSTOP) for longer than the lease timeout loses
//! its turn: another node takes the lease and finishes the turn as
//! `interrupted`. When the stopped node wakes (SIGCONT) its appends are
//! fenced by the lease it lost: none of its deltas, errors or its own
//! `turn.finished` reach the log after the survivor's.
//! Needs the throwaway cluster that `make test` starts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use std::time::{Duration, Instant};

use serde_json::json;
use serve_harness::{Harness, SseEvent, WAIT, assert_gapless, fresh_database_url};

use crate::serve_cluster_pause::{node_id, owner};

/// 3 s, not the 2 s minimum: a loaded machine stalls a node's beats for
/// that long now and then.
const LEASE_TIMEOUT: Duration = Duration::from_secs(3);

#[tokio::test]
async fn a_node_woken_after_losing_its_lease_appends_nothing_more() {
    let url = fresh_database_url().await;
    // One slow reply: 40 chunks, 250 ms apart (~10 s), still streaming when
    // the owner wakes.
    let text = "slow ".repeat(120);
    let h = Harness::new(
        json!({"replies": [{"repeat": true, "delay_ms": 250,
            "content": [{"type": "text", "text": text}]}]}),
        &format!(
            "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n\
             [database]\nurl = \"{url}\"\n[cluster]\nlease_timeout_s = {}\n",
            LEASE_TIMEOUT.as_secs()
        ),
    )
    .await;
    let started = Instant::now();
    let mut nodes = Vec::new();
    let mut ids = Vec::new();
    for name in ["a", "b"] {
        let server = h.start_node(name).await;
        ids.push(node_id(&server).await);
        nodes.push(server);
    }
    let id = nodes[0].session().await;
    // Nodes take others' leases only after beating steadily for a timeout.
    tokio::time::sleep((LEASE_TIMEOUT + Duration::from_secs(1)).saturating_sub(started.elapsed()))
        .await;

    let turn = nodes[0].message(&id, "stop me").await;
    let paused = owner(&url, &id, &turn, &ids).await;
    let survivor = 1 - paused;
    let mut stream = nodes[survivor].events(&id, None).await;
    loop {
        let event = stream.next().await.expect("stream ended early");
        if event.event == "message.delta" {
            break;
        }
    }
    nodes[paused].signal("STOP").await;
    // The survivor notices within 1.1 timeouts, then finishes the turn.
    let end = loop {
        let event = stream.next().await.expect("stream ended early");
        if event.event == "turn.finished" {
            break event;
        }
    };
    assert_eq!(end.data["status"], "interrupted", "{}", end.data);
    assert_eq!(end.data["error"]["code"], "node_lost", "{}", end.data);
    nodes[paused].signal("CONT").await;
    // The woken node's turn goes on (the rest of its reply is buffered), or
    // is stopped: either way it tries to append, at least its own end.
    let woke = Instant::now();
    let log = loop {
        let log = nodes[paused].log();
        if log.contains("storing nothing more of it") || woke.elapsed() > WAIT {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        log.contains("storing nothing more of it"),
        "the woken node was not fenced out: {log}"
    );
    tokio::time::sleep(LEASE_TIMEOUT).await;

    // Read back on the survivor: the turn ends once, with nothing after.
    let events = nodes[survivor].all_events(&id).await;
    assert_gapless(&events);
    let finished: Vec<&SseEvent> = events
        .iter()
        .filter(|e| e.event == "turn.finished")
        .collect();
    let summary: Vec<(u64, &str)> = events.iter().map(|e| (e.id, e.event.as_str())).collect();
    assert_eq!(
        finished.len(),
        1,
        "one turn.finished: {summary:?}\n{log}\n{}",
        nodes[survivor].log()
    );
    assert_eq!(finished[0].data["turn_id"], turn.as_str());
    assert_eq!(finished[0].data["status"], "interrupted");
    assert_eq!(
        events.last().unwrap().id,
        finished[0].id,
        "nothing stored after the turn's end: {summary:?}\n{log}"
    );
    // Its row and its session are the survivor's too: the turn ended
    // `interrupted`, the session idle (the woken node recorded no other end
    // nor marked it running again).
    let (turn_status, session_status) = stored_statuses(&url, &id, &turn).await;
    assert_eq!(turn_status.as_deref(), Some("interrupted"), "{log}");
    assert_eq!(session_status, "idle", "{log}");

    // The session goes on: the next turn runs (on either node) and ends.
    let next = nodes[survivor].message(&id, "next").await;
    let mut stream = nodes[survivor].events(&id, Some(finished[0].id)).await;
    let more = stream.until_finished(1).await;
    let end = more.last().unwrap();
    assert_eq!(end.data["turn_id"], next.as_str(), "{more:?}");
    assert_eq!(end.data["status"], "completed", "{}", end.data);
}

/// The turn's stored status and its session's, read behind the API's back.
async fn stored_statuses(url: &str, session: &str, turn: &str) -> (Option<String>, String) {
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(url)
        .await
        .unwrap();
    let (turn_status,): (Option<String>,) =
        sqlx::query_as("SELECT status FROM turns WHERE id = $1")
            .bind(turn)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    let (session_status,): (String,) = sqlx::query_as("SELECT status FROM sessions WHERE id = $1")
        .bind(session)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    (turn_status, session_status)
}
