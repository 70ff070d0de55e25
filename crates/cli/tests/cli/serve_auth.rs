//! Authentication and isolation of `agentd serve`: tokens from
//! `agentd tokens create`, the trusted-proxy header mode, `none` only on
//! loopback, and other users' sessions answering 404 everywhere.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use serve_harness::{Harness, Server};

const TOKEN_AUTH: &str = "[server]\nauth = \"token\"\n";

fn script() -> Value {
    json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "hello"}]}]})
}

/// Every session route, as `(method, path, JSON body)`.
fn session_routes(id: &str) -> Vec<(Method, String, Option<Value>)> {
    let s = format!("/v1/sessions/{id}");
    vec![
        (Method::GET, s.clone(), None),
        (Method::PATCH, s.clone(), Some(json!({"title": "mine now"}))),
        (Method::DELETE, s.clone(), None),
        (
            Method::POST,
            format!("{s}/messages"),
            Some(json!({"content": "hi"})),
        ),
        (Method::GET, format!("{s}/messages"), None),
        (Method::GET, format!("{s}/events"), None),
        (Method::POST, format!("{s}/interrupt"), None),
        (Method::GET, format!("{s}/files"), None),
        (Method::GET, format!("{s}/files/content?path=x"), None),
    ]
}

async fn call(
    server: &Server,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut builder = server.request(method, path);
    if let Some(body) = body {
        builder = builder.json(&body);
    }
    server.send(builder).await
}

#[tokio::test]
async fn two_users_see_only_their_own_sessions() {
    let h = Harness::new(script(), TOKEN_AUTH).await;
    let alice_token = h.token("alice").await;
    let bob_token = h.token("bob").await;
    let server = h.start().await;
    let alice = server.as_user(&alice_token);
    let bob = server.as_user(&bob_token);

    let a = alice.session().await;
    let b = bob.session().await;
    let (_, list) = alice.get("/v1/sessions").await;
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [a.as_str()]);
    let (_, list) = bob.get("/v1/sessions").await;
    assert_eq!(list["sessions"][0]["id"], b.as_str());
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1);

    // Bob on Alice's session: 404 everywhere, the same answer as for no session.
    let (_, missing) = bob.get("/v1/sessions/no-such-session").await;
    for (method, path, body) in session_routes(&a) {
        let (status, answer) = call(&bob, method.clone(), &path, body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {answer}");
        assert_eq!(answer, missing, "{method} {path}");
    }
    // Nothing happened to it.
    let (status, info) = alice.get(&format!("/v1/sessions/{a}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(info["title"], Value::Null);
    assert_eq!(info["last_seq"], 0);
    assert_eq!(info["totals"]["turns"], 0);
    // The cursor of another user's session is no cursor.
    let (status, _) = bob.get(&format!("/v1/sessions?cursor={a}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn missing_wrong_and_revoked_tokens_get_a_bare_401() {
    let h = Harness::new(script(), TOKEN_AUTH).await;
    let token = h.token("carol").await;
    let server = h.start().await;
    let fake = format!("agentd_{}", "0".repeat(64));
    let headers = [
        None,
        Some("Bearer".to_string()),
        Some("Bearer nonsense".to_string()),
        Some(format!("Bearer {fake}")),
        Some(format!("Basic {token}")),
        Some(format!("Bearer {token}x")),
    ];
    let mut bodies = Vec::new();
    for header in &headers {
        let mut builder = server.client.get(format!("{}/v1/sessions", server.url));
        if let Some(value) = header {
            builder = builder.header("Authorization", value);
        }
        let response = builder.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{header:?}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
        bodies.push(response.json::<Value>().await.unwrap());
    }
    assert!(bodies.iter().all(|b| *b == bodies[0]), "{bodies:?}");
    assert_eq!(bodies[0]["error"]["code"], "unauthorized");

    // The real token works; health needs none.
    let carol = server.as_user(&token);
    let (status, _) = carol.get("/v1/sessions").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server.get("/healthz").await;
    assert_eq!(status, StatusCode::OK);

    // Revoked, it stops working at once.
    let (code, listing, _) = h.cli(&["tokens", "ls", "--json"]).await;
    assert_eq!(code, 0);
    let listing: Value = serde_json::from_str(&listing).unwrap();
    assert!(
        !listing.to_string().contains(&token),
        "tokens are never shown again"
    );
    let token_id = listing[0]["id"].as_str().unwrap();
    let (code, _, stderr) = h.cli(&["tokens", "revoke", token_id]).await;
    assert_eq!(code, 0, "{stderr}");
    let (status, body) = carol.get("/v1/sessions").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body, bodies[0]);
    // Only the hash is stored.
    let db = std::fs::read(h.data().join("agentd.db")).unwrap();
    let needle = token.as_bytes();
    assert!(!db.windows(needle.len()).any(|w| w == needle));
}

#[tokio::test]
async fn header_mode_needs_the_proxy_secret() {
    let secret = "a-long-shared-secret";
    let h = Harness::new(
        script(),
        &format!("[server]\nauth = \"header\"\nheader_name = \"X-Remote-User\"\nheader_secret = \"{secret}\"\n"),
    )
    .await;
    let server = h.start().await;
    let ask = |user: Option<&str>, secret: Option<&str>| {
        let mut builder = server.client.get(format!("{}/v1/sessions", server.url));
        if let Some(user) = user {
            builder = builder.header("X-Remote-User", user);
        }
        if let Some(secret) = secret {
            builder = builder.header("X-Agentd-Proxy-Secret", secret);
        }
        builder
    };
    for (user, given) in [
        (Some("dave"), None),
        (Some("dave"), Some("wrong")),
        (None, Some(secret)),
        (Some("not a name"), Some(secret)),
    ] {
        let response = ask(user, given).send().await.unwrap();
        assert_eq!(
            response.status(),
            StatusCode::UNAUTHORIZED,
            "{user:?} {given:?}"
        );
    }
    let response = ask(Some("dave"), Some(secret))
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let created = server
        .client
        .post(format!("{}/v1/sessions", server.url))
        .header("X-Remote-User", "dave")
        .header("X-Agentd-Proxy-Secret", secret)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let listed: Value = ask(Some("erin"), Some(secret))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["sessions"], json!([]), "erin sees none of dave's");
}

#[tokio::test]
async fn auth_none_is_refused_off_loopback_and_header_mode_without_a_secret() {
    let h = Harness::new(script(), "[server]\nauth = \"none\"\n").await;
    let (code, _, stderr) = h.cli(&["serve", "--bind", "0.0.0.0:0"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("loopback"), "{stderr}");

    let h = Harness::new(script(), "[server]\nauth = \"header\"\n").await;
    let (code, _, stderr) = h.cli(&["serve", "--bind", "127.0.0.1:0"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("secret"), "{stderr}");
}

#[tokio::test]
async fn without_auth_everyone_is_local_and_sees_cli_sessions() {
    let h = Harness::open(script()).await;
    let workspace = tempfile::TempDir::new().unwrap();
    let cwd = workspace.path().to_str().unwrap();
    let (code, _, stderr) = h.cli(&["run", "--cwd", cwd, "hello from the cli"]).await;
    assert_eq!(code, 0, "{stderr}");
    let server = h.start().await;
    let (status, list) = server.get("/v1/sessions").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["sessions"][0]["title"], "hello from the cli");
    let id = list["sessions"][0]["id"].as_str().unwrap().to_string();
    // Deleting a CLI session never touches the user's directory.
    std::fs::write(workspace.path().join("keep.txt"), "mine").unwrap();
    let (status, _) = call(&server, Method::DELETE, &format!("/v1/sessions/{id}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(workspace.path().join("keep.txt").exists());
}
