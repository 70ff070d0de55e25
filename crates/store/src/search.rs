//! Finding sessions: the filters of a session list and the words of a
//! full-text search, parsed here once so that no user input ever reaches
//! FTS5's or `tsquery`'s syntax.

use chrono::{DateTime, Utc};

use crate::{SessionRecord, SessionStatus};

/// The most terms (words or quoted phrases) a search may have.
pub const MAX_SEARCH_TERMS: usize = 16;
/// The longest search text, in characters.
pub const MAX_SEARCH_CHARS: usize = 500;

/// What a search looks for: terms that must all occur in one message (or
/// the title) of a session; each term a word or a quoted phrase, kept as its
/// words split at anything not a letter or digit, lowercased. Both backends
/// split documents the same way, so a term like `foo.txt` is the phrase
/// `foo txt` on both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchText {
    terms: Vec<Vec<String>>,
}

impl SearchText {
    /// Plain words, and phrases in double quotes (an unclosed quote runs to
    /// the end). Anything else — operators, `*`, parentheses — is just text
    /// between words. An error says why when there is nothing to search
    /// for or too much.
    pub fn parse(query: &str) -> Result<Self, String> {
        if query.chars().count() > MAX_SEARCH_CHARS {
            return Err(format!("a search is at most {MAX_SEARCH_CHARS} characters"));
        }
        let mut terms = Vec::new();
        for (index, part) in query.split('"').enumerate() {
            // Odd parts were between quotes: one phrase each.
            if index % 2 == 1 {
                terms.push(words(part));
            } else {
                terms.extend(part.split_whitespace().map(words));
            }
        }
        terms.retain(|term| !term.is_empty());
        if terms.is_empty() {
            return Err("a search needs at least one word of letters or digits".into());
        }
        if terms.len() > MAX_SEARCH_TERMS {
            return Err(format!(
                "a search has at most {MAX_SEARCH_TERMS} words or phrases"
            ));
        }
        Ok(Self { terms })
    }

    /// The terms, each its words joined by spaces.
    pub fn terms(&self) -> Vec<String> {
        self.terms.iter().map(|words| words.join(" ")).collect()
    }

    /// An FTS5 query: each term a quoted string of letters, digits and
    /// spaces only (no quote to escape), side by side (AND).
    pub fn fts5_query(&self) -> String {
        let quoted: Vec<String> = self.terms().iter().map(|t| format!("\"{t}\"")).collect();
        quoted.join(" ")
    }
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Which of an owner's sessions to list, and how many.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionFilter {
    pub owner: String,
    /// Ranked by relevance when set; else pinned first, then newest first.
    pub text: Option<SearchText>,
    pub status: Option<SessionStatus>,
    /// Created at or after.
    pub since: Option<DateTime<Utc>>,
    /// Created before.
    pub until: Option<DateTime<Utc>>,
    pub workspace: Option<String>,
    /// Has this tag.
    pub tag: Option<String>,
    pub pinned: Option<bool>,
    /// `None`: archived or not.
    pub archived: Option<bool>,
    /// Without `text`: the id of the last session of the previous page (an
    /// id not of the owner's sessions is `NotFound`).
    pub before: Option<String>,
    /// With `text`: how many ranked results to skip.
    pub offset: u32,
    pub limit: u32,
}

impl SessionFilter {
    /// All of `owner`'s sessions, the first `limit`.
    pub fn of(owner: &str, limit: u32) -> Self {
        Self {
            owner: owner.to_owned(),
            text: None,
            status: None,
            since: None,
            until: None,
            workspace: None,
            tag: None,
            pinned: None,
            archived: None,
            before: None,
            offset: 0,
            limit,
        }
    }

    /// A LIKE pattern matching `tags` (a JSON array) holding `tag` exactly.
    pub(crate) fn tag_pattern(&self) -> Option<String> {
        self.tag.as_ref().map(|tag| {
            let json = serde_json::Value::String(tag.clone()).to_string();
            let mut escaped = String::with_capacity(json.len() + 2);
            for c in json.chars() {
                if matches!(c, '%' | '_' | '\\') {
                    escaped.push('\\');
                }
                escaped.push(c);
            }
            format!("%{escaped}%")
        })
    }
}

/// A session found, with the text around the match when searching.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionHit {
    pub session: SessionRecord,
    /// A short extract of the best matching message or title.
    pub snippet: Option<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn words_and_phrases() {
        let text = SearchText::parse(r#"Deploy "to staging" foo.txt"#).unwrap();
        assert_eq!(text.terms(), ["deploy", "to staging", "foo txt"]);
        assert_eq!(text.fts5_query(), r#""deploy" "to staging" "foo txt""#);
    }

    #[test]
    fn syntax_is_only_text() {
        let text = SearchText::parse(r#""a OR b* NEAR( x:y ^z -w"#).unwrap();
        assert_eq!(text.terms(), ["a or b near x y z w"]);
        let text = SearchText::parse("NEAR( OR AND' \\ ; --").unwrap();
        assert_eq!(text.terms(), ["near", "or", "and"]);
    }

    #[test]
    fn nothing_or_too_much_is_refused() {
        assert!(SearchText::parse("  * \"\" () ").is_err());
        assert!(SearchText::parse(&"a ".repeat(17)).is_err());
        assert!(SearchText::parse(&"a".repeat(501)).is_err());
    }

    #[test]
    fn tag_pattern_escapes_like() {
        let mut filter = SessionFilter::of("u", 1);
        filter.tag = Some("a_b%".into());
        assert_eq!(filter.tag_pattern().unwrap(), r#"%"a\_b\%"%"#);
    }
}
