//! The instruction files of a session, in Claude Code's order: the user's
//! own, then those of the directories above the workspace (outermost
//! first), then the workspace's `CLAUDE.md`, `CLAUDE.local.md` and
//! `AGENTS.md`, each followed by what it imports. Later files are more
//! specific and so take precedence; the section says so to the model.

use std::path::Path;

use super::ProjectScope;
use super::files::{MAX_PROJECT_FILE_BYTES, ProjectFiles};
use super::imports::{Importer, Included};
use agentd_sandbox::confined::{self, Root};

/// The instruction files read in each directory, in this order.
pub const INSTRUCTION_FILES: [&str; 3] = ["CLAUDE.md", "CLAUDE.local.md", "AGENTS.md"];

/// The most characters of instructions put in the system prompt.
pub const MAX_INSTRUCTION_CHARS: usize = 40_000;

pub(super) const HEADING: &str = "# Project instructions\n\
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
        match read_user_file(path) {
            Ok(Some(text)) => included.push(Included {
                path: "the user's CLAUDE.md".into(),
                imported_by: None,
                text,
            }),
            Ok(None) => {}
            Err(reason) => warnings.push(format!("{}: {reason}", path.display())),
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
pub(super) fn render(included: &[Included]) -> String {
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

/// The user's own file in the operator's data dir: opened beneath its
/// folder, only a regular file (a FIFO there cannot block the server), capped.
fn read_user_file(path: &Path) -> Result<Option<String>, String> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(None);
    };
    let folder = match Root::open(dir) {
        Ok(folder) => folder,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err.to_string()),
    };
    match confined::read_regular(folder.fd(), Path::new(name), MAX_PROJECT_FILE_BYTES) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(err) if err.io_kind() == Some(std::io::ErrorKind::NotFound) => Ok(None),
        Err(err) => Err(err.to_string()),
    }
}
