//! `@path` imports in instruction files, as Claude Code reads them: a word
//! starting with `@` outside code spans and fenced blocks names a file
//! relative to the importing one. Imports are followed inside the workspace
//! only, at most [`MAX_IMPORT_DEPTH`] deep; a cycle, an escape or a file that
//! cannot be read leaves a visible note instead.

use std::path::{Path, PathBuf};

use super::files::{ProjectFiles, normalize};

/// Claude Code's limit on nested imports.
pub const MAX_IMPORT_DEPTH: usize = 5;
/// Files imported in all, and imports followed from one file: the rest is
/// a note, so a repository cannot make each turn read without end.
const MAX_IMPORTS: usize = 50;
const MAX_IMPORTS_PER_FILE: usize = 20;
/// Past this much text (the section's cap), nothing more is imported.
const MAX_IMPORTED_CHARS: usize = super::instructions::MAX_INSTRUCTION_CHARS;

/// One instruction file, as included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Included {
    /// Workspace-relative.
    pub path: String,
    pub imported_by: Option<String>,
    pub text: String,
}

/// The import targets written in `text`, in order.
pub fn targets(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Inline code spans alternate with text at each backtick.
        for (index, part) in line.split('`').enumerate() {
            if index % 2 == 1 {
                continue;
            }
            let mut previous = ' ';
            for (at, c) in part.char_indices() {
                if c == '@' && previous.is_whitespace() {
                    let word: String = part[at + 1..]
                        .chars()
                        .take_while(|c| !c.is_whitespace())
                        .collect();
                    let word = word.trim_end_matches(['.', ',', ';', ':', ')', '!', '?']);
                    if !word.is_empty() {
                        found.push(word.to_string());
                    }
                }
                previous = c;
            }
        }
    }
    found
}

/// `path`'s text followed, depth first, by the files it imports.
pub struct Importer<'a> {
    files: &'a ProjectFiles,
    pub included: Vec<Included>,
    pub warnings: Vec<String>,
    imported: usize,
    chars: usize,
}

impl<'a> Importer<'a> {
    pub fn new(files: &'a ProjectFiles) -> Self {
        Self {
            files,
            included: Vec::new(),
            warnings: Vec::new(),
            imported: 0,
            chars: 0,
        }
    }

    /// Include the workspace file `path` (already read as `text`) and its imports.
    pub fn include(&mut self, path: &Path, text: String, imported_by: Option<String>) {
        let mut chain = vec![path.to_path_buf()];
        self.push(path, text, imported_by, &mut chain);
    }

    fn push(
        &mut self,
        path: &Path,
        text: String,
        imported_by: Option<String>,
        chain: &mut Vec<PathBuf>,
    ) {
        let shown = path.display().to_string();
        let mut imports = targets(&text);
        self.chars += text.len();
        let index = self.included.len();
        self.included.push(Included {
            path: shown.clone(),
            imported_by,
            text,
        });
        let mut notes = Vec::new();
        if imports.len() > MAX_IMPORTS_PER_FILE {
            notes.push(format!(
                "[agentd: only the first {MAX_IMPORTS_PER_FILE} imports of {shown} are followed]"
            ));
            imports.truncate(MAX_IMPORTS_PER_FILE);
        }
        for target in imports {
            if let Some(note) = self.follow(path, &target, chain) {
                notes.push(format!("[agentd: import @{target} in {shown} {note}]"));
            }
        }
        if !notes.is_empty() {
            let text = &mut self.included[index].text;
            text.push_str("\n\n");
            text.push_str(&notes.join("\n"));
        }
    }

    /// Follow one import; a note when it was refused.
    fn follow(&mut self, from: &Path, target: &str, chain: &mut Vec<PathBuf>) -> Option<String> {
        if target.starts_with('~') || target.starts_with('/') {
            return Some("not followed: only paths inside the workspace are".into());
        }
        let joined = from.parent().unwrap_or(Path::new("")).join(target);
        let Some(path) = normalize(&joined) else {
            return Some("refused: it leads outside the workspace".into());
        };
        if let Some(start) = chain.iter().position(|p| *p == path) {
            let cycle: Vec<String> = chain[start..]
                .iter()
                .chain([&path])
                .map(|p| p.display().to_string())
                .collect();
            return Some(format!("refused: an import cycle ({})", cycle.join(" → ")));
        }
        let shown = path.display().to_string();
        if self.included.iter().any(|i| i.path == shown) {
            return None;
        }
        if self.imported >= MAX_IMPORTS || self.chars >= MAX_IMPORTED_CHARS {
            return Some("not followed: the instructions are already at their limit".into());
        }
        if chain.len() > MAX_IMPORT_DEPTH {
            return Some(format!(
                "not followed: imports nest at most {MAX_IMPORT_DEPTH} deep"
            ));
        }
        match self.files.read(&path) {
            Ok(Some(text)) => {
                self.imported += 1;
                chain.push(path.clone());
                let by = chain[chain.len() - 2].display().to_string();
                self.push(&path, text, Some(by), chain);
                chain.pop();
                None
            }
            // An `@name` that is no file is most likely a mention, as Claude
            // Code takes it.
            Ok(None) => {
                self.warnings.push(format!(
                    "import @{target} in {}: no such file",
                    from.display()
                ));
                None
            }
            Err(reason) => Some(format!("cannot be read: {reason}")),
        }
    }
}
