//! The HTTP server: routing, script state, faults and chunked streaming.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentd_model::scripted::{
    Fault, RequestView, Script, ScriptReply, ScriptState, estimate_tokens,
};
use anyhow::Context;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::recording::RecordedRequest;
use crate::reply::Plan;
use crate::stats::{ServiceStats, Stats};
use crate::{anthropic_wire, openai_wire};

const EXHAUSTED: &str =
    "the scripted model server has no reply left for this request (script exhausted)";

/// A scripted model server on a local port. Dropping it stops serving.
pub struct ModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

struct Shared {
    inner: Mutex<Inner>,
    stats: Stats,
}

struct Inner {
    script: ScriptState,
    requests: Vec<RecordedRequest>,
    /// Numbers message and request ids.
    served: u64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A handler that panicked while holding the lock leaves consistent data behind.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ModelServer {
    /// Starts serving `script` on a free port of 127.0.0.1.
    pub async fn start(script: Script) -> anyhow::Result<ModelServer> {
        Self::start_on(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), script).await
    }

    pub async fn start_on(addr: SocketAddr, script: Script) -> anyhow::Result<ModelServer> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding the model server to {addr}"))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                script: ScriptState::new(script),
                requests: Vec::new(),
                served: 0,
            }),
            stats: Stats::default(),
        });
        let app = Router::new()
            .fallback(handle)
            .layer(DefaultBodyLimit::disable())
            .with_state(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            // Streamed replies are many small writes: without TCP_NODELAY, Nagle
            // and delayed ACKs add ~40 ms per reply on loopback.
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(err) = serve.await {
                tracing::warn!("scripted model server stopped: {err}");
            }
        });
        Ok(ModelServer {
            addr,
            shared,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The Anthropic base URL (`ANTHROPIC_BASE_URL`); clients post to `{url}/v1/messages`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The OpenAI base URL (`OPENAI_BASE_URL`); clients post to `{base}/chat/completions`.
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.url())
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in order (`/_testkit/…` excluded).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// How many requests have been served and for how long (`GET /_testkit/stats`).
    pub fn stats(&self) -> ServiceStats {
        self.shared.stats.snapshot()
    }

    /// The recorded requests to one path, e.g. `/v1/messages`.
    pub fn requests_to(&self, path: &str) -> Vec<RecordedRequest> {
        self.shared
            .lock()
            .requests
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }

    /// Replaces the script and starts it from the beginning; the recording is kept.
    pub fn set_script(&self, script: Script) {
        self.shared.lock().script = ScriptState::new(script);
    }

    /// Stops accepting requests and waits briefly for open responses to finish.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(Duration::from_secs(2), &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Serves `script` on `addr` until ctrl-c (or SIGTERM), printing the URL to stdout.
pub async fn serve_forever(addr: SocketAddr, script: Script) -> anyhow::Result<()> {
    let server = ModelServer::start_on(addr, script).await?;
    println!("{}", server.url());
    eprintln!(
        "scripted model server: ANTHROPIC_BASE_URL={} OPENAI_BASE_URL={} (recorded requests: \
         GET {url}/_testkit/requests, service times: GET {url}/_testkit/stats)",
        server.url(),
        server.openai_base_url(),
        url = server.url()
    );
    std::io::Write::flush(&mut std::io::stdout())?;
    wait_for_stop_signal().await?;
    server.shutdown().await;
    Ok(())
}

async fn wait_for_stop_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await?;
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Wire {
    Anthropic,
    OpenAi,
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path();
    if path == "/_testkit/requests" {
        let requests = shared.lock().requests.clone();
        return axum::Json(requests).into_response();
    }
    if path == "/_testkit/stats" {
        return axum::Json(shared.stats.snapshot()).into_response();
    }
    let timer = shared.stats.start();
    let response = route(&shared, &method, path, &headers, body);
    timer.finish(response)
}

/// Records and answers one request to the model APIs.
fn route(
    shared: &Shared,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = RecordedRequest::new(method.as_str(), path, headers, &body);
    let json_body = &recorded.body;
    // Recorded once answered (before any of a streamed reply is sent), so a
    // long transcript is parsed once and never copied.
    let response = match (method, path.trim_end_matches('/')) {
        (&Method::POST, "/v1/messages") => model_call(shared, Wire::Anthropic, json_body, body.len()),
        (&Method::POST, "/v1/messages/count_tokens") => {
            axum::Json(json!({"input_tokens": estimate_tokens(body.len())})).into_response()
        }
        (&Method::POST, "/v1/chat/completions" | "/chat/completions") => {
            model_call(shared, Wire::OpenAi, json_body, body.len())
        }
        // Connectivity probes (the claude CLI sends `HEAD /`).
        (&Method::HEAD | &Method::GET, "") => StatusCode::OK.into_response(),
        (&Method::GET, "/v1/models") => axum::Json(json!({
            "object": "list",
            "data": [{"id": "scripted", "object": "model", "type": "model",
                      "display_name": "Scripted model", "created": 0, "owned_by": "agentd-testkit"}],
            "has_more": false,
        }))
        .into_response(),
        _ => {
            let message = format!("the scripted model server has no route {method} {path}");
            (
                StatusCode::NOT_FOUND,
                axum::Json(json!({"type": "error",
                    "error": {"type": "not_found_error", "message": message}})),
            )
                .into_response()
        }
    };
    shared.lock().requests.push(recorded);
    response
}

fn model_call(shared: &Shared, wire: Wire, body: &Value, request_chars: usize) -> Response {
    if !body.get("messages").is_some_and(Value::is_array) {
        return error_response(
            wire,
            400,
            "messages: an array of messages is required",
            None,
        );
    }
    let (view, tool_count): (RequestView, usize) = match wire {
        Wire::Anthropic => anthropic_wire::request_view(body),
        Wire::OpenAi => openai_wire::request_view(body),
    };
    let (reply, serial): (Option<ScriptReply>, u64) = {
        let mut inner = shared.lock();
        inner.served += 1;
        (inner.script.next_reply(&view), inner.served)
    };
    let Some(reply) = reply else {
        return error_response(wire, 500, EXHAUSTED, None);
    };
    let cut_after = match &reply.fault {
        Some(Fault::Http {
            status,
            retry_after_s,
            message,
        }) => {
            let message = message
                .clone()
                .unwrap_or_else(|| format!("scripted fault: HTTP {status}"));
            return error_response(wire, *status, &message, *retry_after_s);
        }
        Some(Fault::Garbage) => {
            return (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "text/html")],
                "<html><body>502 Bad Gateway (scripted garbage)</body></html>",
            )
                .into_response();
        }
        Some(Fault::CutStream { after_chunks }) => Some(*after_chunks),
        None => None,
    };

    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted");
    let streaming = body.get("stream").and_then(Value::as_bool) == Some(true);
    let (chunks, content_type) = match wire {
        Wire::Anthropic => {
            let plan = Plan::new(&reply, request_chars, tool_count + 1, "toolu_");
            let id = format!("msg_scripted{serial:06}");
            if streaming {
                (
                    anthropic_wire::stream_events(&plan, model, &id),
                    "text/event-stream",
                )
            } else {
                (
                    halves(anthropic_wire::message(&plan, model, &id)),
                    "application/json",
                )
            }
        }
        Wire::OpenAi => {
            let plan = Plan::new(&reply, request_chars, tool_count + 1, "call_");
            let id = format!("chatcmpl-scripted{serial:06}");
            let created = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            if streaming {
                (
                    openai_wire::stream_chunks(&plan, model, &id, created),
                    "text/event-stream",
                )
            } else {
                (
                    halves(openai_wire::completion(&plan, model, &id, created)),
                    "application/json",
                )
            }
        }
    };
    let request_id = format!("req_scripted{serial:06}");
    stream_body(chunks, content_type, &request_id, cut_after, reply.delay_ms)
}

/// A JSON body in two chunks, so that a cut can truncate it.
fn halves(value: Value) -> Vec<Bytes> {
    let text = value.to_string();
    let mid = text.len() / 2;
    // JSON text from serde_json may hold multi-byte chars; split on a boundary.
    let mid = (mid..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    vec![
        Bytes::from(text[..mid].to_string()),
        Bytes::from(text[mid..].to_string()),
    ]
}

/// Whether an undelayed, uncut reply goes out in writes of up to
/// [`COALESCE_BYTES`] rather than a write per SSE frame (`--coalesce`).
static COALESCE: AtomicBool = AtomicBool::new(false);
const COALESCE_BYTES: usize = 16 * 1024;

/// Send each undelayed, uncut reply in writes of up to 16 KiB instead of one
/// per frame: the same bytes on the wire, a fraction of the stand-in's
/// syscalls. For benchmarks, where the stand-in shares the machine with the
/// server it measures; tests keep a write per frame.
pub fn coalesce_replies(on: bool) {
    COALESCE.store(on, Ordering::Relaxed);
}

/// Chunks joined into ones of up to [`COALESCE_BYTES`] (a bigger one alone).
fn coalesce(chunks: Vec<Bytes>) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut current = Vec::new();
    for chunk in chunks {
        if !current.is_empty() && current.len() + chunk.len() > COALESCE_BYTES {
            out.push(Bytes::from(std::mem::take(&mut current)));
        }
        current.extend_from_slice(&chunk);
    }
    if !current.is_empty() {
        out.push(Bytes::from(current));
    }
    out
}

fn stream_body(
    chunks: Vec<Bytes>,
    content_type: &'static str,
    request_id: &str,
    cut_after: Option<usize>,
    delay_ms: u64,
) -> Response {
    let mut items: Vec<Result<Bytes, std::io::Error>> = Vec::new();
    match cut_after {
        Some(n) => {
            // Always leave something out, so the client sees an incomplete response.
            let n = n.min(chunks.len().saturating_sub(1));
            items.extend(chunks.into_iter().take(n).map(Ok));
            // An error from the body stream makes the server drop the connection
            // without the terminating chunk.
            items.push(Err(std::io::Error::other("scripted cut stream")));
        }
        None if delay_ms == 0 && COALESCE.load(Ordering::Relaxed) => {
            items.extend(coalesce(chunks).into_iter().map(Ok));
        }
        None => items.extend(chunks.into_iter().map(Ok)),
    }
    let delay = Duration::from_millis(delay_ms);
    let stream = futures::stream::iter(items)
        .enumerate()
        .then(move |(i, item)| async move {
            if i > 0 && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if item.is_err() {
                // Hyper flushes buffered chunks only when the body is pending; without
                // a pause the cut would also swallow the chunks meant to get through.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            item
        });
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(request_id) {
        headers.insert("request-id", value.clone());
        headers.insert("x-request-id", value);
    }
    response
}

fn error_response(wire: Wire, status: u16, message: &str, retry_after_s: Option<u64>) -> Response {
    let body = match wire {
        Wire::Anthropic => agentd_model::anthropic::wire::error_body(status, message),
        Wire::OpenAi => openai_wire::error_body(status, message),
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, axum::Json(body)).into_response();
    if let Some(seconds) = retry_after_s {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::{Bytes, COALESCE_BYTES, coalesce};

    #[test]
    fn coalescing_keeps_every_byte_in_order_within_the_bound() {
        let frames: Vec<Bytes> = (0..3000)
            .map(|i| {
                Bytes::from(format!(
                    "event: content_block_delta\ndata: {{\"i\":{i}}}\n\n"
                ))
            })
            .collect();
        let big = Bytes::from(vec![b'x'; COALESCE_BYTES + 5]);
        let mut all = frames.clone();
        all.insert(1500, big);
        let joined = coalesce(all.clone());
        assert_eq!(joined.concat(), all.concat());
        assert!(
            joined.len() > 2 && joined.len() < 40,
            "{} writes",
            joined.len()
        );
        // Only a frame bigger than the bound makes a bigger write.
        let over: Vec<_> = joined.iter().filter(|c| c.len() > COALESCE_BYTES).collect();
        assert_eq!(over.len(), 1);
        assert!(coalesce(Vec::new()).is_empty());
    }
}
