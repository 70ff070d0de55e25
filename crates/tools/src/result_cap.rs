//! The one cap on what a tool call's result puts into the model's context,
//! and its one truncation note. Built-in tools cap their own results (so a
//! tool can keep room for its own "stopped here" note); the engine caps every
//! result again on its way to the model (agent tools, hook output, MCP), and
//! a result capped once is left as it is.

use crate::ToolResult;

/// Default cap, in characters, on a result put into the model's context.
pub const DEFAULT_RESULT_CAP: usize = 30_000;

/// How the note that ends a capped text begins.
const NOTE_START: &str = "\n\n[output truncated: ";
/// How it ends.
const NOTE_END: &str = " characters cut]";

/// Cap `text` at `cap` characters, saying how much was cut.
pub(crate) fn cap_chars(text: String, cap: usize) -> String {
    let Some((cut_at, _)) = text.char_indices().nth(cap) else {
        return text;
    };
    if capped_already(&text, cap) {
        return text;
    }
    let total = text.chars().count();
    let mut capped = text[..cut_at].to_string();
    capped.push_str(&format!("{NOTE_START}{} of {total}{NOTE_END}", total - cap));
    capped
}

/// Whether `text` is `cap` characters or fewer followed by this module's note.
fn capped_already(text: &str, cap: usize) -> bool {
    text.rfind(NOTE_START).is_some_and(|at| {
        let note = &text[at + NOTE_START.len()..];
        note.ends_with(NOTE_END) && !note.contains('\n') && text[..at].chars().count() <= cap
    })
}

impl ToolResult {
    /// The result with its content capped at `cap` characters.
    pub fn capped(self, cap: usize) -> Self {
        ToolResult {
            content: cap_chars(self.content, cap),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_chars_keeps_short_text_and_notes_the_cut() {
        assert_eq!(cap_chars("short".into(), 10), "short");
        let capped = cap_chars("ééééé".into(), 2);
        assert!(
            capped.starts_with("éé\n\n[output truncated: 3 of 5 characters cut]"),
            "{capped}"
        );
    }

    #[test]
    fn a_capped_text_is_capped_once() {
        let once = cap_chars("x".repeat(100), 10);
        assert_eq!(
            once,
            format!("{}{NOTE_START}90 of 100{NOTE_END}", "x".repeat(10))
        );
        assert_eq!(cap_chars(once.clone(), 10), once);
        // A longer head is not this cap's work: cut again.
        let again = cap_chars(once, 5);
        assert!(again.starts_with("xxxxx\n\n[output truncated: "), "{again}");
    }
}
