//! Claude Code-style skills: folders holding a `SKILL.md` (YAML front matter
//! with `name` and `description`, then markdown instructions), found in a
//! global and a per-user directory, and the `Skill` tool that loads one.
//!
//! Discovery never fails: a skill that cannot be used is skipped and the reason
//! is returned as a warning, so an operator sees why a skill is missing.
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use agentd_sandbox::confined::{self, ConfinedError, Root};

pub mod front_matter;
mod tool;

pub use tool::SkillTool;

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// Larger `SKILL.md` files are skipped: they would flood the model's context.
pub const MAX_SKILL_FILE_BYTES: u64 = 256 * 1024;
/// Claude Code's limit on a skill's description.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
const MAX_NAME_CHARS: usize = 64;

/// Where a skill was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillSource {
    Global,
    User,
    /// The workspace's `.claude/skills/`: read through the workspace, as
    /// the agent's user, like the agent's own file tools.
    Project,
}

/// One usable skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The skill's folder, canonical (symlinks resolved).
    pub dir: PathBuf,
    /// `allowed-tools` from the front matter, as written (e.g. `Bash(git status)`).
    pub allowed_tools: Vec<String>,
    pub source: SkillSource,
}

impl Skill {
    /// The skill's `SKILL.md`.
    pub fn skill_file(&self) -> PathBuf {
        self.dir.join(SKILL_FILE)
    }
}

/// The skills a session can use, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillSet {
    skills: BTreeMap<String, Skill>,
}

impl SkillSet {
    /// A set of the given skills; a later skill replaces an earlier one of the same name.
    pub fn new(skills: impl IntoIterator<Item = Skill>) -> Self {
        Self {
            skills: skills
                .into_iter()
                .map(|skill| (skill.name.clone(), skill))
                .collect(),
        }
    }

    /// Skills from `global` and then `user`, where a user skill replaces a
    /// global one of the same name. Missing directories give no skills and no
    /// warning; every skipped skill gives a warning saying why.
    pub fn discover(global: Option<&Path>, user: Option<&Path>) -> (SkillSet, Vec<String>) {
        let mut warnings = Vec::new();
        let mut skills = BTreeMap::new();
        let sources = [(global, SkillSource::Global), (user, SkillSource::User)];
        for (root, source) in sources {
            let Some(root) = root else { continue };
            for skill in scan(root, source, &mut warnings) {
                skills.insert(skill.name.clone(), skill);
            }
        }
        (SkillSet { skills }, warnings)
    }

    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    /// The skills, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &Skill> {
        self.skills.values()
    }

    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    pub fn len(&self) -> usize {
        self.skills.len()
    }

    /// The folders of the skills outside the workspace, for the session's
    /// read-only extra roots.
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.iter()
            .filter(|skill| skill.source != SkillSource::Project)
            .map(|skill| skill.dir.clone())
            .collect()
    }

    /// Add those of `skills` whose names are free (a project's skill never
    /// replaces the operator's or the user's); the names of the others.
    pub fn add_missing(&mut self, skills: impl IntoIterator<Item = Skill>) -> Vec<String> {
        let mut taken = Vec::new();
        for skill in skills {
            if self.skills.contains_key(&skill.name) {
                taken.push(skill.name);
            } else {
                self.skills.insert(skill.name.clone(), skill);
            }
        }
        taken
    }

    /// The lines for the system prompt, `- name: description` per skill
    /// (descriptions on one line); `None` when there are no skills.
    pub fn prompt_section(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let lines: Vec<String> = self
            .iter()
            .map(|skill| format!("- {}: {}", skill.name, one_line(&skill.description)))
            .collect();
        Some(lines.join("\n"))
    }
}

/// Whether `name` is a valid skill name: 1–64 lowercase ASCII letters, digits
/// and hyphens, not starting with a hyphen (Claude Code's rule).
pub fn is_valid_name(name: &str) -> bool {
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-';
    !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && !name.starts_with('-')
        && name.bytes().all(allowed)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The skills in one source directory, in folder-name order. The directory
/// is the operator's (server configuration, not the agent's), so it is
/// listed by path; each skill's files are then read beneath its folder.
fn scan(root: &Path, source: SkillSource, warnings: &mut Vec<String>) -> Vec<Skill> {
    let shown = root.display();
    match fs::metadata(root) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(err) => {
            warnings.push(format!("skills directory {shown} cannot be read: {err}"));
            return Vec::new();
        }
        Ok(meta) if !meta.is_dir() => {
            warnings.push(format!("skills directory {shown} is not a directory"));
            return Vec::new();
        }
        Ok(_) => {}
    }
    let listing = root.canonicalize().and_then(|canonical| {
        let entries = fs::read_dir(&canonical)?.collect::<Result<Vec<_>, _>>()?;
        Ok((canonical, entries))
    });
    let (root, mut entries) = match listing {
        Ok(listing) => listing,
        Err(err) => {
            warnings.push(format!("skills directory {shown} cannot be read: {err}"));
            return Vec::new();
        }
    };
    entries.sort_by_key(fs::DirEntry::file_name);
    let mut skills: Vec<Skill> = Vec::new();
    for entry in entries {
        let folder = entry.file_name().to_string_lossy().into_owned();
        if folder.starts_with('.') {
            continue;
        }
        let path = entry.path();
        // Plain files next to the skill folders (a README, say) are not skills.
        if fs::metadata(&path).is_ok_and(|meta| !meta.is_dir()) {
            continue;
        }
        match load(&root, &path, &folder, source) {
            Ok(skill) => match skills.iter().find(|other| other.name == skill.name) {
                Some(other) if other.dir == skill.dir => warnings.push(format!(
                    "skill {} skipped: its folder was already loaded, through a link, as skill {:?}",
                    path.display(),
                    other.name
                )),
                Some(other) => warnings.push(format!(
                    "skill {} skipped: the name {:?} is already used by {}",
                    path.display(),
                    skill.name,
                    other.dir.display()
                )),
                None => skills.push(skill),
            },
            Err(reason) => warnings.push(format!("skill {} skipped: {reason}", path.display())),
        }
    }
    skills
}

/// Load the skill in `path`, a folder (or a link to one) in the canonical `root`.
fn load(root: &Path, path: &Path, folder: &str, source: SkillSource) -> Result<Skill, String> {
    let dir = path
        .canonicalize()
        .map_err(|err| format!("it cannot be resolved: {err}"))?;
    if dir == root {
        return Err("it links to the skills directory itself".into());
    }
    if !dir.starts_with(root) {
        return Err(format!(
            "it links to {}, outside the skills directory {}",
            dir.display(),
            root.display()
        ));
    }
    let text = read_skill_file(&dir)?;
    Skill::from_text(folder, &text, dir, source)
}

impl Skill {
    /// The skill in the folder `dir` (named `folder`) whose `SKILL.md` is
    /// `text`; why not, when it cannot be used.
    pub fn from_text(
        folder: &str,
        text: &str,
        dir: PathBuf,
        source: SkillSource,
    ) -> Result<Skill, String> {
        let (yaml, _body) =
            front_matter::split(text).map_err(|reason| format!("{SKILL_FILE}: {reason}"))?;
        let front =
            front_matter::parse(yaml).map_err(|reason| format!("{SKILL_FILE}: {reason}"))?;
        let name = front
            .name
            .map(|name| name.trim().to_string())
            .unwrap_or_else(|| folder.to_string());
        if !is_valid_name(&name) {
            return Err(format!(
                "the name {name:?} is invalid: use 1-{MAX_NAME_CHARS} lowercase letters, digits \
                 and hyphens, starting with a letter or digit"
            ));
        }
        let description = front.description.unwrap_or_default().trim().to_string();
        if description.is_empty() {
            return Err(format!(
                "{SKILL_FILE} has no `description` in its front matter; it says when to use the skill"
            ));
        }
        let length = description.chars().count();
        if length > MAX_DESCRIPTION_CHARS {
            return Err(format!(
                "its description has {length} characters; at most {MAX_DESCRIPTION_CHARS} are allowed"
            ));
        }
        Ok(Skill {
            name,
            description,
            dir,
            allowed_tools: front.allowed_tools,
            source,
        })
    }
}

/// The text of `dir/SKILL.md`, which must lie in `dir` (the folder the server
/// exposes; a link out of it is refused) and stay under the size cap.
pub(crate) fn read_skill_file(dir: &Path) -> Result<String, String> {
    skill_file_text(read_in_folder(dir, Path::new(SKILL_FILE)))
}

/// A `SKILL.md` as read, or why it cannot be used.
pub(crate) fn skill_file_text(read: Result<Vec<u8>, ConfinedError>) -> Result<String, String> {
    let bytes = read.map_err(|err| match err {
        err if err.io_kind() == Some(std::io::ErrorKind::NotFound) => {
            format!("the folder has no {SKILL_FILE}")
        }
        ConfinedError::Escapes => {
            format!("{SKILL_FILE} links to a place outside the skill's folder")
        }
        ConfinedError::TooLarge { .. } => format!(
            "{SKILL_FILE} is larger than {} KiB",
            MAX_SKILL_FILE_BYTES / 1024
        ),
        ConfinedError::Kind { found, .. } => {
            format!("{SKILL_FILE} is {found}, not a regular file")
        }
        err => format!("{SKILL_FILE} cannot be read: {err}"),
    })?;
    String::from_utf8(bytes).map_err(|_| format!("{SKILL_FILE} is not UTF-8 text"))
}

/// The bytes of `relative` in the skill folder `dir`, opened beneath the
/// folder's descriptor (links may not lead out of it, whatever is swapped in
/// meanwhile), only if a regular file of at most `MAX_SKILL_FILE_BYTES`.
pub(crate) fn read_in_folder(dir: &Path, relative: &Path) -> Result<Vec<u8>, ConfinedError> {
    let folder = Root::open(dir)?;
    confined::read_regular(folder.fd(), relative, MAX_SKILL_FILE_BYTES)
}
