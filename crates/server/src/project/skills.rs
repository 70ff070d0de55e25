//! `.claude/skills/<name>/SKILL.md` as skills, read through the workspace;
//! the Skill tool reads their files the same way (`SkillSource::Project`).

use std::path::Path;

use agentd_tools::skills::SKILL_FILE;
use agentd_tools::{Skill, SkillSource};

use super::files::ProjectFiles;

const SKILLS_DIR: &str = ".claude/skills";
const MAX_SKILLS: usize = 100;

pub fn discover(files: &ProjectFiles, warnings: &mut Vec<String>) -> Vec<Skill> {
    let mut skills: Vec<Skill> = Vec::new();
    for (folder, is_dir) in files.list(Path::new(SKILLS_DIR)) {
        if !is_dir || folder.starts_with('.') {
            continue;
        }
        if skills.len() >= MAX_SKILLS {
            warnings.push(format!(
                "{SKILLS_DIR}: more than {MAX_SKILLS} skills; the rest skipped"
            ));
            break;
        }
        let rel = Path::new(SKILLS_DIR).join(&folder);
        let text = match files.read(&rel.join(SKILL_FILE)) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(reason) => {
                warnings.push(format!("{}/{SKILL_FILE}: {reason}", rel.display()));
                continue;
            }
        };
        let dir = files.workspace().join(&rel);
        match Skill::from_text(&folder, &text, dir, SkillSource::Project) {
            Ok(skill) if skills.iter().any(|s| s.name == skill.name) => warnings.push(format!(
                "{}: the name {:?} is taken by another project skill",
                rel.display(),
                skill.name
            )),
            Ok(skill) => skills.push(skill),
            Err(reason) => warnings.push(format!("skill {} skipped: {reason}", rel.display())),
        }
    }
    skills
}
