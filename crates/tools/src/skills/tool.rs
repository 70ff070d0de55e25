//! `Skill`: load a skill's instructions into the conversation.
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use agentd_sandbox::PathGuard;
use agentd_sandbox::confined::{self, ConfinedError, Root};
use async_trait::async_trait;
use rustix::fs::{FileType, Mode, OFlags};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    MAX_SKILL_FILE_BYTES, SKILL_FILE, Skill, SkillSet, SkillSource, front_matter, skill_file_text,
};
use crate::tool_result::run_blocking;
use crate::{ToolContext, ToolResult, TypedTool};

/// Supporting files listed with a skill's instructions.
const MAX_LISTED_FILES: usize = 50;
/// Entries visited when listing a skill's folder, so a huge folder stays cheap.
const MAX_VISITED_ENTRIES: usize = 5_000;
const MAX_LIST_DEPTH: usize = 8;

#[derive(Debug, Deserialize)]
pub(crate) struct SkillInput {
    skill: String,
    /// A supporting file, relative to the skill's folder.
    #[serde(default)]
    file: Option<String>,
}

/// The `Skill` tool over a session's skills.
#[derive(Debug, Clone)]
pub struct SkillTool {
    skills: SkillSet,
    description: String,
}

impl SkillTool {
    pub fn new(skills: SkillSet) -> Self {
        let base = Self::DESCRIPTION;
        let description = format!("{base}\n\nAvailable skills: {}.", names(&skills));
        Self {
            skills,
            description,
        }
    }
}

#[async_trait]
impl TypedTool for SkillTool {
    const NAME: &'static str = "Skill";
    const DESCRIPTION: &'static str = "Load a skill: packaged instructions for a kind of task. Call it with \
the skill's name before doing a task the skill covers, then follow the instructions it returns. \
The result starts with the skill's folder and its supporting files; read one by calling Skill \
again with `file` set to its path relative to the folder. Scripts there can be run with Bash.";
    const READ_ONLY: bool = true;
    const REQUIRED: &'static [&'static str] = &["skill"];
    type Input = SkillInput;

    fn full_description(&self) -> &str {
        &self.description
    }

    fn properties() -> Value {
        json!({
            "skill": {"type": "string", "description": "The skill's name, e.g. \"pdf\"."},
            "file": {"type": "string", "description": "A supporting file of the skill, relative to its folder (omit to load the instructions)."}
        })
    }

    async fn run(&self, input: SkillInput, ctx: &ToolContext) -> Result<ToolResult, String> {
        // Models sometimes write a skill the way a user invokes it: `/name`.
        let name = input.skill.trim().trim_start_matches('/');
        let Some(skill) = self.skills.get(name) else {
            return Err(format!(
                "unknown skill {name:?}; available skills: {}",
                names(&self.skills)
            ));
        };
        let skill = skill.clone();
        let folder = Folder::of(&skill, ctx);
        let file = input.file;
        Ok(run_blocking(ctx, move || match file {
            Some(file) => read_supporting_file(&skill, &folder, &file),
            None => load_instructions(&skill, &folder),
        })
        .await)
    }
}

fn names(skills: &SkillSet) -> String {
    if skills.is_empty() {
        return "none".to_string();
    }
    let names: Vec<&str> = skills.iter().map(|skill| skill.name.as_str()).collect();
    names.join(", ")
}

/// A file inside the skill's folder (links followed only while they stay in
/// it), as text, capped like `SKILL.md`.
fn read_supporting_file(skill: &Skill, folder: &Folder, file: &str) -> Result<String, String> {
    let refused = |reason: &str| format!("skill {:?}: cannot read {file:?}: {reason}", skill.name);
    let bytes = folder.read(Path::new(file)).map_err(|err| match err {
        ConfinedError::Escapes => refused("it is outside the skill's folder"),
        ConfinedError::Kind { found, .. } => {
            refused(&format!("not a file ({found}, not a regular file)"))
        }
        ConfinedError::TooLarge { .. } => refused(&format!(
            "larger than {} KiB",
            super::MAX_SKILL_FILE_BYTES / 1024
        )),
        err => refused(&err.to_string()),
    })?;
    String::from_utf8(bytes).map_err(|_| refused("not UTF-8 text"))
}

/// The skill's folder, its other files, then the body of its `SKILL.md`.
fn load_instructions(skill: &Skill, folder: &Folder) -> Result<String, String> {
    let unusable = |reason: String| format!("skill {:?} cannot be loaded: {reason}", skill.name);
    let text = skill_file_text(folder.read(Path::new(SKILL_FILE))).map_err(unusable)?;
    let (_, body) =
        front_matter::split(&text).map_err(|reason| unusable(format!("{SKILL_FILE}: {reason}")))?;
    let mut out = format!("Base directory for this skill: {}\n", skill.dir.display());
    let (files, total) = list_files(folder);
    if files.is_empty() {
        out.push_str("The folder has no other files.\n");
    } else {
        out.push_str("Other files in the folder (relative to it; read them as needed):\n");
        for file in &files {
            out.push_str(&format!("- {file}\n"));
        }
        if total > files.len() {
            out.push_str(&format!("- … and {} more\n", total - files.len()));
        }
    }
    out.push('\n');
    out.push_str(body.trim_end());
    Ok(out)
}

/// Up to `MAX_LISTED_FILES` files under `dir` other than its `SKILL.md`,
/// relative and sorted, and how many were found in all. Hidden entries and
/// symlinks are left out: the agent could not read links that leave the folder.
fn list_files(folder: &Folder) -> (Vec<String>, usize) {
    let mut lister = Lister::default();
    // Listed beneath the folder's descriptor, so a subfolder swapped for a
    // link cannot show another place's names.
    let _ = folder.with(|fd| {
        lister.walk(fd, Path::new(""), "", 0);
        Ok(())
    });
    (lister.files, lister.total)
}

/// Where a skill's files are read: its own folder (the operator's, by
/// path), or for a project's skill its folder beneath the workspace, as the
/// agent's user, like the file tools read.
enum Folder {
    Host(PathBuf),
    Workspace(PathGuard, PathBuf),
}

impl Folder {
    fn of(skill: &Skill, ctx: &ToolContext) -> Self {
        match skill.source {
            SkillSource::Project => Folder::Workspace(ctx.guard.clone(), skill.dir.clone()),
            SkillSource::Global | SkillSource::User => Folder::Host(skill.dir.clone()),
        }
    }

    /// `op` on the folder's descriptor.
    fn with<T>(
        &self,
        op: impl FnOnce(BorrowedFd<'_>) -> Result<T, ConfinedError>,
    ) -> Result<T, ConfinedError> {
        match self {
            Folder::Host(dir) => op(Root::open(dir)?.fd()),
            // Through real directories only: the agent cannot swap the
            // folder for a link to a place its deny rules protect.
            Folder::Workspace(guard, dir) => guard.confined(dir, |workspace, relative| {
                let flags = OFlags::RDONLY | OFlags::DIRECTORY;
                let folder = confined::open_no_links(workspace, relative, flags, Mode::empty())?;
                op(folder.as_fd())
            }),
        }
    }

    /// A file of the folder (links followed only while they stay in it), capped.
    fn read(&self, relative: &Path) -> Result<Vec<u8>, ConfinedError> {
        self.with(|fd| confined::read_regular(fd, relative, MAX_SKILL_FILE_BYTES))
    }
}

#[derive(Default)]
struct Lister {
    files: Vec<String>,
    total: usize,
    visited: usize,
}

impl Lister {
    fn walk(&mut self, folder: BorrowedFd<'_>, relative: &Path, prefix: &str, depth: usize) {
        let Ok(mut entries) = confined::list_dir(folder, relative) else {
            return;
        };
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for entry in entries {
            self.visited += 1;
            if self.visited > MAX_VISITED_ENTRIES {
                return;
            }
            let name = entry.name.to_string_lossy().into_owned();
            if name.starts_with('.') || (depth == 0 && name == SKILL_FILE) {
                continue;
            }
            let shown = format!("{prefix}{name}");
            match entry.stat.as_ref().map(confined::file_type) {
                Some(FileType::Directory) if depth < MAX_LIST_DEPTH => {
                    let inner = relative.join(&entry.name);
                    self.walk(folder, &inner, &format!("{shown}/"), depth + 1);
                }
                Some(FileType::RegularFile) => {
                    self.total += 1;
                    if self.files.len() < MAX_LISTED_FILES {
                        self.files.push(shown);
                    }
                }
                _ => {}
            }
        }
    }
}
