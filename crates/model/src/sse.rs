//! Server-Sent Events: an incremental decoder over a response body, and the
//! driver that turns a provider's SSE events into a [`ModelStream`].
//!
//! The decoder follows the WHATWG event-stream rules: lines end in LF, CRLF or
//! CR; `:` starts a comment; `data` lines of one event are joined with `\n`; a
//! blank line dispatches. Bytes are split into lines before UTF-8 decoding, so a
//! character split across chunks is never broken.

use std::collections::VecDeque;

use bytes::Bytes;
use futures::{Stream, StreamExt};

use crate::{ModelError, ModelEvent, ModelStream};

/// One dispatched event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field; `None` means the default type, `message`.
    pub event: Option<String>,
    pub data: String,
}

/// Cap on one event's size, so a broken peer cannot grow memory without bound.
const MAX_EVENT_LEN: usize = 16 * 1024 * 1024;

/// How much of the body's start is kept for error messages.
const SNIPPET_LEN: usize = 200;

#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    /// Bytes not yet split into lines.
    buf: Vec<u8>,
    /// How much of `buf` is known to hold no line end.
    scanned: usize,
    event: Option<String>,
    data: String,
    has_data: bool,
    /// Lines whose field is none of `event`/`data`/`id`/`retry`: a sign the body
    /// is not an event stream at all.
    unknown_lines: usize,
    snippet: Vec<u8>,
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds a chunk and returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        if self.snippet.len() < SNIPPET_LEN {
            let take = (SNIPPET_LEN - self.snippet.len()).min(chunk.len());
            self.snippet.extend_from_slice(&chunk[..take]);
        }
        self.buf.extend_from_slice(chunk);
        // Taken while its lines are handled, so each line is borrowed from it
        // rather than copied (valid UTF-8, as it almost always is, is not).
        let buf = std::mem::take(&mut self.buf);
        let mut events = Vec::new();
        let mut start = 0;
        // Bytes already searched are not searched again, so a long line arriving
        // in many chunks costs linear time.
        let mut scan = self.scanned;
        loop {
            let Some(rel) = buf[scan..].iter().position(|&b| b == b'\n' || b == b'\r') else {
                scan = buf.len();
                break;
            };
            let end = scan + rel;
            let next = if buf[end] == b'\r' {
                match buf.get(end + 1) {
                    Some(b'\n') => end + 2,
                    Some(_) => end + 1,
                    // A CR at the end may be the first half of a CRLF.
                    None => {
                        scan = end;
                        break;
                    }
                }
            } else {
                end + 1
            };
            let line = String::from_utf8_lossy(&buf[start..end]);
            start = next;
            scan = next;
            if let Some(event) = self.line(&line) {
                events.push(event);
            }
        }
        self.buf = buf;
        self.buf.drain(..start);
        self.scanned = scan - start;
        events
    }

    /// The body ended. An event whose lines were all complete but that lacked
    /// the closing blank line is still dispatched; a cut-off last line is not.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let rest = std::mem::take(&mut self.buf);
        self.scanned = 0;
        match rest.strip_suffix(b"\r") {
            Some(line) => {
                let line = String::from_utf8_lossy(line).into_owned();
                if let Some(event) = self.line(&line) {
                    return Some(event);
                }
            }
            None if !rest.is_empty() => {
                // A cut-off line; if it cannot be the start of a field, the body
                // was never an event stream (e.g. one JSON document).
                let known = [&b"data"[..], b"event", b"id", b"retry", b":"];
                if !known
                    .iter()
                    .any(|k| rest.starts_with(k) || k.starts_with(&rest))
                {
                    self.unknown_lines += 1;
                }
                return None;
            }
            None => {}
        }
        self.line("")
    }

    /// Bytes held for an event not yet complete.
    pub fn pending_len(&self) -> usize {
        self.buf.len() + self.data.len()
    }

    /// Whether the body so far looks like something other than an event stream.
    pub fn saw_non_sse(&self) -> bool {
        self.unknown_lines > 0
    }

    /// The first bytes of the body, for error messages.
    pub fn snippet(&self) -> String {
        String::from_utf8_lossy(&self.snippet).trim().to_string()
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let event = self.event.take();
            if !self.has_data {
                return None;
            }
            self.has_data = false;
            let mut data = std::mem::take(&mut self.data);
            if data.ends_with('\n') {
                data.pop();
            }
            return Some(SseEvent { event, data });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "id" | "retry" => {}
            _ => self.unknown_lines += 1,
        }
        None
    }
}

/// What a provider's parser does with each event.
pub(crate) enum Step {
    Continue,
    /// The response is complete; later bytes are ignored.
    Done,
}

/// A provider's wire format: turns SSE events into [`ModelEvent`]s.
pub(crate) trait EventParser: Send + 'static {
    /// Handles one event, pushing what it produced to `out`.
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<Step, ModelError>;

    /// The body ended before the parser said [`Step::Done`]. Returns the final
    /// event if the response is complete enough, else the error to report.
    fn on_eof(&mut self) -> Result<ModelEvent, ModelError>;
}

struct Driver<S, P> {
    body: S,
    decoder: SseDecoder,
    parser: P,
    pending: VecDeque<Result<ModelEvent, ModelError>>,
    events_seen: usize,
    done: bool,
}

impl<S, P> Driver<S, P>
where
    P: EventParser,
{
    /// Feeds events to the parser; stops at the first error or completion.
    fn feed(&mut self, events: Vec<SseEvent>) {
        for event in events {
            if self.done {
                return;
            }
            self.events_seen += 1;
            let mut out = Vec::new();
            let step = self.parser.on_event(event, &mut out);
            self.pending.extend(out.into_iter().map(Ok));
            match step {
                Ok(Step::Continue) => {}
                Ok(Step::Done) => self.done = true,
                Err(err) => {
                    self.pending.push_back(Err(err));
                    self.done = true;
                }
            }
        }
    }

    fn eof(&mut self) {
        if let Some(event) = self.decoder.finish() {
            self.feed(vec![event]);
        }
        if self.done {
            return;
        }
        self.done = true;
        if self.events_seen == 0 && self.decoder.saw_non_sse() {
            self.pending.push_back(Err(ModelError::Protocol(format!(
                "the response is not an event stream: {:?}",
                self.decoder.snippet()
            ))));
            return;
        }
        self.pending.push_back(self.parser.on_eof());
    }
}

/// Drives `parser` over an HTTP body. The stream ends after the first error or
/// after the parser's final event.
pub(crate) fn drive<S, E, P>(body: S, parser: P) -> ModelStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
    E: std::fmt::Display,
    P: EventParser,
{
    let driver = Driver {
        body,
        decoder: SseDecoder::new(),
        parser,
        pending: VecDeque::new(),
        events_seen: 0,
        done: false,
    };
    let stream = futures::stream::unfold(driver, |mut d| async move {
        loop {
            if let Some(item) = d.pending.pop_front() {
                return Some((item, d));
            }
            if d.done {
                return None;
            }
            match d.body.next().await {
                Some(Ok(chunk)) => {
                    let events = d.decoder.push(&chunk);
                    d.feed(events);
                    if !d.done && d.decoder.pending_len() > MAX_EVENT_LEN {
                        d.pending.push_back(Err(ModelError::Protocol(format!(
                            "an event larger than {MAX_EVENT_LEN} bytes"
                        ))));
                        d.done = true;
                    }
                }
                Some(Err(err)) => {
                    d.pending
                        .push_back(Err(ModelError::Stream(format!("reading the body: {err}"))));
                    d.done = true;
                }
                None => d.eof(),
            }
        }
    });
    Box::pin(stream)
}

/// POST `body` as JSON to an SSE endpoint (retrying the request as `retry`
/// allows) and parse the response stream with `parser`. Shared by the providers,
/// which differ only in body, headers and parser.
pub(crate) async fn post_stream<P, M>(
    http: &reqwest::Client,
    url: &str,
    retry: &crate::retry::RetryPolicy,
    body: Bytes,
    map_error: M,
    parser: P,
) -> Result<ModelStream, ModelError>
where
    P: EventParser,
    M: Fn(u16, Option<std::time::Duration>, &str) -> ModelError,
{
    let response = crate::retry::send_with_retries(
        retry,
        || {
            http.post(url)
                .header("content-type", "application/json")
                .header("accept", "text/event-stream")
                .body(body.clone())
        },
        map_error,
    )
    .await?;
    Ok(drive(Box::pin(response.bytes_stream()), parser))
}

/// A request body as sent.
pub(crate) fn body_bytes(body: &impl serde::Serialize) -> Result<Bytes, ModelError> {
    body_bytes_sized(body, 0)
}

/// [`body_bytes`] into a buffer of `capacity` to start with: a body of a
/// few hundred KB is not copied again at each doubling.
pub(crate) fn body_bytes_sized(
    body: &impl serde::Serialize,
    capacity: usize,
) -> Result<Bytes, ModelError> {
    let mut out = Vec::with_capacity(capacity);
    match serde_json::to_writer(&mut out, body) {
        Ok(()) => Ok(Bytes::from(out)),
        Err(err) => Err(ModelError::BadRequest {
            status: 0,
            message: format!("request not serializable: {err}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_string),
            data: data.to_string(),
        }
    }

    fn decode_chunks(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(decoder.push(chunk));
        }
        out.extend(decoder.finish());
        out
    }

    #[test]
    fn event_and_data_lines() {
        let got = decode_chunks(&[b"event: ping\ndata: {\"type\": \"ping\"}\n\ndata: x\n\n"]);
        assert_eq!(
            got,
            vec![ev(Some("ping"), "{\"type\": \"ping\"}"), ev(None, "x")]
        );
    }

    #[test]
    fn multi_line_data_and_no_space() {
        let got = decode_chunks(&[b"data:a\ndata: b\ndata\n\n"]);
        assert_eq!(got, vec![ev(None, "a\nb\n")]);
    }

    #[test]
    fn crlf_and_cr_line_endings() {
        let got = decode_chunks(&[b"event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\r"]);
        assert_eq!(got, vec![ev(Some("a"), "1"), ev(Some("b"), "2")]);
    }

    #[test]
    fn crlf_split_across_chunks() {
        let got = decode_chunks(&[b"data: 1\r", b"\n\r", b"\ndata: 2\r\n\r\n"]);
        assert_eq!(got, vec![ev(None, "1"), ev(None, "2")]);
    }

    #[test]
    fn comments_and_ids_are_ignored() {
        let mut decoder = SseDecoder::new();
        let got = decoder.push(b": keep-alive\nid: 7\nretry: 100\ndata: x\n\n:\n\n");
        assert_eq!(got, vec![ev(None, "x")]);
        assert!(!decoder.saw_non_sse());
    }

    #[test]
    fn event_without_data_is_not_dispatched_and_type_resets() {
        let got = decode_chunks(&[b"event: a\n\ndata: x\n\n"]);
        assert_eq!(got, vec![ev(None, "x")]);
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let body =
            "event: content_block_delta\r\ndata: {\"text\":\"héllo 🌍\"}\r\n\r\n: c\ndata: é\n\n"
                .as_bytes();
        let whole = decode_chunks(&[body]);
        assert_eq!(whole.len(), 2);
        for i in 0..=body.len() {
            for j in i..=body.len() {
                let got = decode_chunks(&[&body[..i], &body[i..j], &body[j..]]);
                assert_eq!(got, whole, "split at {i}/{j}");
            }
        }
    }

    #[test]
    fn byte_by_byte() {
        let body = "data: 日本語\n\n".as_bytes();
        let chunks: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(decode_chunks(&chunks), vec![ev(None, "日本語")]);
    }

    #[test]
    fn finish_dispatches_complete_lines_only() {
        assert_eq!(
            decode_chunks(&[b"data: [DONE]\n"]),
            vec![ev(None, "[DONE]")]
        );
        assert_eq!(decode_chunks(&[b"data: {\"a\":"]), vec![]);
        assert_eq!(decode_chunks(&[b"data: x\r"]), vec![ev(None, "x")]);
    }

    /// Counts events; complete at `[DONE]`.
    struct Counter(usize);

    impl EventParser for Counter {
        fn on_event(
            &mut self,
            event: SseEvent,
            _out: &mut Vec<ModelEvent>,
        ) -> Result<Step, ModelError> {
            self.0 += 1;
            Ok(if event.data == "[DONE]" {
                Step::Done
            } else {
                Step::Continue
            })
        }

        fn on_eof(&mut self) -> Result<ModelEvent, ModelError> {
            Err(ModelError::Stream(format!("eof after {}", self.0)))
        }
    }

    async fn drive_chunks(chunks: Vec<Vec<u8>>) -> Vec<Result<ModelEvent, ModelError>> {
        let body = futures::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, std::io::Error>(Bytes::from(c))),
        );
        drive(body, Counter(0)).collect().await
    }

    #[tokio::test]
    async fn driver_reports_eof_oversize_and_body_errors() {
        let got = drive_chunks(vec![b"data: 1\n\ndata: 2\n\n".to_vec()]).await;
        assert!(matches!(&got[..], [Err(ModelError::Stream(m))] if m == "eof after 2"));
        let got = drive_chunks(vec![b"data: [DONE]\n\ndata: x\n\n".to_vec()]).await;
        assert!(got.is_empty());
        let big = vec![b'x'; MAX_EVENT_LEN / 4];
        let mut chunks = vec![b"data: ".to_vec()];
        chunks.extend(std::iter::repeat_n(big, 5));
        let got = drive_chunks(chunks).await;
        assert!(matches!(&got[..], [Err(ModelError::Protocol(_))]));

        let body = futures::stream::iter(vec![
            Ok(Bytes::from_static(b"data: 1\n\n")),
            Err(std::io::Error::other("reset")),
        ]);
        let got: Vec<_> = drive(body, Counter(0)).collect().await;
        assert!(matches!(&got[..], [Err(ModelError::Stream(m))] if m.contains("reset")));
    }

    #[test]
    fn garbage_is_noticed() {
        let mut decoder = SseDecoder::new();
        assert!(decoder.push(b"<html>oops</html>\n").is_empty());
        assert!(decoder.finish().is_none());
        assert!(decoder.saw_non_sse());
        assert_eq!(decoder.snippet(), "<html>oops</html>");
    }
}
