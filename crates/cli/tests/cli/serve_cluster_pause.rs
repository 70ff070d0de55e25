//! A cluster node stopped for 2 s (a GC-like pause: SIGSTOP, SIGCONT) with
//! the default `[cluster]` settings keeps its running turn: no other node
//! takes it over, the turn completes, its stream has no gap. The same nodes
//! still take over the turn of a node killed with -9 (so the survivors were
//! steady long enough to take leases: the pause test is not vacuous).
//! Needs the throwaway cluster that `make test` starts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use serve_harness::{Harness, Server, SseEvent, assert_gapless, fresh_database_url};

/// The default `[cluster] lease_timeout_s` (the config below sets none).
const DEFAULT_LEASE_TIMEOUT: Duration = Duration::from_secs(4);

pub(crate) async fn node_id(server: &Server) -> String {
    let (status, health) = server.get("/healthz").await;
    assert_eq!(status, StatusCode::OK, "{health}");
    health["node_id"].as_str().expect("a node id").to_string()
}

/// The node holding the lease of the session's turn `turn` (waits for it:
/// the previous turn's lease may not be released yet).
pub(crate) async fn owner(url: &str, session: &str, turn: &str, ids: &[String]) -> usize {
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(url)
        .await
        .unwrap();
    for _ in 0..1000 {
        let row: Option<(String,)> = sqlx::query_as(
            "SELECT node_id FROM turn_leases WHERE session_id = $1 AND turn_id = $2",
        )
        .bind(session)
        .bind(turn)
        .fetch_optional(&mut conn)
        .await
        .unwrap();
        if let Some((node,)) = row {
            return ids.iter().position(|id| *id == node).unwrap();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no node took the turn");
}

#[tokio::test]
async fn a_node_paused_for_2_s_keeps_its_turn_and_a_killed_one_loses_it() {
    let url = fresh_database_url().await;
    // Each turn is one slow reply: 16 chunks, 400 ms apart (~6 s).
    let words = "slow ".repeat(48);
    let h = Harness::new(
        json!({"replies": [{"repeat": true, "delay_ms": 400,
            "content": [{"type": "text", "text": words}]}]}),
        &format!(
            "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n\
             [database]\nurl = \"{url}\"\n"
        ),
    )
    .await;
    let started = Instant::now();
    let mut nodes = Vec::new();
    let mut ids = Vec::new();
    for name in ["a", "b", "c"] {
        let server = h.start_node(name).await;
        ids.push(node_id(&server).await);
        nodes.push(Some(server));
    }
    let id = nodes[0].as_ref().unwrap().session().await;
    // Nodes take others' leases only after beating steadily for a timeout.
    tokio::time::sleep(
        (DEFAULT_LEASE_TIMEOUT + Duration::from_secs(1)).saturating_sub(started.elapsed()),
    )
    .await;

    let turn = nodes[1].as_ref().unwrap().message(&id, "pause me").await;
    let paused = owner(&url, &id, &turn, &ids).await;
    let watcher = (paused + 1) % 3;
    let mut stream = nodes[watcher].as_ref().unwrap().events(&id, None).await;
    let mut seen: Vec<SseEvent> = Vec::new();
    loop {
        let event = stream.next().await.expect("stream ended early");
        seen.push(event.clone());
        if event.event == "message.delta" {
            break;
        }
    }
    let node = nodes[paused].as_mut().unwrap();
    node.signal("STOP").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    node.signal("CONT").await;
    let end = loop {
        let event = stream.next().await.expect("stream ended early");
        seen.push(event.clone());
        if event.event == "turn.finished" {
            break event;
        }
    };
    let logs: Vec<String> = nodes.iter().map(|n| n.as_ref().unwrap().log()).collect();
    assert_eq!(end.data["status"], "completed", "{}\n{logs:#?}", end.data);
    for log in &logs {
        assert!(
            !log.contains("stopped heartbeating"),
            "a false takeover: {log}"
        );
        assert!(!log.contains("lost the turn's lease"), "{log}");
    }

    // kill -9 the node running the next turn: another node finishes it.
    let turn = nodes[watcher]
        .as_ref()
        .unwrap()
        .message(&id, "kill me")
        .await;
    let killed = owner(&url, &id, &turn, &ids).await;
    let survivor = (0..3).find(|&i| i != killed).unwrap();
    let last = seen.last().unwrap().id;
    let mut stream = nodes[survivor]
        .as_ref()
        .unwrap()
        .events(&id, Some(last))
        .await;
    loop {
        let event = stream.next().await.expect("stream ended early");
        seen.push(event.clone());
        if event.event == "message.delta" {
            break;
        }
    }
    nodes[killed].take().unwrap().kill9().await;
    let end = loop {
        let event = stream.next().await.expect("stream ended early");
        seen.push(event.clone());
        if event.event == "turn.finished" {
            break event;
        }
    };
    assert_eq!(end.data["status"], "interrupted", "{}", end.data);
    assert_eq!(end.data["error"]["code"], "node_lost", "{}", end.data);
    assert_gapless(&seen);
}
