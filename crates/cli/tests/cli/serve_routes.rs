//! The rest of `agentd serve`'s routes over real HTTP: pagination, rename and
//! delete, workspace files, and the OpenAPI document against the router.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use serve_harness::Harness;

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
        ("post", "/v1/sessions/{id}/chat"),
        ("get", "/v1/sessions/{id}/chat/stream"),
        ("post", "/v1/sessions/{id}/interrupt"),
        ("get", "/v1/sessions/{id}/pending"),
        ("post", "/v1/sessions/{id}/permissions/{request_id}"),
        ("post", "/v1/sessions/{id}/questions/{request_id}"),
        ("post", "/v1/sessions/{id}/compact"),
        ("get", "/v1/sessions/{id}/commands"),
        ("post", "/v1/sessions/{id}/commands/{name}"),
        ("get", "/v1/sessions/{id}/checkpoints"),
        ("post", "/v1/sessions/{id}/rewind"),
        ("post", "/v1/sessions/{id}/fork"),
        ("get", "/v1/sessions/{id}/files"),
        ("post", "/v1/sessions/{id}/files"),
        ("get", "/v1/sessions/{id}/files/content"),
        ("get", "/v1/models"),
        ("get", "/v1/profiles"),
        ("get", "/v1/projects"),
        ("get", "/v1/usage"),
        ("get", "/v1/admin/users"),
        ("get", "/v1/admin/users/{name}"),
        ("patch", "/v1/admin/users/{name}"),
        ("post", "/v1/admin/users/{name}/grants"),
        ("delete", "/v1/admin/users/{name}/grants/{kind}/{grant}"),
        ("get", "/v1/admin/audit"),
        ("get", "/v1/admin/metrics"),
        ("get", "/v1/admin/webhooks/deliveries"),
        ("get", "/healthz"),
        ("get", "/metrics"),
        ("get", "/openapi.json"),
        ("get", "/v1/identity/jwks"),
        ("post", "/v1/auth/login"),
        ("post", "/v1/auth/logout"),
        ("get", "/v1/auth/me"),
        ("get", "/v1/auth/methods"),
        ("get", "/v1/auth/oidc/login"),
        ("get", "/v1/auth/oidc/callback"),
        ("post", "/v1/messages"),
        ("post", "/v1/messages/count_tokens"),
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
        let concrete = path.replace("{id}", &id).replace("{request_id}", "r1");
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
    let listed = models["models"].as_array().unwrap();
    let default = listed
        .iter()
        .find(|m| m["id"] == models["default"])
        .unwrap();
    assert_eq!(default["provider"], "anthropic", "{models}");
    assert_eq!(default["model"], "claude-sonnet-4-5", "{models}");
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
    assert_eq!(index.headers()["cache-control"], "no-cache");
    assert!(index.headers().get("access-control-allow-origin").is_none());
    assert!(
        index.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );
    assert!(index.text().await.unwrap().contains("<html"));
}
