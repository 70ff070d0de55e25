//! The symbol form in which shell commands and `Bash(...)` patterns are compared.
//!
//! A simple command becomes a sequence of [`Sym`]s: the characters of each word after
//! quote removal, a [`Sym::Sep`] between words, and its output redirections at the end.
//! Whatever the shell only knows when it runs (`$VAR`, `$(…)`, `~`, an unquoted glob)
//! is one [`Sym::Opaque`] that only a `*` of a pattern (or the same expansion written in
//! the pattern) can cover.

/// One symbol of a command or of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sym {
    /// A literal character (after quote removal).
    Ch(char),
    /// The boundary between two words.
    Sep,
    /// Patterns only: `*`, any run of symbols except a redirection.
    Star,
    /// Text whose value is only known when the shell runs it; `raw` is its source text and
    /// `quoted` says whether it stood inside double quotes.
    Opaque { raw: String, quoted: bool },
    /// An output redirection operator (`>`, `>>`, `2>`, `&>`, …). Never covered by `*`.
    Redir(String),
}

impl Sym {
    pub(crate) fn opaque(raw: impl Into<String>, quoted: bool) -> Self {
        Self::Opaque {
            raw: raw.into(),
            quoted,
        }
    }
}

/// Does `pat` match `text`?
///
/// With `possible == false` the answer is "certainly": an opaque symbol of `text` is only
/// covered by a `*` or an identical opaque symbol. With `possible == true` the answer is
/// "for some value of the expansions": an opaque symbol may stand for any run of pattern
/// symbols except a redirection (used to find deny rules a command *might* match).
pub(crate) fn matches(pat: &[Sym], text: &[Sym], possible: bool) -> bool {
    let literal = !pat.contains(&Sym::Star);
    let opaque_text = text.iter().any(|s| matches!(s, Sym::Opaque { .. }));
    if literal && !(possible && opaque_text) {
        return pat == text;
    }
    let (m, n) = (pat.len(), text.len());
    let width = n + 1;
    // dp[i * width + j]: does pat[i..] match text[j..]?
    let mut dp = vec![false; (m + 1) * width];
    for i in (0..=m).rev() {
        for j in (0..=n).rev() {
            let t = text.get(j);
            let t_opaque = possible && matches!(t, Some(Sym::Opaque { .. }));
            let next_j = |dp: &[bool], i: usize| dp[i * width + j + 1];
            let value = match pat.get(i) {
                None => j == n || (t_opaque && next_j(&dp, i)),
                Some(Sym::Star) => {
                    dp[(i + 1) * width + j]
                        || (t.is_some_and(|t| !matches!(t, Sym::Redir(_))) && next_j(&dp, i))
                }
                Some(p) => {
                    (t == Some(p) && dp[(i + 1) * width + j + 1])
                        || (t_opaque
                            && (next_j(&dp, i)
                                || (!matches!(p, Sym::Redir(_)) && dp[(i + 1) * width + j])))
                }
            };
            dp[i * width + j] = value;
        }
    }
    dp[0]
}

/// Characters that need no quoting in a rendered rule.
fn is_safe(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_-./=:,@%+^".contains(c)
}

const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for",
    "in", "function", "select", "time", "coproc", "{", "}", "!", "[[", "]]",
];

/// Renders a command's symbols back to shell text that, read as a `Bash(...)` pattern,
/// yields the same symbols (so it matches exactly this command and nothing wider).
pub(crate) fn render(seq: &[Sym]) -> String {
    let mut out = String::new();
    for (k, word) in seq.split(|s| *s == Sym::Sep).enumerate() {
        if k > 0 {
            out.push(' ');
        }
        render_word(word, k == 0, &mut out);
    }
    out
}

fn render_word(word: &[Sym], first: bool, out: &mut String) {
    if word.is_empty() {
        out.push_str("''");
        return;
    }
    let mut prev_opaque = false;
    let mut i = 0;
    while i < word.len() {
        match &word[i] {
            Sym::Ch(_) => {
                let start = i;
                let mut run = String::new();
                while let Some(Sym::Ch(c)) = word.get(i) {
                    run.push(*c);
                    i += 1;
                }
                let bracket_word = word.len() == 1 && (run == "[" || run == "]");
                let needs_quotes = !bracket_word && !run.chars().all(is_safe)
                    || (prev_opaque
                        && run
                            .chars()
                            .next()
                            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_'))
                    || (first && start == 0 && (run.contains('=') || RESERVED.contains(&&*run)));
                if needs_quotes {
                    out.push('\'');
                    out.push_str(&run.replace('\'', r"'\''"));
                    out.push('\'');
                } else {
                    out.push_str(&run);
                }
                prev_opaque = false;
                continue;
            }
            Sym::Opaque { raw, quoted } => {
                if *quoted {
                    out.push('"');
                    out.push_str(raw);
                    out.push('"');
                } else if raw == "*" {
                    // In a pattern `*` is the wildcard; `\*` is the shell's own glob star.
                    out.push_str("\\*");
                } else {
                    out.push_str(raw);
                }
                prev_opaque = true;
            }
            Sym::Redir(op) => out.push_str(op),
            Sym::Star => out.push('*'),
            Sym::Sep => {}
        }
        i += 1;
    }
}

/// Joins words into one sequence with separators.
pub(crate) fn join_words<'a>(words: impl IntoIterator<Item = &'a [Sym]>) -> Vec<Sym> {
    let mut out = Vec::new();
    for (k, w) in words.into_iter().enumerate() {
        if k > 0 {
            out.push(Sym::Sep);
        }
        out.extend_from_slice(w);
    }
    out
}

/// The literal text of a word, if it has no expansion and no wildcard.
pub(crate) fn literal(word: &[Sym]) -> Option<String> {
    word.iter()
        .map(|s| match s {
            Sym::Ch(c) => Some(*c),
            _ => None,
        })
        .collect()
}
