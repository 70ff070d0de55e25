//! The end of a command's output. The sandbox keeps only the head of what a
//! command prints; the end (the failing test, the exit message) matters as
//! much, so `Bash` keeps a bounded tail of each stream as it goes by, and a
//! 200 MB flood costs a few KiB of memory either way.

/// The last `cap` bytes of one stream, and how many bytes went by.
#[derive(Debug)]
pub(crate) struct Tail {
    cap: usize,
    text: String,
    seen: u64,
}

impl Tail {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap,
            text: String::new(),
            seen: 0,
        }
    }

    pub(crate) fn push(&mut self, piece: &str) {
        self.seen += piece.len() as u64;
        self.text.push_str(piece);
        // Trimmed in steps, so each byte is moved a bounded number of times.
        if self.text.len() > self.cap.saturating_mul(2).max(4096) {
            self.trim();
        }
    }

    fn trim(&mut self) {
        if self.text.len() > self.cap {
            let mut start = self.text.len() - self.cap;
            while !self.text.is_char_boundary(start) {
                start += 1;
            }
            self.text.drain(..start);
        }
    }

    /// What to show after `head`, the part of this stream the sandbox kept:
    /// nothing when the head is all of it, the missing end when the tail
    /// covers it, else a note of the gap and the tail.
    pub(crate) fn after(mut self, head: &str) -> String {
        self.trim();
        let missing = self.seen.saturating_sub(head.len() as u64);
        if missing == 0 {
            return String::new();
        }
        if missing <= self.text.len() as u64 {
            let mut start = self.text.len() - missing as usize;
            while !self.text.is_char_boundary(start) {
                start += 1;
            }
            return self.text[start..].to_string();
        }
        let gap = missing - self.text.len() as u64;
        format!(
            "\n[output truncated: {gap} bytes not kept; the last {} follow]\n{}",
            self.text.len(),
            self.text
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_adds_nothing_to_the_head() {
        let mut tail = Tail::new(10);
        tail.push("hello");
        assert_eq!(tail.after("hello"), "");
    }

    #[test]
    fn a_small_gap_is_filled_from_the_tail() {
        let mut tail = Tail::new(10);
        tail.push("abcdef");
        tail.push("ghij");
        assert_eq!(tail.after("abcdef"), "ghij");
    }

    #[test]
    fn a_large_gap_is_marked_and_the_end_kept() {
        let mut tail = Tail::new(8);
        for _ in 0..10_000 {
            tail.push("0123456789");
        }
        tail.push("THE-END\n");
        let after = tail.after("0123456789");
        assert!(after.ends_with("follow]\nTHE-END\n"), "{after}");
        assert!(
            after.contains("[output truncated: 99990 bytes not kept; the last 8 follow]"),
            "{after}"
        );
        assert!(tail_len_is_bounded());
    }

    fn tail_len_is_bounded() -> bool {
        let mut tail = Tail::new(100);
        for _ in 0..100_000 {
            tail.push("x");
        }
        tail.text.len() <= 4096
    }

    #[test]
    fn the_tail_never_starts_inside_a_character() {
        let mut tail = Tail::new(3);
        tail.push(&"é".repeat(5000));
        let after = tail.after("");
        assert!(after.ends_with("é"), "{after}");
        assert!(!after.contains('\u{fffd}'));
    }
}
