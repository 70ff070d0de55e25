//! Masking of secret variable values in tool output: each occurrence of a
//! secret's value becomes `[secret NAME]` before the text reaches the model,
//! an event or the transcript. It catches a value printed as it is (an
//! `echo $TOKEN`, a `set -x`, an error quoting it), not one a command
//! transforms on purpose (encoded, reversed, split).

use agentd_protocol::OutputStream;

/// The secrets of a session's sandbox, longest value first.
#[derive(Debug, Clone, Default)]
pub(crate) struct SecretMask {
    secrets: Vec<(String, String)>,
}

impl SecretMask {
    /// From (name, value) pairs; empty values are ignored.
    pub(crate) fn new<'a>(secrets: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut secrets: Vec<(String, String)> = secrets
            .into_iter()
            .filter(|(_, value)| !value.is_empty())
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        // At a position where two match, the longer is masked whole.
        secrets.sort_by_key(|(_, value)| std::cmp::Reverse(value.len()));
        Self { secrets }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret value masked.
    pub(crate) fn mask(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_string();
        }
        self.mask_until(text, text.len()).0
    }

    /// Masks the occurrences that start before `cut`; returns the masked
    /// text up to where it stopped (at or after `cut`) and that position.
    fn mask_until(&self, text: &str, cut: usize) -> (String, usize) {
        let mut out = String::with_capacity(cut);
        let mut at = 0;
        while at < cut {
            let rest = &text[at..];
            if let Some((name, value)) = self
                .secrets
                .iter()
                .find(|(_, value)| rest.starts_with(value.as_str()))
            {
                out.push_str(&format!("[secret {name}]"));
                at += value.len();
                continue;
            }
            let next = rest.chars().next().map_or(1, char::len_utf8);
            out.push_str(&rest[..next]);
            at += next;
        }
        (out, at)
    }

    /// Bytes a stream must hold back: a value may begin in them and end in
    /// the next piece.
    fn hold_back(&self) -> usize {
        self.secrets.first().map_or(0, |(_, value)| value.len() - 1)
    }
}

/// Masks the live pieces of a tool's output streams, holding back the end of
/// each stream that could be the start of a secret split across pieces.
pub(crate) struct StreamMasks {
    mask: SecretMask,
    pending: [String; 2],
}

impl StreamMasks {
    pub(crate) fn new(mask: SecretMask) -> Self {
        Self {
            mask,
            pending: Default::default(),
        }
    }

    fn slot(stream: OutputStream) -> usize {
        match stream {
            OutputStream::Stdout => 0,
            OutputStream::Stderr => 1,
        }
    }

    /// The part of `stream` (with this piece) that is safe to send now.
    pub(crate) fn push(&mut self, stream: OutputStream, piece: &str) -> String {
        if self.mask.is_empty() {
            return piece.to_string();
        }
        let pending = &mut self.pending[Self::slot(stream)];
        pending.push_str(piece);
        let mut cut = pending.len().saturating_sub(self.mask.hold_back());
        while !pending.is_char_boundary(cut) {
            cut -= 1;
        }
        let (out, used) = self.mask.mask_until(pending, cut);
        pending.drain(..used);
        out
    }

    /// What is held back, masked, once the streams have ended.
    pub(crate) fn finish(&mut self) -> Vec<(OutputStream, String)> {
        [OutputStream::Stdout, OutputStream::Stderr]
            .into_iter()
            .filter_map(|stream| {
                let pending = std::mem::take(&mut self.pending[Self::slot(stream)]);
                (!pending.is_empty()).then(|| (stream, self.mask.mask(&pending)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask() -> SecretMask {
        SecretMask::new([("TOKEN", "s3cr3t-value"), ("SHORT", "s3cr3t"), ("NONE", "")])
    }

    #[test]
    fn every_occurrence_is_masked_longest_first() {
        let text = "a s3cr3t-value b s3cr3t c s3cr3t-valu é";
        assert_eq!(
            mask().mask(text),
            "a [secret TOKEN] b [secret SHORT] c [secret SHORT]-valu é"
        );
        assert_eq!(SecretMask::new([]).mask("s3cr3t"), "s3cr3t");
    }

    #[test]
    fn a_secret_split_across_pieces_never_leaks() {
        let text = "héllo s3cr3t-value and s3cr3t-value\nbye s3cr3t";
        for size in 1..text.len() {
            let mut streams = StreamMasks::new(mask());
            let mut sent = String::new();
            let mut at = 0;
            while at < text.len() {
                let mut end = (at + size).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                let out = streams.push(OutputStream::Stdout, &text[at..end]);
                assert!(!out.contains("s3cr3t"), "piece size {size}: {out:?}");
                sent.push_str(&out);
                at = end;
            }
            for (stream, rest) in streams.finish() {
                assert_eq!(stream, OutputStream::Stdout);
                sent.push_str(&rest);
            }
            assert_eq!(
                sent, "héllo [secret TOKEN] and [secret TOKEN]\nbye [secret SHORT]",
                "piece size {size}"
            );
        }
    }

    #[test]
    fn streams_are_held_apart() {
        let mut streams = StreamMasks::new(mask());
        assert_eq!(streams.push(OutputStream::Stdout, "s3c"), "");
        assert_eq!(streams.push(OutputStream::Stderr, "r3t"), "");
        assert_eq!(
            streams.finish(),
            vec![
                (OutputStream::Stdout, "s3c".to_string()),
                (OutputStream::Stderr, "r3t".to_string())
            ]
        );
    }
}
