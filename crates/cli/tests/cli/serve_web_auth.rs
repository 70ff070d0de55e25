//! The web UI's side of `agentd serve` over plain HTTP: signing in with a
//! cookie (and the Origin check that guards writes made with it), signing
//! out, who-am-I in every auth mode, and the static files with their
//! security headers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use reqwest::header::{HeaderMap, SET_COOKIE};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};
use serve_harness::{Harness, Server};

const TOKEN_AUTH: &str = "[server]\nauth = \"token\"\n";
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
    frame-ancestors 'none'; form-action 'self'";

fn script() -> Value {
    json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "hello"}]}]})
}

/// `POST /v1/auth/login` with `token` (and extra headers): status, headers, body.
async fn login(
    server: &Server,
    token: &str,
    extra: &[(&str, &str)],
) -> (StatusCode, HeaderMap, Value) {
    let mut builder = server
        .client
        .post(format!("{}/v1/auth/login", server.url))
        .json(&json!({"token": token}));
    for (name, value) in extra {
        builder = builder.header(*name, *value);
    }
    let response = builder.send().await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, headers, body)
}

/// The session cookie's `name=value` from a `Set-Cookie`, and its attributes.
fn session_cookie(headers: &HeaderMap) -> Option<(String, Vec<String>)> {
    let value = headers.get(SET_COOKIE)?.to_str().unwrap();
    let mut parts = value.split(';').map(|p| p.trim().to_string());
    let pair = parts.next()?;
    assert!(pair.starts_with("agentd_session="), "{value}");
    Some((pair, parts.collect()))
}

/// A request carrying only the cookie (no Bearer token).
fn with_cookie(server: &Server, method: Method, path: &str, cookie: &str) -> RequestBuilder {
    server
        .client
        .request(method, format!("{}{path}", server.url))
        .header("Cookie", format!("theme=dark; {cookie}"))
}

#[tokio::test]
async fn signing_in_sets_a_cookie_that_works_alone_and_signing_out_revokes_it() {
    let h = Harness::new(script(), TOKEN_AUTH).await;
    let api_token = h.token("alice").await;
    let server = h.start().await;

    // A bad token: 401 and no cookie, whether unknown or malformed.
    let unknown = format!("agentd_{}", "0".repeat(64));
    for bad in [unknown.as_str(), "nope", ""] {
        let (status, headers, body) = login(&server, bad, &[]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{bad:?}: {body}");
        assert_eq!(body["error"]["code"], "unauthorized");
        assert!(headers.get(SET_COOKIE).is_none(), "{bad:?}");
    }

    let (status, headers, body) = login(&server, &api_token, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"user": "alice", "auth": "token"}));
    let (cookie, attributes) = session_cookie(&headers).expect("a cookie");
    for wanted in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=2592000"] {
        assert!(
            attributes.iter().any(|a| a == wanted),
            "{wanted} in {attributes:?}"
        );
    }
    assert!(!attributes.iter().any(|a| a == "Secure"), "plain http");
    assert!(
        !cookie.contains(&api_token),
        "the cookie holds a token of its own"
    );
    // The new token is an ordinary one, listed and revocable.
    let (code, listed, _) = h.cli(&["tokens", "ls", "--user", "alice"]).await;
    assert_eq!(code, 0);
    assert!(listed.contains("web sign-in"), "{listed}");

    let (status, me) = server
        .send(with_cookie(&server, Method::GET, "/v1/auth/me", &cookie))
        .await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(me, json!({"user": "alice", "auth": "token"}));
    let (status, _) = server
        .send(server.client.get(format!("{}/v1/auth/me", server.url)))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "nobody without a cookie");

    // Writes signed in by the cookie need this server's own Origin.
    let create = |origin: Option<&str>| {
        let mut builder =
            with_cookie(&server, Method::POST, "/v1/sessions", &cookie).json(&json!({}));
        if let Some(origin) = origin {
            builder = builder.header("Origin", origin);
        }
        server.send(builder)
    };
    let port = server.url.rsplit(':').next().unwrap().to_string();
    for origin in [
        None,
        Some("http://evil.example"),
        Some("null"),
        Some(&*format!(
            "http://127.0.0.1:{}",
            port.parse::<u16>().unwrap() + 1
        )),
    ] {
        let (status, body) = create(origin).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{origin:?}: {body}");
        assert_eq!(body["error"]["code"], "bad_origin", "{origin:?}");
    }
    let (status, session) = create(Some(&server.url)).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let id = session["id"].as_str().unwrap();
    // Reads need no Origin; the event stream (what EventSource opens) works too.
    let (status, list) = server
        .send(with_cookie(&server, Method::GET, "/v1/sessions", &cookie))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["sessions"][0]["id"], id);
    let events = with_cookie(
        &server,
        Method::GET,
        &format!("/v1/sessions/{id}/events"),
        &cookie,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    assert!(
        events.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    drop(events);

    // Bearer requests are not Origin-checked (and a foreign Origin does not matter).
    let alice = server.as_user(&api_token);
    alice.session().await;
    let (status, _) = alice
        .send(
            alice
                .request(Method::POST, "/v1/sessions")
                .header("Origin", "http://evil.example")
                .json(&json!({})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);

    // Signing out needs the Origin too, then revokes and clears.
    let logout = |origin: Option<&str>| {
        let mut builder = with_cookie(&server, Method::POST, "/v1/auth/logout", &cookie);
        if let Some(origin) = origin {
            builder = builder.header("Origin", origin);
        }
        builder.send()
    };
    let refused = logout(Some("http://evil.example")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let (status, _) = server
        .send(with_cookie(&server, Method::GET, "/v1/auth/me", &cookie))
        .await;
    assert_eq!(status, StatusCode::OK, "a refused logout revokes nothing");
    let out = logout(Some(&server.url)).await.unwrap();
    assert_eq!(out.status(), StatusCode::NO_CONTENT);
    let (cleared, attributes) = session_cookie(out.headers()).expect("a clearing cookie");
    assert_eq!(cleared, "agentd_session=");
    assert!(
        attributes.iter().any(|a| a == "Max-Age=0"),
        "{attributes:?}"
    );
    let (status, body) = server
        .send(with_cookie(&server, Method::GET, "/v1/auth/me", &cookie))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, _) = server
        .send(with_cookie(&server, Method::GET, "/v1/sessions", &cookie))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // The pasted API token itself is untouched.
    let (status, me) = alice.get("/v1/auth/me").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me["user"], "alice");
    // Signing out again (no cookie) is fine.
    let again = server
        .client
        .post(format!("{}/v1/auth/logout", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn the_cookie_is_secure_over_https_and_a_new_sign_in_replaces_the_old() {
    let h = Harness::new(script(), TOKEN_AUTH).await;
    let api_token = h.token("alice").await;
    let server = h.start().await;
    let (status, headers, _) = login(&server, &api_token, &[("X-Forwarded-Proto", "https")]).await;
    assert_eq!(status, StatusCode::OK);
    let (first, attributes) = session_cookie(&headers).unwrap();
    assert!(attributes.iter().any(|a| a == "Secure"), "{attributes:?}");

    // Signing in from a foreign page is refused.
    let (status, headers, body) =
        login(&server, &api_token, &[("Origin", "http://evil.example")]).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "bad_origin");
    assert!(headers.get(SET_COOKIE).is_none());

    let (status, headers, _) = login(
        &server,
        &api_token,
        &[("Cookie", first.as_str()), ("Origin", server.url.as_str())],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (second, _) = session_cookie(&headers).unwrap();
    assert_ne!(first, second);
    let me =
        |cookie: String| server.send(with_cookie(&server, Method::GET, "/v1/auth/me", &cookie));
    assert_eq!(me(first).await.0, StatusCode::UNAUTHORIZED, "replaced");
    assert_eq!(me(second).await.0, StatusCode::OK);
}

#[tokio::test]
async fn without_authentication_everyone_is_local_and_foreign_pages_cannot_write() {
    let h = Harness::new(script(), "[server]\nauth = \"none\"\n").await;
    let server = h.start().await;
    let (status, me) = server.get("/v1/auth/me").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me, json!({"user": "local", "auth": "none"}));
    let (status, headers, body) = login(&server, "anything", &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["user"], "local");
    assert!(headers.get(SET_COOKIE).is_none());

    let create = |origin: Option<&str>| {
        let mut builder = server
            .request(Method::POST, "/v1/sessions")
            .json(&json!({}));
        if let Some(origin) = origin {
            builder = builder.header("Origin", origin);
        }
        server.send(builder)
    };
    let (status, body) = create(Some("http://evil.example")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "bad_origin");
    assert_eq!(create(Some(&server.url)).await.0, StatusCode::CREATED);
    assert_eq!(
        create(None).await.0,
        StatusCode::CREATED,
        "curl sends no Origin"
    );
}

#[tokio::test]
async fn behind_a_proxy_me_is_the_proxy_user() {
    let secret = "0123456789abcdef-secret";
    let h = Harness::new(
        script(),
        &format!("[server]\nauth = \"header\"\nheader_secret = \"{secret}\"\n"),
    )
    .await;
    let server = h.start().await;
    let me = |user: Option<&str>| {
        let mut builder = server
            .client
            .get(format!("{}/v1/auth/me", server.url))
            .header("X-Agentd-Proxy-Secret", secret);
        if let Some(user) = user {
            builder = builder.header("X-Forwarded-User", user);
        }
        server.send(builder)
    };
    let (status, body) = me(Some("carol")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"user": "carol", "auth": "header"}));
    assert_eq!(me(None).await.0, StatusCode::UNAUTHORIZED);
}

/// A file of the web UI with this extension, as served under `/ui/`.
fn some_ui_file(extension: &str) -> Option<String> {
    let web = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web");
    let mut names: Vec<String> = std::fs::read_dir(web)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(extension) && name != "index.html")
        .collect();
    names.sort();
    names.into_iter().next()
}

#[tokio::test]
async fn the_ui_files_are_served_with_a_strict_content_security_policy() {
    let h = Harness::new(script(), TOKEN_AUTH).await;
    let server = h.start().await;
    let get = |path: &str| server.client.get(format!("{}{path}", server.url)).send();
    let index = get("/").await.unwrap();
    assert_eq!(index.status(), StatusCode::OK, "no sign-in needed");
    let headers = index.headers().clone();
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(headers["content-security-policy"], CSP);
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    assert_eq!(headers["cache-control"], "no-cache");
    assert!(headers.get("access-control-allow-origin").is_none());
    let on_disk = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web/index.html"),
    )
    .unwrap();
    assert_eq!(index.text().await.unwrap(), on_disk);
    // Revalidation: the same ETag answers 304 with the same headers.
    let etag = headers["etag"].to_str().unwrap().to_string();
    let again = server
        .client
        .get(format!("{}/", server.url))
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(again.headers()["content-security-policy"], CSP);

    let index_file = get("/ui/index.html").await.unwrap();
    assert_eq!(index_file.status(), StatusCode::OK);
    for (extension, content_type) in [
        (".js", "text/javascript; charset=utf-8"),
        (".css", "text/css; charset=utf-8"),
    ] {
        let Some(name) = some_ui_file(extension) else {
            continue; // the UI has none (yet)
        };
        let response = get(&format!("/ui/{name}")).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{name}");
        assert_eq!(response.headers()["content-type"], content_type, "{name}");
        assert_eq!(response.headers()["content-security-policy"], CSP);
        assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    }

    // Unknown files, the browser tests, and anything outside web/ are 404.
    for path in [
        "/ui/x",
        "/ui/e2e/run.mjs",
        "/ui/%2e%2e/Cargo.toml",
        "/ui/..%2f..%2fCargo.toml",
        "/ui/%2Fetc%2Fpasswd",
    ] {
        let response = get(path).await.unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        let body: Value = response.json().await.unwrap();
        assert!(body["error"]["code"].is_string(), "{path}");
    }
    // The API keeps `no-store`.
    let health = get("/healthz").await.unwrap();
    assert_eq!(health.headers()["cache-control"], "no-store");
}
