//! Several `agentd serve` nodes on one PostgreSQL (issue 11), over real HTTP
//! on loopback: any node serves any session, events reach streams on every
//! node exactly once and in order, interrupts and answers reach the node that
//! runs the turn, a drained node finishes its turn and exits, and a node
//! killed mid-turn loses nothing but that turn (another node finishes it as
//! interrupted; the session goes on elsewhere with its history and files).
//! Needs the throwaway cluster that `make test` starts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use serve_harness::{
    EventStream, Harness, Server, SseEvent, WAIT, assert_gapless, fresh_database_url, words,
};

/// Lease timeout of the test nodes: a killed node's turn ends within it.
const LEASE_TIMEOUT_S: u64 = 3;

fn config(url: &str, mode: &str) -> String {
    format!(
        "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"{mode}\"\n\
         [database]\nurl = \"{url}\"\n[cluster]\nlease_timeout_s = {LEASE_TIMEOUT_S}\n"
    )
}

async fn start_nodes(h: &Harness, names: &[&str]) -> Vec<Option<Server>> {
    let mut nodes = Vec::new();
    for name in names {
        nodes.push(Some(h.start_node(name).await));
    }
    nodes
}

fn node(nodes: &[Option<Server>], i: usize) -> &Server {
    nodes[i].as_ref().expect("node stopped")
}

async fn node_id(server: &Server) -> String {
    let (status, health) = server.get("/healthz").await;
    assert_eq!(status, StatusCode::OK, "{health}");
    health["node_id"].as_str().expect("a node id").to_string()
}

/// The first column of `sql` (one `$1`: the session), waiting until it has
/// a row.
async fn wait_for_row(url: &str, sql: &str, session: &str, what: &str) -> String {
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(url)
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let row: Option<(String,)> = sqlx::query_as(sql)
            .bind(session)
            .fetch_optional(&mut conn)
            .await
            .unwrap();
        if let Some((value,)) = row {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Which node holds the lease of the session's running turn (waits for one).
async fn owner(url: &str, session: &str, ids: &[String]) -> usize {
    let sql = "SELECT node_id FROM turn_leases WHERE session_id = $1";
    let node = wait_for_row(url, sql, session, "no node took the turn").await;
    ids.iter()
        .position(|id| *id == node)
        .unwrap_or_else(|| panic!("lease held by unknown node {node}"))
}

/// Which node saved the session's workspace last (waits for a save: it
/// follows the turn's `turn.finished`).
async fn saved_by(url: &str, session: &str) -> String {
    let sql = "SELECT saved_by FROM session_workspaces WHERE session_id = $1";
    wait_for_row(url, sql, session, "the workspace was never saved").await
}

/// Read `stream` until an event satisfies `stop`; every event read is kept.
async fn read_until(
    stream: &mut EventStream,
    seen: &mut Vec<SseEvent>,
    stop: impl Fn(&SseEvent) -> bool,
) -> SseEvent {
    loop {
        let event = stream.next().await.expect("stream ended early");
        seen.push(event.clone());
        if stop(&event) {
            return event;
        }
    }
}

/// Wait for the turn's permission request and allow it on the node `offset`
/// places after the one running the turn; that node's index.
async fn allow_from_elsewhere(
    nodes: &[Option<Server>],
    url: &str,
    ids: &[String],
    session: &str,
    stream: &mut EventStream,
    seen: &mut Vec<SseEvent>,
    offset: usize,
) -> usize {
    let asked = read_until(stream, seen, |e| e.event == "permission.requested").await;
    let request = asked.data["request_id"].as_str().unwrap().to_string();
    let runner = owner(url, session, ids).await;
    let (status, body) = node(nodes, (runner + offset) % nodes.len())
        .post(
            &format!("/v1/sessions/{session}/permissions/{request}"),
            json!({"decision": "allow"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    runner
}

fn finished(e: &SseEvent) -> bool {
    e.event == "turn.finished"
}

#[tokio::test]
async fn a_session_created_on_a_posted_on_b_streams_from_c_exactly_once_in_order() {
    let url = fresh_database_url().await;
    let h = Harness::new(
        json!({"replies": [
            {"when": {"last_user_contains": "hello"}, "content": [
                {"type": "text", "text": words(400)},
                {"type": "tool_use", "name": "Bash", "input": {"command": "echo from-the-sandbox | tee out.txt"}}
            ]},
            {"when": {"last_tool_result_contains": "from-the-sandbox"},
             "content": [{"type": "text", "text": "first done"}]},
            {"when": {"last_user_contains": "again"},
             "content": [{"type": "text", "text": words(300)}]}
        ]}),
        &config(&url, "bypass"),
    )
    .await;
    let nodes = start_nodes(&h, &["a", "b", "c"]).await;
    let (a, b, c) = (node(&nodes, 0), node(&nodes, 1), node(&nodes, 2));
    let ids = [node_id(a).await, node_id(b).await, node_id(c).await];
    assert!(
        ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2],
        "{ids:?}"
    );

    let id = a.session().await;
    let mut stream = c.events(&id, None).await;
    let turn = b.message(&id, "hello").await;
    let mut seen = Vec::new();
    let end = read_until(&mut stream, &mut seen, finished).await;
    assert_eq!(end.data["turn_id"], turn.as_str());
    assert_eq!(end.data["status"], "completed", "{}{}", b.log(), c.log());
    assert_eq!(end.data["result"], "first done");
    assert_eq!(seen[0].event, "turn.started");
    assert!(seen.iter().any(|e| e.event == "tool.finished"));
    assert!(
        seen.iter().filter(|e| e.event == "message.delta").count() > 1,
        "the text streamed as several events"
    );
    // The next turn, posted on A while C still streams.
    a.message(&id, "again").await;
    read_until(&mut stream, &mut seen, finished).await;
    assert_gapless(&seen);
    // Every node tells the same story.
    for server in [a, b, c] {
        assert_eq!(server.all_events(&id).await, seen);
    }
    let info = a.wait_idle(&id).await;
    assert_eq!(info["totals"]["turns"], 2);
    // Every node shows the workspace as of the last turn end, wherever it ran.
    for server in [a, b, c] {
        let response = server
            .request(
                reqwest::Method::GET,
                &format!("/v1/sessions/{id}/files/content?path=out.txt"),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.text().await.unwrap(), "from-the-sandbox\n");
    }
}

#[tokio::test]
async fn answers_and_interrupts_posted_to_any_node_reach_the_owner() {
    let url = fresh_database_url().await;
    let h = Harness::new(
        json!({"replies": [
            {"when": {"last_user_contains": "needs approval"}, "content": [
                {"type": "tool_use", "name": "Bash", "input": {"command": "echo approved-run"}}
            ]},
            {"when": {"last_tool_result_contains": "approved-run"},
             "content": [{"type": "text", "text": "ran it"}]},
            {"when": {"last_user_contains": "long job"}, "content": [
                {"type": "tool_use", "name": "Bash", "input": {"command": "echo started; sleep 60"}}
            ]},
            {"when": {"last_user_contains": "after"},
             "content": [{"type": "text", "text": "still here"}]}
        ]}),
        &config(&url, "default"),
    )
    .await;
    let nodes = start_nodes(&h, &["a", "b", "c"]).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(node_id(node(&nodes, i)).await);
    }
    let id = node(&nodes, 0).session().await;
    let mut stream = node(&nodes, 2).events(&id, None).await;
    let mut seen = Vec::new();

    node(&nodes, 1).message(&id, "needs approval").await;
    let runner = allow_from_elsewhere(&nodes, &url, &ids, &id, &mut stream, &mut seen, 1).await;
    let end = read_until(&mut stream, &mut seen, finished).await;
    assert_eq!(
        end.data["status"],
        "completed",
        "{}",
        node(&nodes, runner).log()
    );
    assert_eq!(end.data["result"], "ran it");
    let resolved = seen
        .iter()
        .find(|e| e.event == "permission.resolved")
        .expect("resolved");
    assert_eq!(resolved.data["decision"], "allow");

    // A long tool call, approved and then interrupted from other nodes.
    node(&nodes, 2).message(&id, "long job").await;
    let runner = allow_from_elsewhere(&nodes, &url, &ids, &id, &mut stream, &mut seen, 2).await;
    read_until(&mut stream, &mut seen, |e| {
        e.event == "tool.output"
            && e.data["text"]
                .as_str()
                .is_some_and(|t| t.contains("started"))
    })
    .await;
    let (status, body) = node(&nodes, (runner + 1) % 3)
        .post(&format!("/v1/sessions/{id}/interrupt"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let end = read_until(&mut stream, &mut seen, finished).await;
    assert_eq!(end.data["status"], "interrupted");
    assert!(
        end.data["error"].is_null() || end.data["error"]["code"] != "node_lost",
        "stopped by the interrupt, not a failover: {}",
        end.data
    );
    // The session goes on, through yet another node.
    node(&nodes, runner).message(&id, "after").await;
    let end = read_until(&mut stream, &mut seen, finished).await;
    assert_eq!(end.data["result"], "still here");
    assert_gapless(&seen);
}

#[tokio::test]
async fn drain_then_kill_9_then_the_session_goes_on_with_its_files() {
    let url = fresh_database_url().await;
    let h = Harness::new(
        json!({"replies": [
            {"when": {"last_user_contains": "write the file"}, "content": [
                {"type": "text", "text": "Writing."},
                {"type": "tool_use", "name": "Bash",
                 "input": {"command": "echo KIWI-7 > notes.txt && sleep 2 && echo wrote"}}
            ]},
            {"when": {"last_tool_result_contains": "wrote"},
             "content": [{"type": "text", "text": "written"}]},
            {"when": {"last_user_contains": "other session"},
             "content": [{"type": "text", "text": "elsewhere"}]},
            {"when": {"last_user_contains": "sleepy"}, "content": [
                {"type": "text", "text": "Sleeping now."},
                {"type": "tool_use", "name": "Bash", "input": {"command": "echo started; sleep 60"}}
            ]},
            {"when": {"last_user_contains": "read it back"}, "content": [
                {"type": "tool_use", "name": "Bash", "input": {"command": "cat notes.txt"}}
            ]},
            {"when": {"last_tool_result_contains": "KIWI-7"},
             "content": [{"type": "text", "text": "the file says KIWI-7"}]}
        ]}),
        &config(&url, "bypass"),
    )
    .await;
    let mut nodes = start_nodes(&h, &["a", "b", "c"]).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(node_id(node(&nodes, i)).await);
    }
    let id = node(&nodes, 0).session().await;
    node(&nodes, 1).message(&id, "write the file").await;
    let drained = owner(&url, &id, &ids).await;
    let watcher = (drained + 1) % 3;
    let mut stream = node(&nodes, watcher).events(&id, None).await;
    let mut seen = Vec::new();

    // Drain the node running the turn: it finishes the turn, takes no new
    // one (a turn posted to it runs elsewhere), and exits.
    nodes[drained].as_mut().unwrap().signal("USR1").await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, health) = node(&nodes, drained).get("/healthz").await;
        if health["status"] == "draining" {
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never drained: {health}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let other = node(&nodes, drained).session().await;
    let mut other_stream = node(&nodes, watcher).events(&other, None).await;
    node(&nodes, drained).message(&other, "other session").await;
    let end = other_stream.until_finished(1).await.pop().unwrap();
    assert_eq!(end.data["result"], "elsewhere");
    let ran_other = saved_by(&url, &other).await;
    assert_ne!(ran_other, ids[drained], "a draining node took a new turn");

    let end = read_until(&mut stream, &mut seen, finished).await;
    assert_eq!(
        end.data["status"],
        "completed",
        "{}",
        node(&nodes, drained).log()
    );
    assert_eq!(end.data["result"], "written");
    let code = nodes[drained].as_mut().unwrap().exit_code().await;
    assert_eq!(code, 0, "a drained node exits cleanly");
    assert_eq!(saved_by(&url, &id).await, ids[drained]);
    nodes[drained] = None;

    // kill -9 the node running the next turn, mid-tool.
    node(&nodes, watcher).message(&id, "sleepy").await;
    read_until(&mut stream, &mut seen, |e| {
        e.event == "tool.output"
            && e.data["text"]
                .as_str()
                .is_some_and(|t| t.contains("started"))
    })
    .await;
    let killed = owner(&url, &id, &ids).await;
    assert_ne!(killed, drained);
    let survivor = (0..3).find(|&i| i != killed && i != drained).unwrap();
    nodes[killed].take().unwrap().kill9().await;
    if killed == watcher {
        let last = seen.last().unwrap().id;
        stream = node(&nodes, survivor).events(&id, Some(last)).await;
    }
    let end = read_until(&mut stream, &mut seen, finished).await;
    assert_eq!(end.data["status"], "interrupted");
    assert_eq!(end.data["error"]["code"], "node_lost", "{}", end.data);

    // The next message, on the last node standing: it never had this
    // session's workspace, so it restores it from the store first.
    let survivor_node = node(&nodes, survivor);
    assert!(
        !h.data()
            .join(["a", "b", "c"][survivor])
            .join("workspaces")
            .join(&id)
            .join("notes.txt")
            .exists(),
        "the survivor must not have the file yet"
    );
    survivor_node.message(&id, "read it back").await;
    let end = read_until(&mut stream, &mut seen, finished).await;
    assert_eq!(end.data["status"], "completed", "{}", survivor_node.log());
    assert_eq!(end.data["result"], "the file says KIWI-7");
    assert!(
        survivor_node
            .log()
            .contains("restored the workspace saved by another node"),
        "{}",
        survivor_node.log()
    );
    assert_gapless(&seen);
    let statuses: Vec<&Value> = seen
        .iter()
        .filter(|e| finished(e))
        .map(|e| &e.data["status"])
        .collect();
    assert_eq!(statuses, ["completed", "interrupted", "completed"]);

    // The model saw the whole conversation, from three nodes.
    let last = h.model_requests().last().unwrap().body.to_string();
    for needle in [
        "write the file",
        "echo KIWI-7",
        "written",
        "sleepy",
        "sleep 60",
        "read it back",
    ] {
        assert!(last.contains(needle), "request lacks {needle:?}: {last}");
    }
}

#[tokio::test]
async fn a_full_node_still_interrupts_an_accepted_turn_and_a_node_id_is_one_process() {
    let url = fresh_database_url().await;
    let toml = format!(
        "{}node_id = \"api-1\"\nmax_running_turns = 1\n",
        config(&url, "bypass")
    );
    let h = Harness::new(
        json!({"replies": [
            {"when": {"last_user_contains": "long job"}, "content": [
                {"type": "tool_use", "name": "Bash", "input": {"command": "echo started; sleep 60"}}
            ]},
            {"repeat": true, "content": [{"type": "text", "text": "never needed"}]}
        ]}),
        &toml,
    )
    .await;
    let node = h.start_node("a").await;
    let (busy, waiting) = (node.session().await, node.session().await);
    let mut busy_events = node.events(&busy, None).await;
    let mut seen = Vec::new();
    node.message(&busy, "long job").await;
    read_until(&mut busy_events, &mut seen, |e| {
        e.event == "tool.output"
            && e.data["text"]
                .as_str()
                .is_some_and(|t| t.contains("started"))
    })
    .await;

    // The node runs all it may: the next turn is accepted but not taken.
    let mut waiting_events = node.events(&waiting, None).await;
    let accepted = node.message(&waiting, "stop me before I start").await;
    let (status, body) = node
        .post(&format!("/v1/sessions/{waiting}/interrupt"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["turn_id"], accepted.as_str());
    let end = waiting_events.until_finished(1).await.pop().unwrap();
    assert_eq!(end.data["turn_id"], accepted.as_str());
    assert_eq!(end.data["status"], "interrupted");
    assert_eq!(end.data["num_model_calls"], 0, "it never reached the model");

    // A second process given the same node id refuses to start.
    let dir = h.data().join("b");
    std::fs::create_dir_all(&dir).unwrap();
    let out = tokio::time::timeout(
        WAIT,
        h.command_in(&dir, &["serve", "--bind", "127.0.0.1:0"])
            .output(),
    )
    .await
    .expect("the second node neither started nor stopped")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("another agentd node with id \"api-1\""),
        "{stderr}"
    );

    let (status, _) = node
        .post(&format!("/v1/sessions/{busy}/interrupt"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let end = read_until(&mut busy_events, &mut seen, finished).await;
    assert_eq!(end.data["status"], "interrupted");
}
