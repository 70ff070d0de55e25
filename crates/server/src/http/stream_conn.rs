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
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// A non-streaming answer larger than this is cut off (they are error bodies
/// of a few hundred bytes).
const MAX_WHOLE_BODY: usize = 1024 * 1024;

/// Answer `request` on `tcp` through `app`, then close; `cut` closes at once.
pub(super) async fn serve(
    mut tcp: TcpStream,
    request: Request<Body>,
    app: Router,
    cut: CancellationToken,
) {
    let answered = tokio::select! {
        answered = app.oneshot(request) => answered,
        () = cut.cancelled() => return,
    };
    let Ok(response) = answered;
    let served = if is_event_stream(response.headers()) {
        stream(&mut tcp, response, &cut).await
    } else {
        whole(&mut tcp, response).await
    };
    if let Err(err) = served {
        tracing::debug!(%err, "event stream connection ended with an error");
    }
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
    tcp.write_all(&out).await?;
    tcp.shutdown().await
}

/// Send the body chunked, each batch of ready frames in one write, until it
/// ends (then the last chunk) or the client closes or sends anything (it
/// was told the connection closes after this answer).
async fn stream(
    tcp: &mut TcpStream,
    response: Response<Body>,
    cut: &CancellationToken,
) -> std::io::Result<()> {
    tcp.write_all(&head(&response, "transfer-encoding: chunked"))
        .await?;
    let mut body = response.into_body();
    loop {
        let first = tokio::select! {
            frame = body.frame() => frame,
            ready = tcp.readable() => {
                // The client closed, or sent what it should not: either
                // ends the answer. Readiness may be spurious.
                let mut probe = [0u8; 1];
                match ready.and_then(|()| tcp.try_read(&mut probe)) {
                    Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
                    _ => return Ok(()),
                }
            }
            () = cut.cancelled() => return Ok(()),
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
            return tcp.shutdown().await;
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
