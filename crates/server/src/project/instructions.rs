//! The instruction files of a session, in Claude Code's order: the user's
//! own, then those of the directories above the workspace (outermost
//! first), then the workspace's `CLAUDE.md`, `CLAUDE.local.md` and
//! `AGENTS.md`, each followed by what it imports. Later files are more
//! specific and so take precedence; the section says so to the model.

use std::path::Path;

use super::ProjectScope;
use super::files::{MAX_PROJECT_FILE_BYTES, ProjectFiles};
use super::imports::{Importer, Included};

/// The instruction files read in each directory, in this order.
pub const INSTRUCTION_FILES: [&str; 3] = ["CLAUDE.md", "CLAUDE.local.md", "AGENTS.md"];

/// The most characters of instructions put in the system prompt.
pub const MAX_INSTRUCTION_CHARS: usize = 40_000;

const HEADING: &str = "# Project instructions\n\
The instruction files below were found for this session; later ones are more specific and \
take precedence over earlier ones. They override the defaults above: follow them exactly as \
written.";

/// The prompt section, `None` when there are no instruction files.
pub fn gather(
    files: &ProjectFiles,
    scope: &ProjectScope,
    warnings: &mut Vec<String>,
) -> Option<String> {
    let mut included: Vec<Included> = Vec::new();
    if let Some(path) = &scope.user_file {
        match std::fs::read(path) {
            Ok(bytes) if bytes.len() as u64 <= MAX_PROJECT_FILE_BYTES => {
                included.push(Included {
                    path: "the user's CLAUDE.md".into(),
                    imported_by: None,
                    text: String::from_utf8_lossy(&bytes).into_owned(),
                });
            }
            Ok(_) => warnings.push(format!("{} is too large to include", path.display())),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => warnings.push(format!("{} cannot be read: {err}", path.display())),
        }
    }
    for dir in &scope.parents {
        for name in INSTRUCTION_FILES {
            match files.read_above(dir, name) {
                Ok(Some(text)) => included.push(Included {
                    path: dir.join(name).display().to_string(),
                    imported_by: None,
                    text,
                }),
                Ok(None) => {}
                Err(reason) => warnings.push(format!("{}/{name}: {reason}", dir.display())),
            }
        }
    }
    let mut importer = Importer::new(files);
    for name in INSTRUCTION_FILES {
        match files.read(Path::new(name)) {
            Ok(Some(text)) => importer.include(Path::new(name), text, None),
            Ok(None) => {}
            Err(reason) => importer.included.push(Included {
                path: name.into(),
                imported_by: None,
                text: format!("[agentd: {name} cannot be read: {reason}]"),
            }),
        }
    }
    warnings.append(&mut importer.warnings);
    included.append(&mut importer.included);
    included.retain(|file| !file.text.trim().is_empty());
    if included.is_empty() {
        return None;
    }
    Some(render(&included))
}

/// The section, cut at [`MAX_INSTRUCTION_CHARS`] with a note saying what
/// was left out.
fn render(included: &[Included]) -> String {
    let mut out = String::from(HEADING);
    let mut used = 0usize;
    for (index, file) in included.iter().enumerate() {
        let label = match &file.imported_by {
            Some(by) => format!("imported by {by}"),
            None => "instructions".into(),
        };
        let text = file.text.trim();
        let room = MAX_INSTRUCTION_CHARS.saturating_sub(used);
        out.push_str(&format!("\n\nContents of {} ({label}):\n\n", file.path));
        let length = text.chars().count();
        if length <= room {
            out.push_str(text);
            used += length;
            continue;
        }
        let kept: String = text.chars().take(room).collect();
        out.push_str(&kept);
        let left = length - room;
        let rest: usize = included[index + 1..]
            .iter()
            .map(|f| f.text.trim().chars().count())
            .sum();
        let others: Vec<&str> = included[index + 1..]
            .iter()
            .map(|f| f.path.as_str())
            .collect();
        let also = if others.is_empty() {
            String::new()
        } else {
            format!(" and all of {} ({rest} characters)", others.join(", "))
        };
        out.push_str(&format!(
            "\n\n[agentd: the instructions are cut at {MAX_INSTRUCTION_CHARS} characters: \
             the last {left} characters of {}{also} are left out]",
            file.path
        ));
        break;
    }
    out
}
