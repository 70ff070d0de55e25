//! String replacement shared by `Edit` and `MultiEdit`: exact matching, the
//! uniqueness rule, and loading/saving the file as UTF-8 text.
use agentd_sandbox::confined::{self, ConfinedError, Written};
use serde::Deserialize;

use crate::host_fs::{Target, describe, is_directory, is_not_found};
use crate::tool_result::numbered_line;
use crate::{ToolContext, ToolResult};

/// Largest file Edit and MultiEdit load: the whole text is held in memory,
/// several times over while replacing.
pub(crate) const MAX_EDIT_BYTES: u64 = 256 * 1024 * 1024;

/// One replacement, as the model sends it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct EditSpec {
    pub old_string: String,
    pub new_string: String,
    pub replace_all: Option<bool>,
}

/// The result of applying one edit to a text.
#[derive(Debug)]
pub(crate) struct Applied {
    pub text: String,
    pub replacements: usize,
    /// Byte offset of the first replacement in the new text.
    pub first_at: usize,
}

/// Apply `spec` to `text`. `old_string` must occur exactly once unless
/// `replace_all`; an empty `old_string` only fills an empty file.
pub(crate) fn apply_edit(text: &str, spec: &EditSpec) -> Result<Applied, String> {
    if spec.old_string == spec.new_string {
        return Err(
            "old_string and new_string are identical, so there is nothing to change".into(),
        );
    }
    if spec.old_string.is_empty() {
        if text.is_empty() {
            return Ok(Applied {
                text: spec.new_string.clone(),
                replacements: 1,
                first_at: 0,
            });
        }
        return Err(
            "old_string is empty; that only works for a new or empty file (use Write to \
                    replace a whole file)"
                .into(),
        );
    }
    let (old, new) = match_line_endings(text, spec);
    let count = text.matches(old.as_str()).count();
    if count == 0 {
        return Err(
            "old_string was not found in the file; it must match exactly, including \
                    whitespace and indentation (Read the file to see its current content)"
                .into(),
        );
    }
    let replace_all = spec.replace_all.unwrap_or(false);
    if count > 1 && !replace_all {
        return Err(format!(
            "old_string matches {count} places in the file; include more surrounding lines to \
             make it unique, or set replace_all to true to replace every one"
        ));
    }
    let first_at = text.find(old.as_str()).unwrap_or(0);
    let new_text = if replace_all {
        text.replace(&old, &new)
    } else {
        text.replacen(&old, &new, 1)
    };
    Ok(Applied {
        text: new_text,
        replacements: count,
        first_at,
    })
}

/// Models write `\n`; if only the CRLF form occurs in a CRLF file, use that.
fn match_line_endings(text: &str, spec: &EditSpec) -> (String, String) {
    let plain = (spec.old_string.clone(), spec.new_string.clone());
    if text.contains(&spec.old_string) || !text.contains("\r\n") || !spec.old_string.contains('\n')
    {
        return plain;
    }
    let crlf_old = spec.old_string.replace("\r\n", "\n").replace('\n', "\r\n");
    if text.contains(&crlf_old) {
        (
            crlf_old,
            spec.new_string.replace("\r\n", "\n").replace('\n', "\r\n"),
        )
    } else {
        plain
    }
}

/// Load a file for editing. A missing file reads as empty when `may_create`
/// (the first edit has an empty `old_string`); otherwise it is an error.
pub(crate) fn load_text(file: &Target, may_create: bool) -> Result<String, String> {
    let shown = &file.shown;
    let loaded = file.guard.confined(&file.path, |root, relative| {
        confined::read_regular(root, relative, MAX_EDIT_BYTES)
    });
    let bytes = match loaded {
        Ok(bytes) => bytes,
        Err(err) if is_not_found(&err) => {
            return if may_create {
                Ok(String::new())
            } else {
                Err(format!(
                    "file does not exist: {shown} (use Write to create a file)"
                ))
            };
        }
        Err(err) if is_directory(&err) => {
            return Err(format!("{shown} is a directory, not a file"));
        }
        Err(ConfinedError::Kind { found, .. }) => {
            return Err(format!(
                "{shown} is {found}, not a regular file; only regular files can be edited"
            ));
        }
        Err(ConfinedError::TooLarge { size, .. }) => {
            return Err(format!(
                "{shown} is {size} bytes; files over {} MiB cannot be edited here (use Bash, \
                 e.g. sed, for it)",
                MAX_EDIT_BYTES / (1024 * 1024)
            ));
        }
        Err(err) => return Err(describe(&err, "read", shown)),
    };
    if bytes.contains(&0) {
        return Err(format!(
            "{shown} is a binary file; only text files can be edited"
        ));
    }
    String::from_utf8(bytes)
        .map_err(|_| format!("{shown} is not valid UTF-8 text; it cannot be edited"))
}

/// Replace (or create, with its missing parents) the file at `path` with
/// `text`, atomically: a link swapped in at the name is replaced, never
/// followed, and anything but a regular file there is refused.
pub(crate) fn save_text(file: &Target, text: &str) -> Result<Written, String> {
    let shown = &file.shown;
    file.guard
        .confined_write(&file.path, |root, relative| {
            confined::write_atomic(root, relative, text.as_bytes(), true)
        })
        .map_err(|err| match err {
            err if is_directory(&err) => format!("{shown} is a directory, not a file"),
            ConfinedError::Kind { found, .. } => {
                format!("{shown} is {found}, not a regular file; only regular files can be written")
            }
            err => describe(&err, "write", shown),
        })
}

/// A few numbered lines around an edit, so the model can check the result.
pub(crate) fn snippet(text: &str, first_at: usize, new_string: &str) -> String {
    const CONTEXT_LINES: usize = 3;
    const MAX_SNIPPET_LINES: usize = 30;
    let first_line = text[..first_at.min(text.len())].matches('\n').count() + 1;
    let last_line = first_line + new_string.matches('\n').count();
    let from = first_line.saturating_sub(CONTEXT_LINES).max(1);
    let to = (last_line + CONTEXT_LINES).min(from + MAX_SNIPPET_LINES - 1);
    text.lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line))
        .filter(|(number, _)| (from..=to).contains(number))
        .map(|(number, line)| numbered_line(number, line))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Run `change` on the file the model named in `file_path`, on a blocking
/// thread, and make its outcome the tool's result. Not raced against cancel:
/// a write is short and should not be left half-done.
pub(crate) async fn change_file<F>(
    ctx: &ToolContext,
    file_path: &str,
    change: F,
) -> Result<ToolResult, String>
where
    F: FnOnce(&Target) -> Result<String, String> + Send + 'static,
{
    let target = Target::resolve(ctx, "file_path", file_path)?;
    // Said before anything is read; `save_text` refuses it in any case.
    if ctx.guard.is_read_only(&target.path) {
        let refused = describe(&ConfinedError::ReadOnly, "change", &target.shown);
        return Ok(crate::tool_result::to_result(Err(refused), ctx));
    }
    let outcome = tokio::task::spawn_blocking(move || change(&target))
        .await
        .unwrap_or_else(|err| Err(format!("the tool failed internally: {err}")));
    Ok(crate::tool_result::to_result(outcome, ctx))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(old: &str, new: &str, replace_all: bool) -> EditSpec {
        EditSpec {
            old_string: old.into(),
            new_string: new.into(),
            replace_all: Some(replace_all),
        }
    }

    #[test]
    fn unique_match_is_replaced() {
        let applied = apply_edit("a b c", &spec("b", "B", false)).unwrap();
        assert_eq!(
            (
                applied.text.as_str(),
                applied.replacements,
                applied.first_at
            ),
            ("a B c", 1, 2)
        );
    }

    #[test]
    fn ambiguous_match_needs_replace_all() {
        let err = apply_edit("x x x", &spec("x", "y", false)).unwrap_err();
        assert!(err.contains("matches 3 places"), "{err}");
        assert_eq!(
            apply_edit("x x x", &spec("x", "y", true)).unwrap().text,
            "y y y"
        );
    }

    #[test]
    fn missing_identical_and_empty_old_strings_are_errors() {
        assert!(
            apply_edit("abc", &spec("z", "y", false))
                .unwrap_err()
                .contains("not found")
        );
        assert!(
            apply_edit("abc", &spec("a", "a", false))
                .unwrap_err()
                .contains("identical")
        );
        assert!(
            apply_edit("abc", &spec("", "y", false))
                .unwrap_err()
                .contains("empty")
        );
        assert_eq!(apply_edit("", &spec("", "new", false)).unwrap().text, "new");
    }

    #[test]
    fn crlf_files_match_lf_edits() {
        let applied = apply_edit("one\r\ntwo\r\n", &spec("one\ntwo", "1\n2", false)).unwrap();
        assert_eq!(applied.text, "1\r\n2\r\n");
    }

    #[test]
    fn snippet_shows_numbered_context() {
        let text = (1..=10)
            .map(|n| format!("line{n}"))
            .collect::<Vec<_>>()
            .join("\n");
        let at = text.find("line5").unwrap();
        let shown = snippet(&text, at, "line5");
        assert!(
            shown.starts_with("     2\tline2") && shown.ends_with("     8\tline8"),
            "{shown}"
        );
    }
}
