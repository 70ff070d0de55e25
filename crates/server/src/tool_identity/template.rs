//! The placeholder syntax of tool values (see the module above).

/// A piece of a value: text as written, or a placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Piece {
    Text(String),
    User,
    Session,
    UserToken,
}

/// Why `value` is not a valid tool value (a near miss of a placeholder).
pub(crate) fn check_template(value: &str) -> Result<(), String> {
    parse(value).map(drop)
}

/// `value` as pieces: `{user}`, `{session}`, `{user_token}` are
/// placeholders; `{{name}}` is the text `{name}`; `${...}`, other braces and
/// other `{word}`s (a log format's `{time}`) are text; a `{word}` that is
/// nearly one of the three (a typo, another case) is an error.
pub(super) fn parse(value: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < value.len() {
        let rest = &value[i..];
        let Some(at) = rest.find('{') else {
            text.push_str(rest);
            break;
        };
        text.push_str(&rest[..at]);
        i += at;
        let rest = &value[i..];
        if value[..i].ends_with('$') {
            text.push('{');
            i += 1;
            continue;
        }
        if let Some(word) = rest.strip_prefix("{{").and_then(|r| word_before(r, "}}")) {
            text.push('{');
            text.push_str(word);
            text.push('}');
            i += word.len() + 4;
            continue;
        }
        let Some(word) = word_before(&rest[1..], "}") else {
            text.push('{');
            i += 1;
            continue;
        };
        let piece = match word {
            "user" => Piece::User,
            "session" => Piece::Session,
            "user_token" => Piece::UserToken,
            other if !near_miss(other) => {
                text.push('{');
                text.push_str(other);
                text.push('}');
                i += other.len() + 2;
                continue;
            }
            other => {
                return Err(format!(
                    "unknown placeholder {{{other}}}: agentd fills in {{user}}, {{session}} \
                     and {{user_token}}; write {{{{{other}}}}} for the text {{{other}}}"
                ));
            }
        };
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut text)));
        }
        pieces.push(piece);
        i += word.len() + 2;
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// Whether `word` looks like a misspelt placeholder: one of the three names
/// in another case, or within two edits of one.
fn near_miss(word: &str) -> bool {
    let word = word.to_ascii_lowercase();
    ["user", "session", "user_token"]
        .iter()
        .any(|name| edit_distance(&word, name) <= 2)
}

/// Levenshtein distance (short ASCII words).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(previous + 1).min(row[j] + 1);
        }
    }
    row[b.len()]
}

/// The word (`[A-Za-z0-9_]+`) `s` starts with, when `close` follows it.
fn word_before<'a>(s: &'a str, close: &str) -> Option<&'a str> {
    let len = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (len > 0 && s[len..].starts_with(close)).then(|| &s[..len])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::Piece::{Session, Text, User, UserToken};
    use super::*;

    fn text(s: &str) -> Piece {
        Text(s.into())
    }

    #[test]
    fn placeholders_escapes_and_other_braces() {
        assert_eq!(parse("").unwrap(), []);
        assert_eq!(parse("plain").unwrap(), [text("plain")]);
        assert_eq!(
            parse("Bearer {user_token}").unwrap(),
            [text("Bearer "), UserToken]
        );
        assert_eq!(
            parse("{user}/{session}").unwrap(),
            [User, text("/"), Session]
        );
        // Escapes and text that only looks like a placeholder.
        assert_eq!(parse("{{user}}").unwrap(), [text("{user}")]);
        assert_eq!(parse("{{x}}-{user}").unwrap(), [text("{x}-"), User]);
        assert_eq!(parse("${HOME}/{").unwrap(), [text("${HOME}/{")]);
        assert_eq!(
            parse(r#"{"a":{"b":1}}"#).unwrap(),
            [text(r#"{"a":{"b":1}}"#)]
        );
        assert_eq!(parse("{{user}").unwrap(), [text("{"), User]);
        assert_eq!(parse("{ user }").unwrap(), [text("{ user }")]);
        assert_eq!(parse("é{user}ü").unwrap(), [text("é"), User, text("ü")]);
    }

    #[test]
    fn an_unknown_placeholder_is_refused_with_its_escape() {
        let err = parse("Bearer {user_tokn}").unwrap_err();
        assert!(err.contains("unknown placeholder {user_tokn}"), "{err}");
        assert!(err.contains("{{user_tokn}}"), "{err}");
        assert!(check_template("{User}").is_err());
        assert!(check_template("{sesion}").is_err());
        assert!(check_template("{{User}}").is_ok());
    }

    #[test]
    fn other_words_in_braces_are_left_as_written() {
        // A log format (loguru), a Python format string: not placeholders.
        assert_eq!(
            parse("{time} {level} {message} {name}").unwrap(),
            [text("{time} {level} {message} {name}")]
        );
        assert_eq!(parse("{time}-{user}").unwrap(), [text("{time}-"), User]);
        assert_eq!(parse("{{time}}").unwrap(), [text("{time}")]);
    }
}
