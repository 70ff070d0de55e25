//! What `agentd serve` does with bad, repeated and concurrent input: clear 4xx
//! JSON errors with nothing stored, idempotent submissions, 409 and queueing
//! while a turn runs, interrupts, pagination and deletion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod server_common;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use server_common::{Harness, Server, assert_gapless, words};

async fn raw(
    server: &Server,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> (StatusCode, Value) {
    let mut builder = server.request(method, path);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    if let Some(body) = body {
        builder = builder.body(body);
    }
    server.send(builder).await
}

const JSON: (&str, &str) = ("content-type", "application/json");

/// Method, path, headers, body, expected status, a word the message must name.
type Case = (
    Method,
    String,
    Vec<(&'static str, &'static str)>,
    Option<Vec<u8>>,
    u16,
    &'static str,
);

#[tokio::test]
async fn bad_input_is_a_clear_4xx_and_stores_nothing() {
    let h = Harness::open(
        json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "ok"}]}]}),
    )
    .await;
    let server = h.start().await;
    let id = server.session().await;
    let messages = format!("/v1/sessions/{id}/messages");
    let events = format!("/v1/sessions/{id}/events");
    let big = format!("{{\"content\": \"{}\"}}", "a".repeat(2 * 1024 * 1024));
    let cases: Vec<Case> = vec![
        (
            Method::POST,
            messages.clone(),
            vec![JSON],
            Some(b"{not json".to_vec()),
            400,
            "",
        ),
        (
            Method::POST,
            messages.clone(),
            vec![JSON],
            Some(b"{\"content\": 42}".to_vec()),
            400,
            "content",
        ),
        (
            Method::POST,
            messages.clone(),
            vec![JSON],
            Some(b"{\"content\": \"hi\", \"queue\": \"yes\"}".to_vec()),
            400,
            "queue",
        ),
        (
            Method::POST,
            messages.clone(),
            vec![JSON],
            Some(b"{\"content\": \"hi\", \"sneaky\": 1}".to_vec()),
            400,
            "sneaky",
        ),
        (
            Method::POST,
            messages.clone(),
            vec![JSON],
            Some(b"{}".to_vec()),
            400,
            "content",
        ),
        (
            Method::POST,
            messages.clone(),
            vec![JSON],
            Some(b"{\"content\": \"  \"}".to_vec()),
            400,
            "empty",
        ),
        (
            Method::POST,
            messages.clone(),
            vec![JSON],
            Some(b"[1, 2]".to_vec()),
            400,
            "",
        ),
        (
            Method::POST,
            messages.clone(),
            vec![],
            Some(b"{\"content\": \"hi\"}".to_vec()),
            415,
            "",
        ),
        (
            Method::POST,
            messages.clone(),
            vec![JSON],
            Some(big.into_bytes()),
            413,
            "",
        ),
        (
            Method::POST,
            "/v1/sessions/no-such-id/messages".into(),
            vec![JSON],
            Some(b"{\"content\": \"hi\"}".to_vec()),
            404,
            "",
        ),
        (
            Method::POST,
            "/v1/sessions".into(),
            vec![JSON],
            Some(b"{\"profile\": \"nope\"}".to_vec()),
            400,
            "nope",
        ),
        (
            Method::POST,
            "/v1/sessions".into(),
            vec![JSON],
            Some(b"{\"titel\": \"typo\"}".to_vec()),
            400,
            "titel",
        ),
        (
            Method::PATCH,
            format!("/v1/sessions/{id}"),
            vec![JSON],
            Some(b"{\"title\": 7}".to_vec()),
            400,
            "title",
        ),
        (
            Method::GET,
            events.clone(),
            vec![("Last-Event-ID", "abc")],
            None,
            400,
            "Last-Event-ID",
        ),
        (
            Method::GET,
            events.clone(),
            vec![("Last-Event-ID", "99999999999999999999999999")],
            None,
            400,
            "Last-Event-ID",
        ),
        (
            Method::GET,
            events.clone(),
            vec![("Last-Event-ID", "5000")],
            None,
            400,
            "5000",
        ),
        (
            Method::GET,
            format!("{events}?after=-1"),
            vec![],
            None,
            400,
            "after",
        ),
        (
            Method::GET,
            "/v1/sessions?limit=0".into(),
            vec![],
            None,
            400,
            "limit",
        ),
        (
            Method::GET,
            "/v1/sessions?limit=many".into(),
            vec![],
            None,
            400,
            "limit",
        ),
        (
            Method::GET,
            "/v1/sessions?cursor=nope".into(),
            vec![],
            None,
            400,
            "cursor",
        ),
        (
            Method::GET,
            "/v1/nothing-here".into(),
            vec![],
            None,
            404,
            "",
        ),
        (Method::PUT, "/v1/sessions".into(), vec![], None, 405, ""),
    ];
    for (method, path, headers, body, status, mention) in cases {
        let (got, answer) = raw(&server, method.clone(), &path, &headers, body).await;
        assert_eq!(got.as_u16(), status, "{method} {path}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_else(|| {
            panic!("{method} {path}: not a JSON error: {answer}");
        });
        assert!(answer["error"]["code"].is_string(), "{answer}");
        assert!(
            message.contains(mention),
            "{method} {path}: {message:?} should name {mention:?}"
        );
    }
    // Nothing was stored, and the server still serves.
    let (status, info) = server.get(&format!("/v1/sessions/{id}")).await;
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

type SseLike = server_common::SseEvent;

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

#[tokio::test]
async fn sessions_page_rename_and_delete_with_their_workspace() {
    let h = Harness::open(json!({"replies": []})).await;
    let server = h.start().await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(server.session().await);
    }
    ids.reverse(); // newest first
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/sessions?limit=2&cursor={c}"),
            None => "/v1/sessions?limit=2".into(),
        };
        let (status, page) = server.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        for s in page["sessions"].as_array().unwrap() {
            listed.push(s["id"].as_str().unwrap().to_string());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(listed, ids);

    let id = &ids[0];
    let (status, renamed) = server
        .send(
            server
                .request(Method::PATCH, &format!("/v1/sessions/{id}"))
                .json(&json!({"title": "Renamed"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(renamed["title"], "Renamed");

    let workspace = h.data().join("workspaces").join(id);
    assert!(workspace.is_dir());
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&workspace).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o700);
    std::fs::write(workspace.join("f.txt"), "x").unwrap();
    let (status, _) = server
        .send(server.request(Method::DELETE, &format!("/v1/sessions/{id}")))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(!workspace.exists());
    let (status, _) = server.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn files_are_served_from_the_workspace_only() {
    let h = Harness::open(json!({"replies": []})).await;
    let server = h.start().await;
    let id = server.session().await;
    let ws = h.data().join("workspaces").join(&id);
    std::fs::write(ws.join("notes.txt"), "hello\n").unwrap();
    std::fs::write(ws.join("page.html"), "<script>alert(1)</script>").unwrap();
    std::fs::write(ws.join("blob.bin"), [0u8, 159, 146, 150]).unwrap();
    std::fs::create_dir(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", ws.join("escape")).unwrap();
    std::os::unix::fs::symlink("/etc", ws.join("etc-dir")).unwrap();
    let big = std::fs::File::create(ws.join("big.log")).unwrap();
    big.set_len(11 * 1024 * 1024).unwrap();

    let files = format!("/v1/sessions/{id}/files");
    let (status, root) = server.get(&files).await;
    assert_eq!(status, StatusCode::OK, "{root}");
    let names: Vec<&str> = root["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "big.log",
            "blob.bin",
            "escape",
            "etc-dir",
            "notes.txt",
            "page.html",
            "src"
        ]
    );
    let (_, src) = server.get(&format!("{files}?path=src")).await;
    assert_eq!(src["path"], "src");
    assert_eq!(src["entries"][0]["name"], "main.rs");
    assert_eq!(src["entries"][0]["kind"], "file");

    let content = |path: &str| {
        server
            .request(Method::GET, &format!("/v1/sessions/{id}/files/content"))
            .query(&[("path", path)])
            .send()
    };
    let text = content("notes.txt").await.unwrap();
    assert_eq!(text.status(), StatusCode::OK);
    assert_eq!(text.headers()["content-type"], "text/plain; charset=utf-8");
    assert_eq!(text.text().await.unwrap(), "hello\n");
    let html = content("page.html").await.unwrap();
    assert_eq!(
        html.headers()["content-type"],
        "text/plain; charset=utf-8",
        "never rendered"
    );
    let blob = content("blob.bin").await.unwrap();
    assert_eq!(blob.headers()["content-type"], "application/octet-stream");
    assert_eq!(blob.bytes().await.unwrap().as_ref(), [0u8, 159, 146, 150]);

    for (path, status) in [
        ("../../../etc/passwd", 403),
        ("/etc/passwd", 403),
        ("escape", 403),
        ("etc-dir/passwd", 403),
        ("src/../../..", 403),
        ("missing.txt", 404),
        ("src", 400),
        ("big.log", 413),
        ("", 400),
    ] {
        let response = content(path).await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{path:?}");
        let body: Value = response.json().await.unwrap();
        assert!(body["error"]["code"].is_string(), "{path:?}: {body}");
        assert!(!body.to_string().contains("root:"), "nothing leaked");
    }
    for path in ["..", "etc-dir", "/"] {
        let (status, body) = server
            .send(server.request(Method::GET, &files).query(&[("path", path)]))
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
    }
}

#[tokio::test]
async fn the_openapi_document_lists_every_route_and_each_one_answers() {
    let h = Harness::open(
        json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "ok"}]}]}),
    )
    .await;
    let server = h.start().await;
    let id = server.session().await;
    let (status, doc) = server.get("/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    assert!(doc["info"]["title"].is_string());
    let paths = doc["paths"].as_object().unwrap();
    let expected = [
        ("post", "/v1/sessions"),
        ("get", "/v1/sessions"),
        ("get", "/v1/sessions/{id}"),
        ("patch", "/v1/sessions/{id}"),
        ("delete", "/v1/sessions/{id}"),
        ("post", "/v1/sessions/{id}/messages"),
        ("get", "/v1/sessions/{id}/messages"),
        ("get", "/v1/sessions/{id}/events"),
        ("post", "/v1/sessions/{id}/interrupt"),
        ("get", "/v1/sessions/{id}/files"),
        ("get", "/v1/sessions/{id}/files/content"),
        ("get", "/v1/models"),
        ("get", "/v1/profiles"),
        ("get", "/healthz"),
        ("get", "/metrics"),
        ("get", "/openapi.json"),
        ("get", "/"),
    ];
    let mut documented = Vec::new();
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            if ["get", "post", "patch", "delete", "put"].contains(&method.as_str()) {
                assert!(operation["responses"].is_object(), "{method} {path}");
                documented.push((method.clone(), path.clone()));
            }
        }
    }
    let mut want: Vec<(String, String)> = expected
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    want.sort();
    documented.sort();
    assert_eq!(documented, want);
    // $refs resolve to schemas that exist.
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let text = doc.to_string();
    for reference in text.split("\"#/components/schemas/").skip(1) {
        let name = reference.split('"').next().unwrap();
        assert!(schemas.contains_key(name), "dangling $ref {name}");
    }

    // Every documented route is served (not the router's 404/405).
    for (method, path) in &documented {
        let concrete = path.replace("{id}", &id);
        let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let mut builder = server.request(method.clone(), &concrete);
        if concrete.ends_with("/events") {
            // A bad id answers at once instead of an endless stream.
            builder = builder.header("Last-Event-ID", "nope");
        }
        if method == Method::POST || method == Method::PATCH {
            builder = builder.json(&json!({"unknown_field": true}));
        }
        if method == Method::DELETE {
            continue; // answered in another test
        }
        let response = builder.send().await.unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        assert_ne!(body["error"]["code"], "route_not_found", "{method} {path}");
        assert_ne!(
            body["error"]["code"], "method_not_allowed",
            "{method} {path}"
        );
        assert!(status.as_u16() < 500, "{method} {path}: {status}");
    }
    let (status, models) = server.get("/v1/models").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(models["default"], "anthropic:claude-sonnet-4-5");
    let (_, profiles) = server.get("/v1/profiles").await;
    assert_eq!(profiles["profiles"][0]["name"], "default");
    let metrics = server
        .client
        .get(format!("{}/metrics", server.url))
        .send()
        .await
        .unwrap();
    let text = metrics.text().await.unwrap();
    assert!(text.contains("agentd_sessions 1"), "{text}");
    let index = server
        .client
        .get(format!("{}/", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(index.headers()["cache-control"], "no-store");
    assert!(index.headers().get("access-control-allow-origin").is_none());
    assert!(index.text().await.unwrap().contains("/openapi.json"));
}
