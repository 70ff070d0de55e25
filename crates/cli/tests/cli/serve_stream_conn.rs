//! An event stream asked for as the first request of an HTTP/1.1 connection
//! is served without hyper (`stream_conn`): checked byte for byte over raw
//! TCP, as a client that speaks plain HTTP/1.1 sees it. The stream is chunked
//! SSE with `connection: close`, resumes after `Last-Event-ID`, ends with the
//! last chunk when the server stops, and goes on past a pipelined request;
//! refusals are whole answers; a client that hangs up frees its stream slot.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use std::time::Duration;

use serde_json::{Value, json};
use serve_harness::{Harness, Server, SseEvent, WAIT, assert_gapless, parse_events};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A raw connection that asked for one session's events.
struct RawStream {
    tcp: TcpStream,
    received: Vec<u8>,
}

impl RawStream {
    async fn open(server: &Server, session: &str, extra_headers: &str) -> Self {
        let address = server.url.trim_start_matches("http://");
        let mut tcp = TcpStream::connect(address).await.unwrap();
        let request = format!(
            "GET /v1/sessions/{session}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra_headers}\r\n"
        );
        tcp.write_all(request.as_bytes()).await.unwrap();
        Self {
            tcp,
            received: Vec::new(),
        }
    }

    /// Read until `done` holds for what was received, or the server closes.
    async fn read_until(&mut self, done: impl Fn(&[u8]) -> bool) -> bool {
        let mut buf = [0u8; 4096];
        let reading = async {
            while !done(&self.received) {
                match self.tcp.read(&mut buf).await {
                    Ok(0) | Err(_) => return false,
                    Ok(n) => self.received.extend_from_slice(&buf[..n]),
                }
            }
            true
        };
        tokio::time::timeout(WAIT, reading)
            .await
            .expect("nothing more within the wait")
    }

    /// The head (status line and headers, lowercased) and the raw body.
    fn split(&self) -> (String, &[u8]) {
        let end = self
            .received
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("no whole head");
        let head = String::from_utf8_lossy(&self.received[..end]).to_lowercase();
        (head, &self.received[end + 4..])
    }

    /// The events in the chunked body so far, and whether its last chunk came.
    fn events(&self) -> (Vec<SseEvent>, bool) {
        let (_, body) = self.split();
        let (text, ended) = dechunk(body);
        (parse_events(&String::from_utf8(text).unwrap()), ended)
    }
}

/// A chunked body's data as far as it is whole, and whether its last chunk
/// came; panics on a malformed chunk.
fn dechunk(mut body: &[u8]) -> (Vec<u8>, bool) {
    let mut data = Vec::new();
    loop {
        let Some(line_end) = body.windows(2).position(|w| w == b"\r\n") else {
            return (data, false);
        };
        let size_text = std::str::from_utf8(&body[..line_end]).unwrap();
        let size = usize::from_str_radix(size_text, 16)
            .unwrap_or_else(|_| panic!("bad chunk size {size_text:?}"));
        let rest = &body[line_end + 2..];
        if rest.len() < size + 2 {
            return (data, false);
        }
        assert_eq!(&rest[size..size + 2], b"\r\n", "chunk not ended by CRLF");
        if size == 0 {
            return (data, true);
        }
        data.extend_from_slice(&rest[..size]);
        body = &rest[size + 2..];
    }
}

fn has_head(received: &[u8]) -> bool {
    received.windows(4).any(|w| w == b"\r\n\r\n")
}

#[tokio::test]
async fn a_first_request_stream_is_chunked_sse_that_resumes_and_ends_with_the_server() {
    let h = Harness::open(json!({"replies": [
        {"repeat": true, "content": [{"type": "text", "text": "hello from the model"}]}
    ]}))
    .await;
    let server = h.start().await;
    let id = server.session().await;

    let mut live = RawStream::open(&server, &id, "").await;
    assert!(live.read_until(has_head).await, "no head");
    let (head, _) = live.split();
    assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
    for header in [
        "content-type: text/event-stream",
        "transfer-encoding: chunked",
        "connection: close",
        "date: ",
    ] {
        assert!(head.contains(header), "{header} missing: {head}");
    }

    // A pipelined request is read and dropped: the stream goes on.
    live.tcp
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.message(&id, "hi").await;
    let turn_ended = |received: &[u8]| {
        let end = received.windows(4).position(|w| w == b"\r\n\r\n");
        end.is_some_and(|end| {
            let (text, _) = dechunk(&received[end + 4..]);
            String::from_utf8_lossy(&text).contains("event: turn.finished")
        })
    };
    assert!(live.read_until(turn_ended).await, "stream closed early");
    let (events, ended) = live.events();
    assert!(!ended, "the stream ended with the turn");
    assert_gapless(&events);
    assert_eq!(events.last().unwrap().event, "turn.finished");
    let text: String = events
        .iter()
        .filter(|e| e.event == "message.delta")
        .filter_map(|e| e.data["text"].as_str())
        .collect();
    assert!(text.contains("hello from the model"), "{events:?}");

    // Resuming after all but the last two gets exactly those two.
    let last = events.last().unwrap().id;
    let mut resumed =
        RawStream::open(&server, &id, &format!("Last-Event-ID: {}\r\n", last - 2)).await;
    assert!(
        resumed
            .read_until(|received| has_head(received) && {
                let end = received.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
                let (text, _) = dechunk(&received[end + 4..]);
                parse_events(&String::from_utf8_lossy(&text)).len() >= 2
            })
            .await
    );
    let (again, _) = resumed.events();
    let ids: Vec<u64> = again.iter().map(|e| e.id).collect();
    assert_eq!(ids, vec![last - 1, last]);
    assert_eq!(again, events[events.len() - 2..]);

    // A stop ends both streams with the last chunk, then closes them.
    let stopping = tokio::spawn(async move { server.terminate().await });
    for stream in [&mut live, &mut resumed] {
        stream.read_until(|_| false).await;
        let (_, ended) = stream.events();
        assert!(ended, "no last chunk before the close");
    }
    assert_eq!(stopping.await.unwrap(), 0);
}

#[tokio::test]
async fn refusals_are_whole_answers_and_a_hang_up_frees_the_slot() {
    let toml = "[server]\nauth = \"none\"\nmax_streams_per_user = 1\n";
    let h = Harness::new(json!({"replies": []}), toml).await;
    let server = h.start().await;
    let id = server.session().await;

    // An unknown session: a 404 with its length, then the connection closes.
    let mut unknown = RawStream::open(&server, "no-such-session", "").await;
    assert!(!unknown.read_until(|_| false).await);
    let (head, body) = unknown.split();
    assert!(head.starts_with("http/1.1 404 not found\r\n"), "{head}");
    assert!(
        head.contains(&format!("content-length: {}", body.len())),
        "{head}"
    );
    assert!(head.contains("connection: close"), "{head}");
    let error: Value = serde_json::from_slice(body).unwrap();
    assert_eq!(error["error"]["code"], "not_found", "{error}");

    // The user's one stream is held; a second is refused whole.
    let mut held = RawStream::open(&server, &id, "").await;
    assert!(held.read_until(has_head).await);
    assert!(held.split().0.starts_with("http/1.1 200"));
    let mut refused = RawStream::open(&server, &id, "").await;
    assert!(!refused.read_until(|_| false).await);
    let (head, _) = refused.split();
    assert!(head.starts_with("http/1.1 429"), "{head}");
    assert!(head.contains("retry-after: "), "{head}");

    // Hanging up ends the stream on the server: the slot comes free.
    drop(held);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut next = RawStream::open(&server, &id, "").await;
        next.read_until(has_head).await;
        if next.split().0.starts_with("http/1.1 200") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the hung-up stream kept its slot"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(server.terminate().await, 0);
}

#[tokio::test]
async fn a_first_request_arriving_when_the_server_stops_is_still_answered() {
    let h = Harness::open(json!({"replies": []})).await;
    let mut server = h.start().await;
    let address = server.url.trim_start_matches("http://").to_string();
    let mut tcp = TcpStream::connect(&address).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    // The accept loop has the connection before the stop begins.
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.signal("TERM").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    tcp.write_all(b"\r\n").await.unwrap();
    let mut raw = RawStream {
        tcp,
        received: Vec::new(),
    };
    raw.read_until(|_| false).await;
    let answer = String::from_utf8_lossy(&raw.received);
    assert!(answer.starts_with("HTTP/1.1 "), "no answer: {answer:?}");
    assert_eq!(server.exit_code().await, 0);
}
