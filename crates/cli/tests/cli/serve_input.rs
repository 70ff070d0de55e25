//! What `agentd serve` does with bad, repeated and concurrent input: clear 4xx
//! JSON errors with nothing stored, idempotent submissions, 409 and queueing
//! while a turn runs, and interrupts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use serve_harness::{Harness, Server, WAIT, assert_gapless, words};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Send a request and check it is refused with `status`, as a JSON error
/// whose message names `mention`.
async fn refused(
    server: &Server,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    status: u16,
    mention: &str,
) {
    let mut builder = server.request(method.clone(), path);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    if let Some(body) = body {
        builder = builder.body(body.to_string());
    }
    let (got, answer) = server.send(builder).await;
    assert_eq!(got.as_u16(), status, "{method} {path} {body:?}: {answer}");
    assert!(
        answer["error"]["code"].is_string(),
        "{method} {path}: {answer}"
    );
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(mention),
        "{method} {path}: {message:?} should name {mention:?}"
    );
}

/// A POST announcing a `length`-byte body, over a raw socket: the server
/// must answer 413 from the `Content-Length` alone, when the body never comes.
async fn oversized_post(server: &Server, path: &str, length: usize) -> (u16, Value, String) {
    let addr = server.url.trim_start_matches("http://");
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {length}\r\n\r\n"
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(WAIT, tcp.read_to_end(&mut response))
        .await
        .expect("the server kept the connection open")
        .unwrap();
    let response = String::from_utf8(response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (
        status,
        serde_json::from_str(body).unwrap(),
        head.to_lowercase(),
    )
}

const JSON: (&str, &str) = ("content-type", "application/json");
const MIB: usize = 1024 * 1024;

#[tokio::test]
async fn bad_input_is_a_clear_4xx_and_stores_nothing() {
    let h = Harness::open(json!({"replies": [{"repeat": true,
        "content": [{"type": "text", "text": "ok"}]}]}))
    .await;
    let server = h.start().await;
    let id = server.session().await;
    let messages = format!("/v1/sessions/{id}/messages");

    // Bodies posted as messages: (body, status, what the message names).
    for (body, status, mention) in [
        ("{not json", 400, ""),
        (r#"{"content": 42}"#, 400, "content"),
        (r#"{"content": "hi", "queue": "yes"}"#, 400, "queue"),
        (r#"{"content": "hi", "sneaky": 1}"#, 400, "sneaky"),
        (r#"{}"#, 400, "content"),
        (r#"{"content": "  "}"#, 400, "empty"),
        (
            r#"{"content": "hi", "client_request_id": ""}"#,
            400,
            "client_request_id",
        ),
        ("[1, 2]", 400, ""),
    ] {
        refused(
            &server,
            Method::POST,
            &messages,
            &[JSON],
            Some(body),
            status,
            mention,
        )
        .await;
    }
    let hi = Some(r#"{"content": "hi"}"#);
    refused(
        &server,
        Method::POST,
        &messages,
        &[],
        hi,
        415,
        "Content-Type",
    )
    .await;
    let unknown = "/v1/sessions/no-such-id/messages";
    refused(&server, Method::POST, unknown, &[JSON], hi, 404, "session").await;
    // Messages take up to 32 MiB (images in base64), uploads 20 MiB, the rest 1 MiB.
    let upload = format!("/v1/sessions/{id}/files?path=big.bin");
    let limits = [
        (messages.clone(), 32 * MIB + 1),
        (upload, 20 * MIB + 1),
        ("/v1/sessions".to_string(), MIB + 1),
    ];
    for (path, length) in limits {
        let (status, body, head) = oversized_post(&server, &path, length).await;
        assert_eq!(status, 413, "{path}: {body}");
        assert_eq!(body["error"]["code"], "too_large");
        assert!(head.contains("connection: close"), "{head}");
    }

    // Other bodies.
    let profile = Some(r#"{"profile": "nope"}"#);
    refused(
        &server,
        Method::POST,
        "/v1/sessions",
        &[JSON],
        profile,
        400,
        "nope",
    )
    .await;
    let typo = Some(r#"{"titel": "typo"}"#);
    refused(
        &server,
        Method::POST,
        "/v1/sessions",
        &[JSON],
        typo,
        400,
        "titel",
    )
    .await;
    let session = format!("/v1/sessions/{id}");
    let title = Some(r#"{"title": 7}"#);
    refused(
        &server,
        Method::PATCH,
        &session,
        &[JSON],
        title,
        400,
        "title",
    )
    .await;

    // Event ids: (Last-Event-ID, what the message names).
    let events = format!("/v1/sessions/{id}/events");
    for (last_id, mention) in [
        ("abc", "Last-Event-ID"),
        ("-1", "Last-Event-ID"),
        ("99999999999999999999999999", "Last-Event-ID"),
        ("5000", "5000"),
    ] {
        let header = [("Last-Event-ID", last_id)];
        refused(&server, Method::GET, &events, &header, None, 400, mention).await;
    }
    // Queries and routes: (path, status, what the message names).
    let after = format!("{events}?after=x");
    for (path, status, mention) in [
        (after.as_str(), 400, "after"),
        ("/v1/sessions?limit=0", 400, "limit"),
        ("/v1/sessions?limit=many", 400, "limit"),
        ("/v1/sessions?cursor=nope", 400, "cursor"),
        ("/v1/nothing-here", 404, "route"),
    ] {
        refused(&server, Method::GET, path, &[], None, status, mention).await;
    }
    refused(
        &server,
        Method::PUT,
        "/v1/sessions",
        &[],
        None,
        405,
        "method",
    )
    .await;

    // Nothing was stored, and the server still serves.
    let (status, info) = server.get(&session).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(info["last_seq"], 0);
    assert_eq!(info["totals"]["turns"], 0);
    assert_eq!(info["title"], Value::Null);
    let (_, list) = server.get("/v1/sessions").await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1);
    assert!(h.model_requests().is_empty());
}

#[tokio::test]
async fn one_client_request_id_sent_five_times_at_once_starts_one_turn() {
    let h = Harness::open(json!({"replies": [
        {"delay_ms": 20, "content": [{"type": "text", "text": words(30)}]},
        {"content": [{"type": "text", "text": "a second turn must not happen"}]}
    ]}))
    .await;
    let server = h.start().await;
    let id = server.session().await;
    let path = format!("/v1/sessions/{id}/messages");
    let body = json!({"content": "only once", "client_request_id": "req-1"});
    let posts = (0..5).map(|_| server.post(&path, body.clone()));
    let answers = futures::future::join_all(posts).await;
    let turn_ids: Vec<&str> = answers
        .iter()
        .map(|(status, body)| {
            assert_eq!(*status, StatusCode::ACCEPTED, "{body}");
            body["turn_id"].as_str().unwrap()
        })
        .collect();
    assert!(turn_ids.iter().all(|t| *t == turn_ids[0]), "{turn_ids:?}");
    let started = answers
        .iter()
        .filter(|(_, b)| b["state"] == "started")
        .count();
    assert_eq!(started, 1, "{answers:?}");

    server.wait_idle(&id).await;
    // After the turn, the same id still names it and starts nothing.
    let (status, again) = server.post(&path, body).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(again["turn_id"], turn_ids[0]);
    assert_eq!(again["state"], "duplicate");
    server.wait_idle(&id).await;
    let events = server.all_events(&id).await;
    let turns: Vec<&SseLike> = events
        .iter()
        .filter(|e| e.event == "turn.started")
        .collect();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].data["turn_id"], turn_ids[0]);
    assert_eq!(h.model_requests().len(), 1);
}

type SseLike = serve_harness::SseEvent;

#[tokio::test]
async fn a_busy_session_answers_409_queues_in_order_and_interrupts() {
    let h = Harness::open(json!({"replies": [
        {"when": {"last_user_contains": "one"}, "delay_ms": 30, "content": [{"type": "text", "text": words(45)}]},
        {"when": {"last_user_contains": "two"}, "content": [{"type": "text", "text": "reply two"}]},
        {"when": {"last_user_contains": "three"}, "content": [{"type": "text", "text": "reply three"}]},
        {"when": {"last_user_contains": "sleep"}, "content": [
            {"type": "tool_use", "name": "Bash", "input": {"command": "sleep 30"}}]}
    ]}))
    .await;
    let server = h.start().await;
    let id = server.session().await;
    let path = format!("/v1/sessions/{id}/messages");
    let (status, _) = server
        .post(&format!("/v1/sessions/{id}/interrupt"), json!({}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "nothing to interrupt");

    let mut stream = server.events(&id, None).await;
    let one = server.message(&id, "one").await;
    let (status, busy) = server.post(&path, json!({"content": "not now"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{busy}");
    assert_eq!(busy["error"]["code"], "turn_running");
    let (status, two) = server
        .post(&path, json!({"content": "two", "queue": true}))
        .await;
    assert_eq!(
        (status, two["state"].as_str()),
        (StatusCode::ACCEPTED, Some("queued"))
    );
    let (status, three) = server
        .post(&path, json!({"content": "three", "queue": true}))
        .await;
    assert_eq!(
        (status, three["state"].as_str()),
        (StatusCode::ACCEPTED, Some("queued"))
    );
    let (_, info) = server.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(info["status"], "running");
    assert_eq!(info["queued_turns"], 2);
    assert_eq!(info["running_turn_id"], one.as_str());
    // No deleting while busy.
    let (status, _) = server
        .send(server.request(Method::DELETE, &format!("/v1/sessions/{id}")))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);

    let events = stream.until_finished(3).await;
    let finished: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e.event == "turn.finished")
        .map(|e| {
            (
                e.data["turn_id"].as_str().unwrap(),
                e.data["result"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(finished[0].0, one);
    assert_eq!(finished[1], (two["turn_id"].as_str().unwrap(), "reply two"));
    assert_eq!(
        finished[2],
        (three["turn_id"].as_str().unwrap(), "reply three")
    );

    // Interrupt a running tool.
    let sleeping = server.message(&id, "sleep").await;
    loop {
        let event = stream.next().await.unwrap();
        if event.event == "tool.started" {
            break;
        }
    }
    let (status, body) = server
        .post(&format!("/v1/sessions/{id}/interrupt"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(body["turn_id"], sleeping.as_str());
    let rest = stream.until_finished(1).await;
    assert_eq!(rest.last().unwrap().data["status"], "interrupted");
    server.wait_idle(&id).await;
    assert_gapless(&server.all_events(&id).await);
}

/// A turn whose agent cannot be put together (here: the session's workspace
/// is gone) fails with the reason, asks no model, and leaves the session
/// usable once the cause is fixed.
#[tokio::test]
async fn a_turn_that_cannot_start_fails_with_the_reason_and_the_session_goes_on() {
    let h = Harness::open(json!({"replies": [
        {"content": [{"type": "text", "text": "back in business"}]}
    ]}))
    .await;
    let server = h.start().await;
    let id = server.session().await;
    let workspace = h.data().join("workspaces").join(&id);
    std::fs::remove_dir_all(&workspace).unwrap();

    let failed = server.message(&id, "hello?").await;
    server.wait_idle(&id).await;
    let events = server.all_events(&id).await;
    let error = events
        .iter()
        .find(|e| e.event == "error")
        .expect("an error event says why");
    assert_eq!(error.data["code"], "turn_not_started", "{}", error.data);
    assert!(
        error.data["message"].as_str().unwrap().contains(&id),
        "{}",
        error.data
    );
    let finished = events
        .iter()
        .find(|e| e.event == "turn.finished")
        .expect("the turn ends");
    assert_eq!(finished.data["turn_id"], failed.as_str());
    assert_eq!(finished.data["status"], "failed");
    assert!(h.model_requests().is_empty());

    std::fs::create_dir_all(&workspace).unwrap();
    let next = server.message(&id, "and now?").await;
    server.wait_idle(&id).await;
    let events = server.all_events(&id).await;
    let last = events.iter().rfind(|e| e.event == "turn.finished").unwrap();
    assert_eq!(last.data["turn_id"], next.as_str());
    assert_eq!(last.data["status"], "completed", "{}", last.data);
    assert_eq!(h.model_requests().len(), 1);
}
