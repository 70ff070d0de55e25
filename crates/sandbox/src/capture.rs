//! Reading a child's pipes: live chunks to a listener, a capped copy for the outcome.
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

use crate::policy::OutputChunk;

const READ_BUFFER_BYTES: usize = 8192;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// Output kept for the outcome: the first `cap` bytes of stdout and stderr
/// combined, in arrival order; the rest is only counted.
#[derive(Debug, Default)]
pub(crate) struct Capture {
    cap: usize,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
    pub(crate) dropped_bytes: u64,
}

impl Capture {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap,
            ..Self::default()
        }
    }

    fn push(&mut self, stream: Stream, bytes: &[u8]) {
        let room = self
            .cap
            .saturating_sub(self.stdout.len() + self.stderr.len());
        let kept = bytes.len().min(room);
        let target = match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        };
        target.extend_from_slice(&bytes[..kept]);
        self.dropped_bytes += (bytes.len() - kept) as u64;
    }
}

pub(crate) type SharedCapture = Arc<Mutex<Capture>>;

/// Copy `reader` to the capture and the live sender until EOF or a read error.
pub(crate) async fn pump(
    mut reader: impl AsyncRead + Unpin,
    stream: Stream,
    capture: SharedCapture,
    live: Option<mpsc::UnboundedSender<OutputChunk>>,
) {
    let mut buffer = vec![0u8; READ_BUFFER_BYTES];
    let mut decoder = Utf8Chunker::default();
    loop {
        let read = match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        let bytes = &buffer[..read];
        if let Ok(mut capture) = capture.lock() {
            capture.push(stream, bytes);
        }
        if let Some(live) = &live {
            send(live, stream, decoder.decode(bytes));
            // The listener runs in this task (the tool reading its output is
            // joined with the command): let it take this chunk before the
            // next read, or a command printing faster than it is relayed
            // would queue its output here without bound.
            tokio::task::yield_now().await;
        }
    }
    if let Some(live) = &live {
        send(live, stream, decoder.finish());
    }
}

fn send(live: &mpsc::UnboundedSender<OutputChunk>, stream: Stream, text: String) {
    if text.is_empty() {
        return;
    }
    let chunk = match stream {
        Stream::Stdout => OutputChunk::Stdout(text),
        Stream::Stderr => OutputChunk::Stderr(text),
    };
    // Nobody listening is fine.
    let _ = live.send(chunk);
}

/// Lossy UTF-8 decoding of a byte stream read in arbitrary pieces: a character
/// split across two reads is held back and emitted whole with the next piece.
#[derive(Debug, Default)]
pub(crate) struct Utf8Chunker {
    pending: Vec<u8>,
}

impl Utf8Chunker {
    pub(crate) fn decode(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let complete = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            // `error_len() == None` means the input ended inside a character.
            Err(err) if err.error_len().is_none() => err.valid_up_to(),
            Err(_) => incomplete_suffix_start(&self.pending),
        };
        let rest = self.pending.split_off(complete);
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending = rest;
        text
    }

    pub(crate) fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }
}

/// Start of a trailing, possibly incomplete character (at most 3 bytes back),
/// for buffers that also contain invalid bytes earlier on.
fn incomplete_suffix_start(bytes: &[u8]) -> usize {
    let earliest = bytes.len().saturating_sub(3);
    for start in (earliest..bytes.len()).rev() {
        let byte = bytes[start];
        if byte & 0b1100_0000 != 0b1000_0000 {
            // A lead byte: is the sequence it starts complete?
            let needed = match byte {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF7 => 4,
                _ => 1,
            };
            return if bytes.len() - start < needed {
                start
            } else {
                bytes.len()
            };
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_the_first_cap_bytes_and_counts_the_rest() {
        let mut capture = Capture::new(5);
        capture.push(Stream::Stdout, b"abc");
        capture.push(Stream::Stderr, b"defg");
        capture.push(Stream::Stdout, b"hij");
        assert_eq!(capture.stdout, b"abc");
        assert_eq!(capture.stderr, b"de");
        assert_eq!(capture.dropped_bytes, 5);
    }

    #[test]
    fn chunker_joins_characters_split_across_reads() {
        let text = "héllo wörld €";
        let bytes = text.as_bytes();
        let mut chunker = Utf8Chunker::default();
        let mut out = String::new();
        for piece in bytes.chunks(1) {
            out.push_str(&chunker.decode(piece));
        }
        out.push_str(&chunker.finish());
        assert_eq!(out, text);
    }

    #[test]
    fn chunker_replaces_invalid_bytes_and_keeps_going() {
        let mut chunker = Utf8Chunker::default();
        let mut out = chunker.decode(b"a\xffb\xe2\x82");
        out.push_str(&chunker.decode(b"\xac"));
        out.push_str(&chunker.finish());
        assert_eq!(out, "a\u{fffd}b€");
    }
}
