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

/// The order of a list without a search.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SessionOrder {
    /// Pinned first, then newest first (the web UI's sidebar).
    #[default]
    PinnedFirst,
    /// Newest first, pinned or not ("the latest session").
    Newest,
}

/// Where a page of a list ends: the last session's place in the order, as
/// it was when the page was read (a session pinned or unpinned since moves,
/// but the next page neither skips nor repeats another).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListCursor {
    pub pinned: bool,
    pub created_at: DateTime<Utc>,
    pub id: String,
}

impl ListCursor {
    /// The cursor after `session`.
    pub fn after(session: &SessionRecord) -> Self {
        Self {
            pinned: session.pinned,
            created_at: session.created_at,
            id: session.id.clone(),
        }
    }

    /// As text: `{0|1}.{created_at in ms}.{id}` (URL-safe for the ids agentd makes).
    pub fn encode(&self) -> String {
        let pinned = u8::from(self.pinned);
        format!(
            "{pinned}.{}.{}",
            self.created_at.timestamp_millis(),
            self.id
        )
    }

    /// What [`ListCursor::encode`] wrote; `None` for anything else.
    pub fn decode(text: &str) -> Option<Self> {
        let mut parts = text.splitn(3, '.');
        let pinned = match parts.next()? {
            "0" => false,
            "1" => true,
            _ => return None,
        };
        let created_at = DateTime::from_timestamp_millis(parts.next()?.parse().ok()?)?;
        let id = parts.next().filter(|id| !id.is_empty())?.to_owned();
        Some(Self {
            pinned,
            created_at,
            id,
        })
    }
}

/// The longest tag, in characters.
pub const MAX_TAG_CHARS: usize = 32;

/// Messages one `index_pending_search` call indexes at most (SQLite takes
/// them in write transactions of 32), the search's own catch-up and the
/// server's indexer alike.
pub const SEARCH_INDEX_BATCH: u32 = 256;

/// Batches a search indexes at most before it runs: a bound on its wait, far
/// past any backlog the indexer task leaves (it indexes a growing batch a
/// tick while its node is busy, so the queue stops growing at a few
/// thousand messages even when the node is never quiet).
pub(crate) const CATCH_UP_BATCHES: u32 = 256;

/// A tag is 1 to [`MAX_TAG_CHARS`] lowercase ASCII letters, digits, `.`,
/// `_` or `-`, starting with a letter or digit (so the tag filter's pattern
/// over the stored JSON needs no escape): an error saying so otherwise.
pub fn check_tag(tag: &str) -> Result<(), String> {
    let mut chars = tag.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
    if !first_ok || !rest_ok || tag.len() > MAX_TAG_CHARS {
        return Err(format!(
            "tag {tag:?}: 1 to {MAX_TAG_CHARS} lowercase letters, digits, '.', '_' or '-', \
             starting with a letter or digit"
        ));
    }
    Ok(())
}

/// Which of an owner's sessions to list, and how many.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionFilter {
    pub owner: String,
    /// Ranked by relevance when set; else in `order`.
    pub text: Option<SearchText>,
    pub order: SessionOrder,
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
    /// Without `text`: where the previous page ended.
    pub before: Option<ListCursor>,
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
            order: SessionOrder::PinnedFirst,
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
    fn cursors_round_trip_and_others_are_refused() {
        let cursor = ListCursor {
            pinned: true,
            created_at: DateTime::from_timestamp_millis(1_717_000_000_123).unwrap(),
            id: "0190-ab.c".into(),
        };
        assert_eq!(ListCursor::decode(&cursor.encode()), Some(cursor));
        for bad in ["", "nope", "2.1.x", "1.x.y", "0.1.", "0.1"] {
            assert_eq!(ListCursor::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn tag_pattern_escapes_like() {
        let mut filter = SessionFilter::of("u", 1);
        filter.tag = Some("a_b%".into());
        assert_eq!(filter.tag_pattern().unwrap(), r#"%"a\_b\%"%"#);
    }
}
