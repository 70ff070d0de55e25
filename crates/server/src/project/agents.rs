//! `.claude/agents/*.md` as subagent types: front matter `name`,
//! `description`, `tools` and `model`, then the agent's system prompt.

use std::path::Path;

use agentd_tools::skills::front_matter;

use super::files::ProjectFiles;

const AGENTS_DIR: &str = ".claude/agents";
const MAX_AGENTS: usize = 50;

/// One agent file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectAgent {
    pub name: String,
    pub description: String,
    pub prompt: String,
    pub tools: Option<Vec<String>>,
    /// As written (`sonnet`, `inherit`, a configured model's name…).
    pub model: Option<String>,
}

pub fn discover(files: &ProjectFiles, warnings: &mut Vec<String>) -> Vec<ProjectAgent> {
    let mut agents: Vec<ProjectAgent> = Vec::new();
    for (file, is_dir) in files.list(Path::new(AGENTS_DIR)) {
        let Some(stem) = file.strip_suffix(".md").filter(|_| !is_dir) else {
            continue;
        };
        if agents.len() >= MAX_AGENTS {
            warnings.push(format!(
                "{AGENTS_DIR}: more than {MAX_AGENTS} agents; the rest skipped"
            ));
            break;
        }
        let path = Path::new(AGENTS_DIR).join(&file);
        let text = match files.read(&path) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(reason) => {
                warnings.push(format!("{}: {reason}", path.display()));
                continue;
            }
        };
        match parse(stem, &text) {
            Ok(agent) if agents.iter().any(|a| a.name == agent.name) => warnings.push(format!(
                "{}: the name {:?} is taken by another agent file",
                path.display(),
                agent.name
            )),
            Ok(agent) => agents.push(agent),
            Err(reason) => warnings.push(format!("{}: skipped: {reason}", path.display())),
        }
    }
    agents
}

fn parse(stem: &str, text: &str) -> Result<ProjectAgent, String> {
    let (yaml, body) = front_matter::split(text)?;
    let front = front_matter::parse(yaml)?;
    let name = front
        .name
        .unwrap_or_else(|| stem.to_string())
        .trim()
        .to_string();
    if !agentd_tools::skills::is_valid_name(&name) {
        return Err(format!(
            "the name {name:?} is not lowercase letters, digits and hyphens"
        ));
    }
    let description = front
        .description
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty())
        .ok_or("it has no `description`: it says when to use the agent")?;
    let prompt = body.trim();
    if prompt.is_empty() {
        return Err("it has no system prompt after its front matter".into());
    }
    Ok(ProjectAgent {
        name,
        description,
        prompt: prompt.to_string(),
        tools: front.tools,
        model: front.model.filter(|m| m != "inherit"),
    })
}
