//! Coalescing of small text pieces into fewer events: a long reply
//! becomes tens of stored events, not thousands, and live and replaying clients
//! see the same ones.

use std::time::Duration;

use tokio::time::Instant;

/// Flush after this long since the first buffered piece…
pub const MAX_DELAY: Duration = Duration::from_millis(50);
/// …or once this many bytes are buffered.
pub const MAX_BYTES: usize = 1024;

/// A text buffer for one stream of pieces sharing a key (a content block, a
/// tool's stdout). Pushing a piece with another key hands back what was buffered.
#[derive(Debug)]
pub struct Coalescer<K> {
    key: Option<K>,
    text: String,
    since: Option<Instant>,
}

impl<K: PartialEq + Clone> Coalescer<K> {
    pub fn new() -> Self {
        Self {
            key: None,
            text: String::new(),
            since: None,
        }
    }

    /// Add a piece. Returns buffered text that is due to be sent: the previous
    /// key's text when the key changes, or this key's text once it is large or
    /// old enough.
    pub fn push(&mut self, key: K, piece: &str) -> Vec<(K, String)> {
        let mut due = Vec::new();
        if self.key.as_ref().is_some_and(|k| *k != key) {
            due.extend(self.take());
        }
        if self.key.is_none() {
            self.key = Some(key);
            self.since = Some(Instant::now());
        }
        self.text.push_str(piece);
        if self.text.len() >= MAX_BYTES || self.deadline().is_some_and(|d| d <= Instant::now()) {
            due.extend(self.take());
        }
        due
    }

    /// When the buffered text must be sent even if nothing more arrives.
    pub fn deadline(&self) -> Option<Instant> {
        self.since.map(|since| since + MAX_DELAY)
    }

    /// Everything buffered, if anything.
    pub fn take(&mut self) -> Option<(K, String)> {
        self.since = None;
        let key = self.key.take()?;
        if self.text.is_empty() {
            return None;
        }
        Some((key, std::mem::take(&mut self.text)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn small_pieces_are_joined_until_the_deadline() {
        let mut c = Coalescer::new();
        assert!(c.push(0u32, "a").is_empty());
        assert!(c.push(0, "b").is_empty());
        tokio::time::advance(MAX_DELAY).await;
        assert_eq!(c.push(0, "c"), vec![(0, "abc".to_string())]);
        assert_eq!(c.take(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn key_change_and_size_flush() {
        let mut c = Coalescer::new();
        assert!(c.push(0u32, "x").is_empty());
        assert_eq!(c.push(1, "y"), vec![(0, "x".to_string())]);
        let big = "z".repeat(MAX_BYTES);
        assert_eq!(c.push(1, &big), vec![(1, format!("y{big}"))]);
        assert_eq!(c.take(), None);
    }
}
