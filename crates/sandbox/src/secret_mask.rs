//! Masking of secret variable values in tool output: each occurrence of a
//! secret's value becomes `[secret NAME]` before the text reaches the model,
//! an event or the transcript. It catches a value printed as it is (an
//! `echo $TOKEN`, a `set -x`, an error quoting it), not one a command
//! transforms on purpose (encoded, reversed, split).

/// Lines of a multi-line secret shorter than this are not masked on their
/// own (a blank or a `}` would be masked everywhere).
const MIN_LINE_FORM: usize = 8;

/// The secrets of a session's sandbox, longest value first.
#[derive(Clone, Default)]
pub struct SecretMask {
    secrets: Vec<(String, String)>,
}

/// Names only: the values are the secrets.
impl std::fmt::Debug for SecretMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = self.secrets.iter().map(|(name, _)| name);
        f.debug_list().entries(names).finish()
    }
}

impl SecretMask {
    /// From (name, value) pairs; empty values are ignored. A value is also
    /// matched without its surrounding whitespace, and a value of several
    /// lines line by line: tools trim output's last newline and readers split
    /// it into lines (a PEM key ends in one).
    pub fn new<'a>(given: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut secrets: Vec<(String, String)> = Vec::new();
        for (name, value) in given {
            let lines = value.lines().map(|line| line.trim_end_matches('\r'));
            let forms = [value, value.trim_end(), value.trim()]
                .into_iter()
                .chain(lines.filter(|line| line.trim().len() >= MIN_LINE_FORM));
            for form in forms.filter(|form| !form.trim().is_empty()) {
                if !secrets.iter().any(|(_, known)| known == form) {
                    secrets.push((name.to_string(), form.to_string()));
                }
            }
        }
        // At a position where two match, the longer is masked whole.
        secrets.sort_by_key(|(_, value)| std::cmp::Reverse(value.len()));
        Self { secrets }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret value masked.
    pub fn mask(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_string();
        }
        self.mask_until(text, text.len()).0
    }

    /// Masks the occurrences that start before `cut`; returns the masked
    /// text up to where it stopped (at or after `cut`) and that position.
    pub fn mask_until(&self, text: &str, cut: usize) -> (String, usize) {
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
    pub fn hold_back(&self) -> usize {
        self.secrets.first().map_or(0, |(_, value)| value.len() - 1)
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
    fn a_secret_with_a_trailing_newline_is_masked_when_it_is_trimmed_or_split() {
        let key = "-----BEGIN KEY-----\r\nAAAAB3NzaC1yc2EAAAADAQABAAAB\n-----END KEY-----\n";
        let mask = SecretMask::new([("SSH_KEY", key)]);
        assert_eq!(mask.mask(key), "[secret SSH_KEY]");
        assert_eq!(mask.mask(key.trim_end()), "[secret SSH_KEY]");
        let second_line = "line AAAAB3NzaC1yc2EAAAADAQABAAAB";
        assert_eq!(mask.mask(second_line), "line [secret SSH_KEY]");
        assert!(!mask.mask("x\n}\n").contains("secret"), "short lines stay");
    }
}
