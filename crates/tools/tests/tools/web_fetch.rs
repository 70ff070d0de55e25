//! `WebFetch` against real HTTP servers on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use agentd_tools::{ToolContext, ToolResult, UrlCheck, UrlVerdict, WebPolicy};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Query;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde_json::json;
use support::{Workspace, assert_error_containing, assert_ok, call_with};

const PAGE: &str = "<!doctype html><html><head><title>Test page</title>\
<style>body { color: hotpink; }</style></head><body>\
<h1>Main heading</h1><p>Some text with <a href=\"https://example.com/docs\">a link</a>.</p>\
<script>var leaked = 'SCRIPT-CONTENT';</script>\
<h2>Second heading</h2><ul><li>first item</li><li>second item</li></ul></body></html>";

const BIG_BYTES: usize = 50 * 1024 * 1024;
const MIB: usize = 1024 * 1024;

/// A test server on 127.0.0.1 with an ephemeral port.
pub(crate) async fn serve() -> u16 {
    let app =
        Router::new()
            .route(
                "/page",
                get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE) }),
            )
            .route(
                "/redirect",
                get(|Query(q): Query<HashMap<String, String>>| async move {
                    Redirect::temporary(&q["to"])
                }),
            )
            .route("/loop", get(|| async { Redirect::to("/loop") }))
            .route("/json", get(|| async { axum::Json(json!({"answer": 42})) }))
            .route("/big", get(big))
            .route(
                "/gone",
                get(|| async {
                    (
                        StatusCode::GONE,
                        [(header::CONTENT_TYPE, "text/html")],
                        "<html><body><p>this page is gone</p></body></html>",
                    )
                }),
            )
            .route(
                "/png",
                get(|| async {
                    (
                        [(header::CONTENT_TYPE, "image/png")],
                        b"\x89PNG\r\n".to_vec(),
                    )
                }),
            )
            .route(
                "/untyped-text",
                get(|| async { Response::new(Body::from("plain words, no type")) }),
            )
            .route(
                "/untyped-binary",
                get(|| async { Response::new(Body::from(vec![0u8, 159, 146, 150, 0, 1])) }),
            )
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    "late"
                }),
            )
            .route(
                "/secret",
                get(|headers: axum::http::HeaderMap| async move {
                    format!("auth={:?}", headers.get(header::AUTHORIZATION))
                }),
            );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

/// 50 MiB of text, produced 64 KiB at a time.
async fn big() -> impl IntoResponse {
    let chunk = Bytes::from(vec![b'a'; 64 * 1024]);
    let count = BIG_BYTES / chunk.len();
    let stream = futures::stream::iter(
        (0..count).map(move |_| Ok::<_, std::convert::Infallible>(chunk.clone())),
    );
    (
        [(header::CONTENT_TYPE, "text/plain")],
        Body::from_stream(stream),
    )
}

fn context(ws: &Workspace, private_hosts: &[&str]) -> ToolContext {
    let mut ctx = ws.ctx.clone();
    ctx.web = WebPolicy {
        private_hosts: private_hosts.iter().map(|h| h.to_string()).collect(),
        ..WebPolicy::default()
    };
    ctx
}

pub(crate) async fn fetch(ctx: &ToolContext, url: &str) -> ToolResult {
    call_with(
        ctx,
        "WebFetch",
        json!({"url": url, "prompt": "What are the headings?"}),
    )
    .await
}

#[tokio::test]
async fn html_is_fetched_and_converted_to_markdown() {
    let port = serve().await;
    let ws = Workspace::new();
    let ctx = context(&ws, &["127.0.0.1"]);
    let result = fetch(&ctx, &format!("http://127.0.0.1:{port}/page")).await;
    assert_ok(&result);
    let text = &result.content;
    assert!(
        text.starts_with(&format!("URL: http://127.0.0.1:{port}/page\n")),
        "{text}"
    );
    assert!(text.contains("Status: 200 OK"), "{text}");
    assert!(text.contains("Content-Type: text/html"), "{text}");
    assert!(text.contains("# Main heading"), "{text}");
    assert!(text.contains("## Second heading"), "{text}");
    assert!(
        text.contains("[a link](https://example.com/docs)"),
        "{text}"
    );
    assert!(
        text.contains("first item") && text.contains("second item"),
        "{text}"
    );
    assert!(
        !text.contains("SCRIPT-CONTENT") && !text.contains("hotpink"),
        "{text}"
    );
    assert!(
        text.ends_with("The user's prompt for this page: What are the headings?"),
        "{text}"
    );
}

#[tokio::test]
async fn json_and_untyped_text_are_returned_as_is() {
    let port = serve().await;
    let ws = Workspace::new();
    let ctx = context(&ws, &["127.0.0.1"]);
    let result = fetch(&ctx, &format!("http://127.0.0.1:{port}/json")).await;
    assert_ok(&result);
    assert!(
        result.content.contains(r#"{"answer":42}"#),
        "{}",
        result.content
    );
    let result = fetch(&ctx, &format!("http://127.0.0.1:{port}/untyped-text")).await;
    assert_ok(&result);
    assert!(result.content.contains("plain words, no type"));
    let result = fetch(&ctx, &format!("http://127.0.0.1:{port}/untyped-binary")).await;
    assert_error_containing(&result, "not text");
}

#[tokio::test]
async fn loopback_is_refused_unless_the_host_is_allowed() {
    let port = serve().await;
    let ws = Workspace::new();
    let ctx = context(&ws, &[]);
    let result = fetch(&ctx, &format!("http://127.0.0.1:{port}/page")).await;
    assert_error_containing(&result, "loopback");
    assert_error_containing(&result, "private");
    // A name that resolves to loopback is judged by its own name.
    let ctx = context(&ws, &["127.0.0.1"]);
    let result = fetch(&ctx, &format!("http://localhost:{port}/page")).await;
    assert_error_containing(&result, "loopback");
    // Other spellings of the loopback address.
    let result = fetch(&ctx, &format!("http://[::1]:{port}/page")).await;
    assert_error_containing(&result, "loopback");
    let result = fetch(&ctx, &format!("http://2130706433:{port}/page")).await;
    assert_ok(&result); // the URL parser reads it as 127.0.0.1, which is allowed
}

#[tokio::test]
async fn redirects_to_private_addresses_are_refused() {
    let port = serve().await;
    let other = serve().await;
    let ws = Workspace::new();
    let ctx = context(&ws, &["127.0.0.1"]);
    let result = fetch(
        &ctx,
        &format!("http://127.0.0.1:{port}/redirect?to=http://10.0.0.1/"),
    )
    .await;
    assert_error_containing(&result, "10.0.0.1, a private address");
    let result = fetch(
        &ctx,
        &format!("http://127.0.0.1:{port}/redirect?to=http://localhost:{other}/page"),
    )
    .await;
    assert_error_containing(&result, "loopback");
}

#[tokio::test]
async fn same_host_redirects_are_followed() {
    let port = serve().await;
    let ws = Workspace::new();
    let ctx = context(&ws, &["127.0.0.1"]);
    let start = format!("http://127.0.0.1:{port}/redirect?to=/page");
    let result = fetch(&ctx, &start).await;
    assert_ok(&result);
    assert!(
        result.content.contains("# Main heading"),
        "{}",
        result.content
    );
    assert!(
        result
            .content
            .contains(&format!("Redirected from: {start}")),
        "{}",
        result.content
    );
    let result = fetch(&ctx, &format!("http://127.0.0.1:{port}/loop")).await;
    assert_error_containing(&result, "too many redirects");
}

#[tokio::test]
async fn redirects_to_other_hosts_go_through_the_url_check() {
    let port = serve().await;
    let ws = Workspace::new();
    let mut ctx = context(&ws, &["127.0.0.1", "localhost"]);
    let target = format!("http://localhost:{port}/page");
    let start = format!("http://127.0.0.1:{port}/redirect?to={target}");
    let verdict = |verdict: UrlVerdict| {
        UrlCheck::new(move |url| match url.host_str() {
            Some("localhost") => verdict.clone(),
            _ => UrlVerdict::Allow,
        })
    };

    ctx.web.url_check = verdict(UrlVerdict::Ask);
    let result = fetch(&ctx, &start).await;
    assert_ok(&result);
    assert!(result.content.contains("REDIRECT"), "{}", result.content);
    assert!(
        result.content.contains(&format!("url: \"{target}\"")),
        "{}",
        result.content
    );
    assert!(result.content.contains("call WebFetch again"));
    assert!(!result.content.contains("Main heading"));

    ctx.web.url_check = verdict(UrlVerdict::Deny(
        "WebFetch(domain:localhost) is denied".into(),
    ));
    let result = fetch(&ctx, &start).await;
    assert_error_containing(&result, "WebFetch(domain:localhost) is denied");

    ctx.web.url_check = verdict(UrlVerdict::Allow);
    let result = fetch(&ctx, &start).await;
    assert_ok(&result);
    assert!(result.content.contains(&format!("URL: {target}")));
    assert!(result.content.contains("# Main heading"));
}

#[tokio::test]
async fn big_bodies_are_cut_at_the_cap() {
    let port = serve().await;
    let ws = Workspace::new();
    let mut ctx = context(&ws, &["127.0.0.1"]);
    ctx.web.max_bytes = MIB;
    let started = Instant::now();
    let result = fetch(&ctx, &format!("http://127.0.0.1:{port}/big")).await;
    assert_ok(&result);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(
        result
            .content
            .contains(&format!("[content truncated at {MIB} bytes]")),
        "{}",
        &result.content[result.content.len() - 500..]
    );
    assert!(result.content.ends_with("What are the headings?"));
}

#[tokio::test]
async fn binary_content_is_refused() {
    let port = serve().await;
    let ws = Workspace::new();
    let ctx = context(&ws, &["127.0.0.1"]);
    let result = fetch(&ctx, &format!("http://127.0.0.1:{port}/png")).await;
    assert_error_containing(&result, "image/png");
}

#[tokio::test]
async fn slow_servers_time_out_and_calls_can_be_interrupted() {
    let port = serve().await;
    let ws = Workspace::new();
    let mut ctx = context(&ws, &["127.0.0.1"]);
    ctx.web.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let result = fetch(&ctx, &format!("http://127.0.0.1:{port}/slow")).await;
    assert_error_containing(&result, "timed out");
    assert!(started.elapsed() < Duration::from_secs(5));

    ctx.web.timeout = Duration::from_secs(60);
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let result = fetch(&ctx, &format!("http://127.0.0.1:{port}/slow")).await;
    assert_error_containing(&result, "interrupted");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn only_http_urls_without_credentials_are_fetched() {
    let port = serve().await;
    let ws = Workspace::new();
    let ctx = context(&ws, &["127.0.0.1"]);
    for url in [
        "file:///etc/passwd",
        "ftp://example.com/file.txt",
        "data:text/plain,hi",
    ] {
        let result = fetch(&ctx, url).await;
        assert_error_containing(&result, "only fetches http:// and https://");
    }
    let result = fetch(&ctx, "not a url").await;
    assert_error_containing(&result, "not a valid URL");
    let result = fetch(&ctx, &format!("http://user:pw@127.0.0.1:{port}/secret")).await;
    assert_error_containing(&result, "user name or password");
    let result = fetch(
        &ctx,
        &format!("http://127.0.0.1:{port}/redirect?to=file:///etc/passwd"),
    )
    .await;
    assert_error_containing(&result, "only fetches http:// and https://");
    let result = call_with(&ctx, "WebFetch", json!({"url": "http://127.0.0.1/"})).await;
    assert_error_containing(&result, "prompt");
}

#[tokio::test]
async fn error_statuses_are_errors() {
    let port = serve().await;
    let ws = Workspace::new();
    let ctx = context(&ws, &["127.0.0.1"]);
    let result = fetch(&ctx, &format!("http://127.0.0.1:{port}/missing")).await;
    assert_error_containing(&result, "404 Not Found");
    let result = fetch(&ctx, &format!("http://127.0.0.1:{port}/gone")).await;
    assert_error_containing(&result, "HTTP 410 Gone: this page is gone");
}

#[test]
fn schema_and_flags_are_claude_codes() {
    let registry = agentd_tools::builtin_tools();
    let tool = registry.get("WebFetch").unwrap();
    assert!(tool.is_read_only());
    let schema = tool.input_schema();
    assert_eq!(schema["properties"]["url"]["format"], "uri");
    assert_eq!(schema["required"], json!(["url", "prompt"]));
    assert_eq!(schema["additionalProperties"], false);
    assert!(tool.description().contains("markdown"));
    let policy = WebPolicy::default();
    assert_eq!(policy.max_bytes, 10 * MIB);
    assert_eq!(policy.timeout, Duration::from_secs(30));
    assert_eq!(policy.max_redirects, 5);
    assert!(policy.private_hosts.is_empty());
}
