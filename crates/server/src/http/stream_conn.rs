//! An HTTP/1.1 connection whose first request is an event stream, served
//! without hyper. hyper keeps an 8 KiB read buffer and an 8 KiB write buffer
//! for every HTTP/1 connection, the most an idle SSE client costs; here the
//! connection holds no buffer while nothing is sent: each batch of ready
//! frames is written from a buffer of its size, then freed.
//!
//! The request goes through the same app (routing, auth, limits) as any
//! other. A `text/event-stream` answer is sent chunked until the stream
//! ends or the client goes; anything else (a 404, a 429) is sent whole. Either
//! way the connection then closes (`connection: close`): a client reconnects
//! for its next stream, as it would after any stream ends.

use std::time::SystemTime;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, Response, header};
use bytes::Bytes;
use futures::FutureExt;
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// A non-streaming answer larger than this is cut off (they are error bodies
/// of a few hundred bytes).
const MAX_WHOLE_BODY: usize = 1024 * 1024;
/// Ready frames gathered into one write at most (a replay page can hold
/// hundreds of large events; hyper stops buffering at ~400 KiB).
const MAX_WRITE: usize = 64 * 1024;
/// What a client may send after its request before it is cut off, and
/// how long a closing connection waits for it to hang up.
const MAX_DRAINED: usize = 64 * 1024;
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(1);

/// Answer `request` on `tcp` through `app`, then close; `cut` closes at once,
/// whatever the connection is doing (a write to a client that stopped
/// reading included).
pub(super) async fn serve(
    mut tcp: TcpStream,
    request: Request<Body>,
    app: Router,
    cut: CancellationToken,
) {
    let served = async {
        let Ok(response) = app.oneshot(request).await;
        if is_event_stream(response.headers()) {
            stream(&mut tcp, response).await
        } else {
            whole(&mut tcp, response).await
        }?;
        close(&mut tcp).await
    };
    tokio::select! {
        served = served => {
            if let Err(err) = served {
                tracing::debug!(%err, "event stream connection ended with an error");
            }
        }
        () = cut.cancelled() => {}
    }
}

/// Half-close, then read what the client still sends (for a bounded
/// time and amount) before dropping the socket: closing with unread bytes
/// would reset the connection, and a reset can erase the answer's end.
async fn close(tcp: &mut TcpStream) -> std::io::Result<()> {
    tcp.shutdown().await?;
    let mut drained = 0;
    let mut buf = [0u8; 512];
    let draining = async {
        while drained < MAX_DRAINED {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => drained += n,
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, draining).await;
    Ok(())
}

fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"))
}

/// The status line and headers, with `date` and `connection: close` added
/// and `framing` (`transfer-encoding` or `content-length`) in place of any
/// the app set.
fn head(response: &Response<Body>, framing: &str) -> Vec<u8> {
    let status = response.status();
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in response.headers() {
        if [
            header::CONNECTION,
            header::CONTENT_LENGTH,
            header::TRANSFER_ENCODING,
            header::DATE,
        ]
        .contains(name)
        {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"date: ");
    out.extend_from_slice(httpdate::fmt_http_date(SystemTime::now()).as_bytes());
    out.extend_from_slice(b"\r\nconnection: close\r\n");
    out.extend_from_slice(framing.as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out
}

async fn whole(tcp: &mut TcpStream, response: Response<Body>) -> std::io::Result<()> {
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, MAX_WHOLE_BODY)
        .await
        .unwrap_or_else(|err| {
            tracing::warn!(%err, "an answer on an event stream connection was not sent whole");
            Bytes::new()
        });
    let response = Response::from_parts(parts, Body::empty());
    let mut out = head(&response, &format!("content-length: {}", body.len()));
    out.extend_from_slice(&body);
    tcp.write_all(&out).await
}

/// Send the body chunked until it ends (then the last chunk) or the client
/// closes. The frames ready at once go in one write, up to [`MAX_WRITE`]. A
/// client may send more (a pipelined request): it is read and dropped, up
/// to [`MAX_DRAINED`] bytes, as it was told the connection closes after
/// this answer.
async fn stream(tcp: &mut TcpStream, response: Response<Body>) -> std::io::Result<()> {
    tcp.write_all(&head(&response, "transfer-encoding: chunked"))
        .await?;
    let mut body = response.into_body();
    let mut discarded = 0;
    loop {
        let first = tokio::select! {
            frame = body.frame() => frame,
            ready = tcp.readable() => {
                let mut probe = [0u8; 512];
                match ready.and_then(|()| tcp.try_read(&mut probe)) {
                    // Readiness may be spurious.
                    Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Ok(n) if n > 0 && discarded + n <= MAX_DRAINED => {
                        discarded += n;
                        continue;
                    }
                    // Closed, failed, or sending far more than a request.
                    _ => return Ok(()),
                }
            }
        };
        let mut out = Vec::new();
        let mut next = first;
        let ended = loop {
            match next {
                None => break true,
                Some(Err(err)) => {
                    tracing::debug!(%err, "event stream body failed");
                    return Ok(());
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        chunk(&mut out, &data);
                    }
                }
            }
            if out.len() >= MAX_WRITE {
                break false;
            }
            match body.frame().now_or_never() {
                Some(frame) => next = frame,
                None => break false,
            }
        };
        if ended {
            out.extend_from_slice(b"0\r\n\r\n");
        }
        tcp.write_all(&out).await?;
        if ended {
            return Ok(());
        }
    }
}

/// `data` as one chunk of a chunked body.
fn chunk(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_replaces_framing_and_closes() {
        let response = Response::builder()
            .status(404)
            .header("content-type", "application/json")
            .header("content-length", "9")
            .header("connection", "keep-alive")
            .body(Body::empty())
            .unwrap_or_else(|e| panic!("{e}"));
        let text = String::from_utf8(head(&response, "transfer-encoding: chunked"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"), "{text}");
        assert!(
            text.contains("content-type: application/json\r\n"),
            "{text}"
        );
        assert!(!text.contains("content-length"), "{text}");
        assert!(!text.contains("keep-alive"), "{text}");
        assert!(text.contains("\r\ndate: "), "{text}");
        assert!(
            text.ends_with("connection: close\r\ntransfer-encoding: chunked\r\n\r\n"),
            "{text}"
        );
    }

    #[test]
    fn chunks_are_hex_sized() {
        let mut out = Vec::new();
        chunk(&mut out, &[b'x'; 26]);
        assert_eq!(out, [b"1a\r\n".as_slice(), &[b'x'; 26], b"\r\n"].concat());
    }
}
