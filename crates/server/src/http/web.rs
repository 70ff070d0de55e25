//! The web UI: `web/index.html` at `/` and the other files of `web/` at
//! `/ui/<path>`, embedded into the binary (debug builds read them from disk,
//! so the UI can be edited without a rebuild). No authentication: the files
//! hold no data; the UI signs in through `/v1/auth/*`.
//!
//! Every answer carries a strict Content-Security-Policy: only this
//! server's own scripts, styles and connections, no inline script or
//! style, no framing. An injected `<script>`, `onclick=` or `javascript:`
//! URL stays inert even if the UI had a bug.

use axum::body::Body;
use axum::extract::Path;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, HeaderName, IF_NONE_MATCH,
    REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// `web/` without its tests (`e2e/`, `test/`, `tests/`) and hidden files.
#[derive(rust_embed::RustEmbed)]
#[folder = "../../web/"]
#[exclude = "e2e/*"]
#[exclude = "test/*"]
#[exclude = "tests/*"]
#[exclude = ".*"]
#[exclude = "*/.*"]
struct WebFiles;

/// Top-level folders of `web/` that are not served.
const PRIVATE_DIRS: [&str; 3] = ["e2e", "test", "tests"];

pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
    frame-ancestors 'none'; form-action 'self'";

/// The web UI.
#[utoipa::path(get, path = "/", tag = "server",
    params(("If-None-Match" = Option<String>, Header, nullable = false,
        description = "The `ETag` of a copy the browser has")),
    responses(
        (status = 200, description = "The web UI's page", content_type = "text/html", body = String),
        (status = 304, description = "Not modified: the browser's copy (`If-None-Match`) is current"),
    ))]
pub async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

/// `GET /ui/{*path}`: a file of the web UI (not in the OpenAPI document).
pub async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    if !servable(&path) {
        return not_found(&path);
    }
    serve(&path, &headers)
}

/// Relative, without `.`, `..`, empty or hidden segments, outside the test
/// folders. (The embedded set has nothing else; from disk, this keeps
/// requests inside `web/`.)
fn servable(path: &str) -> bool {
    let mut segments = path.split('/');
    let first = segments.clone().next().unwrap_or_default();
    !path.contains('\\')
        && !PRIVATE_DIRS.contains(&first)
        && segments.all(|s| !s.is_empty() && !s.starts_with('.'))
}

fn not_found(path: &str) -> Response {
    ApiError::NotFound(format!("no web UI file {path:?}")).into_response()
}

fn serve(path: &str, request: &HeaderMap) -> Response {
    let Some(file) = WebFiles::get(path) else {
        return not_found(path);
    };
    let hash = file.metadata.sha256_hash();
    let etag = format!(
        "\"{}\"",
        hash[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let mut response = if etag_matches(request, &etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut response = Body::from(file.data).into_response();
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(content_type(path)));
        response
    };
    let headers = response.headers_mut();
    if let Ok(etag) = HeaderValue::try_from(etag) {
        headers.insert(ETAG, etag);
    }
    // Revalidated each time (cheap with the ETag), so a new build shows at once.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    for (name, value) in security_headers() {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn security_headers() -> [(HeaderName, &'static str); 3] {
    [
        (CONTENT_SECURITY_POLICY, CSP),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (REFERRER_POLICY, "no-referrer"),
    ]
}

fn etag_matches(request: &HeaderMap, etag: &str) -> bool {
    request
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|tag| tag.trim())
        .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag)
}

/// By extension; what a browser needs to use the file as intended.
fn content_type(path: &str) -> &'static str {
    let extension = path
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "webmanifest" => "application/manifest+json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "woff" => "font/woff",
        "txt" | "md" => "text/plain; charset=utf-8",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_outside_the_tests_are_served() {
        assert!(servable("app.js"));
        assert!(servable("css/app.css"));
        assert!(!servable("../Cargo.toml"));
        assert!(!servable("a/../../x"));
        assert!(!servable("/etc/passwd"));
        assert!(!servable("a//b"));
        assert!(!servable(".hidden"));
        assert!(!servable("a/.git/config"));
        assert!(!servable("e2e/run.mjs"));
        assert!(!servable("tests/unit.mjs"));
        assert!(!servable("test/unit.mjs"));
        assert!(!servable("a\\..\\b"));
        assert!(!servable(""));
    }

    #[test]
    fn content_types_by_extension() {
        assert_eq!(content_type("index.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("app.JS"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("x/y.css"), "text/css; charset=utf-8");
        assert_eq!(content_type("logo.svg"), "image/svg+xml");
        assert_eq!(content_type("noext"), "application/octet-stream");
    }

    #[test]
    fn etags_match_strong_weak_and_star() {
        let mut headers = HeaderMap::new();
        assert!(!etag_matches(&headers, "\"ab\""));
        headers.insert(IF_NONE_MATCH, HeaderValue::from_static("\"x\", W/\"ab\""));
        assert!(etag_matches(&headers, "\"ab\""));
        headers.insert(IF_NONE_MATCH, HeaderValue::from_static("*"));
        assert!(etag_matches(&headers, "\"ab\""));
    }

    #[test]
    fn the_page_is_embedded_and_the_tests_are_not() {
        assert!(WebFiles::get("index.html").is_some());
        assert!(WebFiles::iter().all(|path| servable(&path)));
    }
}
