//! Masking live tool output with the sandbox's [`SecretMask`].

use agentd_protocol::OutputStream;
pub(crate) use agentd_sandbox::SecretMask;

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
