//! What a workspace says about itself, the way Claude Code reads a
//! repository: instruction files (`CLAUDE.md`, `AGENTS.md` with `@imports`),
//! and under `.claude/` its settings (rules and hooks), slash commands,
//! subagents and skills, and `.mcp.json` servers.
//!
//! The workspace belongs to the agent, which can rewrite any of these files
//! between turns. So every file is read through the workspace's open
//! descriptor, as the agent's user, links followed only while they stay
//! beneath it; and what a project may add is bounded: instructions,
//! commands, agents, skills and deny/ask rules only narrow or describe the
//! work, while allow rules, hooks and MCP servers (things that act) need a
//! profile with `trust_project = true`, and even then run in the sandbox and
//! never outrank the operator's deny rules.

mod agents;
mod commands;
mod files;
mod imports;
mod instructions;
mod mcp;
mod session;
mod settings;
mod skills;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::PathBuf;

use agentd_policy::hooks::HookConfig;
use agentd_tools::Skill;
use agentd_tools::mcp::McpServerConfig;

pub use agents::ProjectAgent;
pub use commands::SlashCommands;
pub use files::ProjectFiles;

/// Everything a turn takes from its workspace.
#[derive(Debug, Default)]
pub struct Project {
    /// The system prompt's instruction section, capped.
    pub instructions: Option<String>,
    /// `{{file:PATH}}` values for the prompt templates.
    pub files: BTreeMap<String, String>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub ask: Vec<String>,
    /// Run in the sandbox (see `HookConfig::sandboxed`).
    pub hooks: Vec<HookConfig>,
    pub mcp_servers: Vec<McpServerConfig>,
    /// A hash of `.mcp.json`: whether its servers changed.
    pub mcp_fingerprint: u64,
    pub agents: Vec<ProjectAgent>,
    pub commands: SlashCommands,
    pub skills: Vec<Skill>,
    /// What was skipped and why, for the operator's log.
    pub warnings: Vec<String>,
}

/// What a profile lets the project contribute, and where the rest comes from.
#[derive(Debug, Clone, Default)]
pub struct ProjectScope {
    /// `project_config`: instructions, commands, agents, skills, deny/ask.
    pub read: bool,
    /// `trust_project`: also allow rules, hooks and MCP servers.
    pub trusted: bool,
    /// Whether the profile's commands run in the sandbox: a project's hooks
    /// and MCP servers run only there, so without it they are not taken.
    pub sandboxed: bool,
    /// The owner's own instructions (`<data dir>/users/NAME/CLAUDE.md`), read
    /// by the server: the operator's directory, not the agent's.
    pub user_file: Option<PathBuf>,
    /// Directories above the workspace, outermost first, whose instruction
    /// files count too (up to the workspace root it was opened under).
    pub parents: Vec<PathBuf>,
    /// `{{file:PATH}}` names the templates use.
    pub template_files: Vec<String>,
}

/// Read what `scope` allows of the workspace behind `files`. Blocking.
pub fn load(files: &ProjectFiles, scope: &ProjectScope) -> Project {
    let mut project = Project::default();
    for name in &scope.template_files {
        let value = files.template_file(name);
        project.files.insert(name.clone(), value);
    }
    if !scope.read {
        return project;
    }
    project.instructions = instructions::gather(files, scope, &mut project.warnings);
    settings::apply(files, scope, &mut project);
    if scope.trusted && scope.sandboxed {
        mcp::apply(files, &mut project);
    }
    project.commands = commands::discover(files, &mut project.warnings);
    project.agents = agents::discover(files, &mut project.warnings);
    project.skills = skills::discover(files, &mut project.warnings);
    project
}
