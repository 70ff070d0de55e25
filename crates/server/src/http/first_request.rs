//! The head of a connection's first request, read before hyper sees the
//! connection, to find the event streams that `stream_conn` serves itself.
//! Anything else (HTTP/2's preface, a request with a body, a head that does
//! not parse or fills [`HEAD_LIMIT`]) goes to hyper with the bytes read so
//! far put back in front of the socket ([`Prefix`], which `WatchedIo` reads
//! first), so hyper answers it exactly as if it had read them itself.

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri, Version};
use tokio::io::{AsyncReadExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Bytes read for a first head before giving up and handing it to hyper
/// (which has its own, larger, limit).
const HEAD_LIMIT: usize = 8 * 1024;
/// Headers a taken-over head may have; more go to hyper.
const MAX_HEADERS: usize = 64;

/// What the connection's first bytes turned out to be.
pub(super) enum First {
    /// `GET /v1/sessions/{id}/events` over HTTP/1.1, nothing after its head.
    EventStream(Box<Request<axum::body::Body>>),
    /// Anything else: these bytes, then the rest of the socket, are hyper's.
    Other(Vec<u8>),
    /// Closed (or failed) before a whole head came.
    Gone,
    /// No whole head by `deadline`.
    TimedOut,
}

/// Read the first request's head from `tcp` until `deadline`. A graceful
/// `stop` closes a connection that has sent nothing yet; a head already
/// arriving is read (and answered, by whoever takes it).
pub(super) async fn read(
    tcp: &mut TcpStream,
    deadline: Instant,
    stop: &CancellationToken,
) -> First {
    match tokio::time::timeout_at(deadline, read_head(tcp, stop)).await {
        Ok(first) => first,
        Err(_) => First::TimedOut,
    }
}

async fn read_head(tcp: &mut TcpStream, stop: &CancellationToken) -> First {
    // No buffer until the first byte: a connection that sends nothing costs none.
    tokio::select! {
        ready = tcp.readable() => {
            if ready.is_err() {
                return First::Gone;
            }
        }
        () = stop.cancelled() => return First::Gone,
    }
    let mut bytes = Vec::new();
    loop {
        if bytes.len() >= HEAD_LIMIT {
            return First::Other(bytes);
        }
        // Grown only as the head comes: most heads fit in a few hundred bytes.
        bytes.reserve(1024.min(HEAD_LIMIT - bytes.len()));
        match tcp.read_buf(&mut bytes).await {
            Ok(0) | Err(_) => return First::Gone,
            Ok(_) => {}
        }
        match parse(&bytes) {
            Parsed::Partial => {}
            Parsed::EventStream(request) => return First::EventStream(request),
            Parsed::Other => return First::Other(bytes),
        }
    }
}

enum Parsed {
    Partial,
    EventStream(Box<Request<axum::body::Body>>),
    Other,
}

fn parse(bytes: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut head = httparse::Request::new(&mut headers);
    let length = match head.parse(bytes) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(_) => return Parsed::Other,
    };
    // Pipelined bytes after the head are a request hyper must answer.
    if length != bytes.len() || head.method != Some("GET") || head.version != Some(1) {
        return Parsed::Other;
    }
    let Some(path) = head.path.filter(|path| is_event_stream_path(path)) else {
        return Parsed::Other;
    };
    let Ok(uri) = path.parse::<Uri>() else {
        return Parsed::Other;
    };
    let mut map = HeaderMap::with_capacity(head.headers.len());
    for header in head.headers.iter() {
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(header.name.as_bytes()),
            HeaderValue::from_bytes(header.value),
        ) else {
            return Parsed::Other;
        };
        map.append(name, value);
    }
    // A GET with a body, or asking for something else than a plain response.
    let unusual = ["transfer-encoding", "upgrade", "expect"];
    let has_body = map
        .get_all("content-length")
        .iter()
        .any(|length| length.as_bytes() != b"0");
    if has_body || unusual.iter().any(|name| map.contains_key(*name)) {
        return Parsed::Other;
    }
    let mut request = Request::new(axum::body::Body::empty());
    *request.method_mut() = Method::GET;
    *request.uri_mut() = uri;
    *request.version_mut() = Version::HTTP_11;
    *request.headers_mut() = map;
    Parsed::EventStream(Box::new(request))
}

/// `/v1/sessions/{id}/events`, with or without a query.
fn is_event_stream_path(target: &str) -> bool {
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    path.strip_prefix("/v1/sessions/")
        .and_then(|rest| rest.strip_suffix("/events"))
        .is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

/// Bytes already read from a socket, to be read again first.
pub(super) struct Prefix {
    bytes: Vec<u8>,
    read: usize,
}

impl Prefix {
    pub(super) fn new(bytes: Vec<u8>) -> Self {
        Self { bytes, read: 0 }
    }

    /// Move what is left (as much as fits) into `buf`; whether there was any.
    pub(super) fn fill(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        if self.read == self.bytes.len() {
            return false;
        }
        let rest = &self.bytes[self.read..];
        let n = rest.len().min(buf.remaining());
        buf.put_slice(&rest[..n]);
        self.read += n;
        if self.read == self.bytes.len() {
            // Given back: an idle connection keeps no copy of its first head.
            *self = Self::new(Vec::new());
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(bytes: &[u8]) -> &'static str {
        match parse(bytes) {
            Parsed::Partial => "partial",
            Parsed::EventStream(_) => "stream",
            Parsed::Other => "other",
        }
    }

    #[test]
    fn only_a_bodiless_http11_get_of_a_session_stream_is_taken() {
        let get = |target: &str| format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(kind(get("/v1/sessions/abc/events").as_bytes()), "stream");
        assert_eq!(
            kind(get("/v1/sessions/abc/events?after=3").as_bytes()),
            "stream"
        );
        assert_eq!(kind(get("/v1/sessions/abc").as_bytes()), "other");
        assert_eq!(kind(get("/v1/sessions//events").as_bytes()), "other");
        assert_eq!(kind(get("/v1/sessions/a/b/events").as_bytes()), "other");
        assert_eq!(kind(get("/healthz").as_bytes()), "other");
        assert_eq!(
            kind(b"GET /v1/sessions/abc/events HTTP/1.1\r\nHost: x\r\n"),
            "partial"
        );
        assert_eq!(
            kind(b"GET /v1/sessions/abc/events HTTP/1.0\r\nHost: x\r\n\r\n"),
            "other"
        );
        assert_eq!(
            kind(b"POST /v1/sessions/abc/events HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
            "other"
        );
        assert_eq!(
            kind(b"GET /v1/sessions/abc/events HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"),
            "other"
        );
        assert_eq!(
            kind(b"GET /v1/sessions/abc/events HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
            "stream"
        );
        // A second, pipelined request is hyper's to answer.
        let pipelined = format!("{}{}", get("/v1/sessions/abc/events"), get("/healthz"));
        assert_eq!(kind(pipelined.as_bytes()), "other");
        assert_eq!(kind(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), "other");
    }

    #[test]
    fn the_taken_request_keeps_its_headers_and_query() {
        let bytes = b"GET /v1/sessions/abc/events?after=7 HTTP/1.1\r\nHost: x\r\n\
                      Authorization: Bearer t\r\nLast-Event-ID: 9\r\n\r\n";
        let Parsed::EventStream(request) = parse(bytes) else {
            panic!("not taken");
        };
        assert_eq!(request.uri().query(), Some("after=7"));
        assert_eq!(request.headers()["authorization"], "Bearer t");
        assert_eq!(request.headers()["last-event-id"], "9");
    }

    #[test]
    fn put_back_bytes_are_given_in_pieces_then_freed() {
        let mut prefix = Prefix::new(b"head ".to_vec());
        let mut storage = [0u8; 3];
        let mut buf = ReadBuf::new(&mut storage);
        assert!(prefix.fill(&mut buf));
        assert_eq!(buf.filled(), b"hea");
        let mut storage = [0u8; 8];
        let mut buf = ReadBuf::new(&mut storage);
        assert!(prefix.fill(&mut buf));
        assert_eq!(buf.filled(), b"d ");
        assert_eq!(prefix.bytes.capacity(), 0);
        assert!(!prefix.fill(&mut buf));
    }
}
