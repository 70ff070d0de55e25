//! Turns one shell word into symbols (quote removal, expansions kept opaque) and finds
//! the commands hidden inside it.

use brush_parser::ast;
use brush_parser::word::{
    self, Parameter, ParameterExpr, ParameterTransformOp, WordPiece, WordPieceWithSource,
};

use super::bash::{Analyzer, merge};
use super::syms::Sym;
use super::wrappers;

const ARITH_HAZARD: &str =
    "arithmetic evaluation can run commands hidden in variable values (`a[$(…)]`)";

impl Analyzer {
    /// The symbols of a word, and why (if at all) no rule may allow a command using it.
    /// Command substitutions inside the word are recorded as parts of their own.
    pub(crate) fn word(&mut self, raw: &str) -> (Vec<Sym>, Option<String>) {
        let mut out = Vec::new();
        let mut blocker = None;
        match word::parse(raw, &Default::default()) {
            Ok(pieces) => {
                for p in &pieces {
                    self.piece(p, raw, false, &mut out, &mut blocker);
                }
            }
            Err(e) => {
                out.push(Sym::opaque(raw, false));
                blocker = Some(format!("could not parse the word `{raw}`: {e}"));
            }
        }
        (out, blocker)
    }

    /// Finds commands hidden in a string that the shell expands (a here-document body).
    pub(crate) fn heredoc(&mut self, body: &str) -> Option<String> {
        match word::parse_heredoc(body, &Default::default()) {
            Ok(pieces) => {
                let (mut out, mut blocker) = (Vec::new(), None);
                for p in &pieces {
                    self.piece(p, body, true, &mut out, &mut blocker);
                }
                blocker
            }
            Err(e) => Some(format!("could not parse a here-document: {e}")),
        }
    }

    /// Checks an arithmetic expression: only plain numbers and operators are harmless.
    pub(crate) fn arith(&mut self, expr: &str) -> Option<String> {
        let mut blocker = self.word(expr).1;
        if !expr
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_whitespace() || "+-*/%()<>=!&|^~?:,".contains(c))
        {
            merge(&mut blocker, Some(ARITH_HAZARD.to_owned()));
        }
        blocker
    }

    /// Checks a variable assignment written before a command or alone.
    pub(crate) fn assignment(&mut self, a: &ast::Assignment) -> Option<String> {
        let mut blocker = match &a.name {
            ast::AssignmentName::VariableName(name) => wrappers::sets_var(name),
            ast::AssignmentName::ArrayElementName(name, index) => {
                let mut blocker = wrappers::sets_var(name);
                if !index.chars().all(|c| c.is_ascii_digit()) {
                    merge(&mut blocker, Some(ARITH_HAZARD.to_owned()));
                }
                blocker
            }
        };
        match &a.value {
            ast::AssignmentValue::Scalar(w) => merge(&mut blocker, self.word(&w.value).1),
            ast::AssignmentValue::Array(items) => {
                for (key, w) in items {
                    if let Some(k) = key {
                        merge(&mut blocker, self.word(&k.value).1);
                    }
                    merge(&mut blocker, self.word(&w.value).1);
                }
            }
        }
        blocker
    }

    fn piece(
        &mut self,
        p: &WordPieceWithSource,
        raw: &str,
        quoted: bool,
        out: &mut Vec<Sym>,
        blocker: &mut Option<String>,
    ) {
        let source = raw.get(p.start_index..p.end_index).unwrap_or(raw);
        match &p.piece {
            WordPiece::Text(t) if quoted => out.extend(t.chars().map(Sym::Ch)),
            WordPiece::Text(t) => self.unquoted_text(t, out),
            WordPiece::SingleQuotedText(t) => out.extend(t.chars().map(Sym::Ch)),
            WordPiece::AnsiCQuotedText(t) => {
                if t.contains('\\') {
                    out.push(Sym::opaque(source, false));
                } else {
                    out.extend(t.chars().map(Sym::Ch));
                }
            }
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                for q in inner {
                    self.piece(q, raw, true, out, blocker);
                }
            }
            WordPiece::TildeExpansion(_) => out.push(Sym::opaque(source, quoted)),
            WordPiece::ParameterExpansion(expr) => {
                merge(blocker, self.parameter(expr));
                out.push(Sym::opaque(source, quoted));
            }
            WordPiece::CommandSubstitution(src) | WordPiece::BackquotedCommandSubstitution(src) => {
                self.nested_program(src);
                out.push(Sym::opaque(source, quoted));
            }
            WordPiece::EscapeSequence(e) => {
                // `\x` stands for `x`; a backslash-newline is removed.
                out.extend(e.chars().skip(1).filter(|c| *c != '\n').map(|c| {
                    if self.pattern && c == '*' && !quoted {
                        // In a pattern `\*` is the shell's glob star, not the wildcard.
                        Sym::opaque("*", false)
                    } else {
                        Sym::Ch(c)
                    }
                }));
            }
            WordPiece::ArithmeticExpression(e) => {
                merge(blocker, self.arith(&e.value));
                out.push(Sym::opaque(source, quoted));
            }
        }
    }

    /// Unquoted text: glob characters, bracket expressions, brace expansions and extended
    /// globs are opaque; in a pattern an unquoted `*` is the wildcard.
    fn unquoted_text(&self, t: &str, out: &mut Vec<Sym>) {
        let chars: Vec<char> = t.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let group_end = match c {
                '@' | '!' | '+' | '*' | '?' if chars.get(i + 1) == Some(&'(') => {
                    closing(&chars, i + 1, '(', ')')
                }
                '[' => chars[i + 1..]
                    .iter()
                    .position(|&d| d == ']')
                    .map(|k| i + 1 + k),
                '{' => closing(&chars, i, '{', '}').filter(|&end| {
                    let inner: String = chars[i + 1..end].iter().collect();
                    inner.contains(',') || inner.contains("..")
                }),
                _ => None,
            };
            if let Some(end) = group_end {
                out.push(Sym::opaque(
                    chars[i..=end].iter().collect::<String>(),
                    false,
                ));
                i = end + 1;
                continue;
            }
            out.push(match c {
                '*' if self.pattern => Sym::Star,
                '*' | '?' => Sym::opaque(c.to_string(), false),
                _ => Sym::Ch(c),
            });
            i += 1;
        }
    }

    /// Checks a `${…}` expansion; nested words (`${x:-$(cmd)}`) are searched for commands.
    fn parameter(&mut self, e: &ParameterExpr) -> Option<String> {
        let parts = ParameterParts::of(e);
        let mut blocker = parts.blocker;
        for expr in parts.arith {
            merge(&mut blocker, self.arith(expr));
        }
        if parts.indirect {
            merge(
                &mut blocker,
                Some("`${!var}` expands a variable named at run time".to_owned()),
            );
        }
        if let Some(Parameter::NamedWithIndex { index, .. }) = parts.param
            && !index.chars().all(|c| c.is_ascii_digit())
        {
            merge(&mut blocker, Some(ARITH_HAZARD.to_owned()));
        }
        for s in parts.nested {
            merge(&mut blocker, self.word(s).1);
        }
        blocker
    }
}

/// What a `${…}` expansion is made of, for [`Analyzer::parameter`].
struct ParameterParts<'a> {
    param: Option<&'a Parameter>,
    indirect: bool,
    /// Words inside it (defaults, patterns, replacements).
    nested: Vec<&'a str>,
    /// Arithmetic inside it (substring offsets and lengths).
    arith: Vec<&'a str>,
    /// Why it cannot be allowed by a rule, whatever the rest says.
    blocker: Option<String>,
}

impl<'a> ParameterParts<'a> {
    fn of(e: &'a ParameterExpr) -> Self {
        use ParameterExpr as P;
        let mut parts = ParameterParts {
            param: None,
            indirect: false,
            nested: Vec::new(),
            arith: Vec::new(),
            blocker: None,
        };
        let (param, indirect) = match e {
            P::AssignDefaultValues { parameter, .. } => {
                parts.blocker = Some("`${var:=…}` assigns a variable".to_owned());
                (Some(parameter), false)
            }
            P::ReplaceSubstring {
                parameter,
                indirect,
                pattern,
                replacement,
                ..
            } => {
                parts.nested.push(pattern);
                parts.nested.extend(replacement.as_deref());
                (Some(parameter), *indirect)
            }
            P::Substring {
                parameter,
                indirect,
                offset,
                length,
            } => {
                parts.arith.push(&offset.value);
                parts
                    .arith
                    .extend(length.as_ref().map(|l| l.value.as_str()));
                (Some(parameter), *indirect)
            }
            P::Transform {
                parameter,
                indirect,
                op,
            } => {
                if matches!(op, ParameterTransformOp::PromptExpand) {
                    parts.blocker =
                        Some("`${var@P}` runs command substitutions in the value".to_owned());
                }
                (Some(parameter), *indirect)
            }
            P::VariableNames { .. } | P::MemberKeys { .. } => (None, false),
            other => match plain_or_valued(other) {
                Some((parameter, indirect, value)) => {
                    parts.nested.extend(value);
                    (Some(parameter), indirect)
                }
                None => (None, false),
            },
        };
        parts.param = param;
        parts.indirect = indirect;
        parts
    }
}

/// The parameter of a plain `${var}`, or of one with a default, a message or
/// a pattern (that word too); `None` for the other kinds.
fn plain_or_valued(e: &ParameterExpr) -> Option<(&Parameter, bool, Option<&str>)> {
    use ParameterExpr as P;
    match e {
        P::Parameter {
            parameter,
            indirect,
        }
        | P::ParameterLength {
            parameter,
            indirect,
        } => Some((parameter, *indirect, None)),
        P::UseDefaultValues {
            parameter,
            indirect,
            default_value: v,
            ..
        }
        | P::IndicateErrorIfNullOrUnset {
            parameter,
            indirect,
            error_message: v,
            ..
        }
        | P::UseAlternativeValue {
            parameter,
            indirect,
            alternative_value: v,
            ..
        }
        | P::RemoveSmallestSuffixPattern {
            parameter,
            indirect,
            pattern: v,
        }
        | P::RemoveLargestSuffixPattern {
            parameter,
            indirect,
            pattern: v,
        }
        | P::RemoveSmallestPrefixPattern {
            parameter,
            indirect,
            pattern: v,
        }
        | P::RemoveLargestPrefixPattern {
            parameter,
            indirect,
            pattern: v,
        }
        | P::UppercaseFirstChar {
            parameter,
            indirect,
            pattern: v,
        }
        | P::UppercasePattern {
            parameter,
            indirect,
            pattern: v,
        }
        | P::LowercaseFirstChar {
            parameter,
            indirect,
            pattern: v,
        }
        | P::LowercasePattern {
            parameter,
            indirect,
            pattern: v,
        } => Some((parameter, *indirect, v.as_deref())),
        _ => None,
    }
}

/// Index of the bracket closing the one at `open_at`, counting nesting.
fn closing(chars: &[char], open_at: usize, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    for (k, &c) in chars.iter().enumerate().skip(open_at) {
        if c == open {
            depth += 1;
        } else if c == close {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return Some(k);
            }
        }
    }
    None
}
