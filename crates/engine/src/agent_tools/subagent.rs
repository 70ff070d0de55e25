//! Subagent definitions: who `Task` can start, with which prompt, tools and model.

use std::sync::Arc;

use agentd_model::ModelClient;

/// The subagent every agent with `Task` can start, unless the config
/// defines one with the same name.
pub const GENERAL_PURPOSE: &str = "general-purpose";

const GENERAL_PURPOSE_PROMPT: &str = "You are a subagent started by a coding agent run by \
agentd, to do one self-contained task in the same workspace with the same sandbox. Use the \
tools to do the task, then end with a concise report: what you found or did, with the file \
paths that matter. Your final message goes back to the agent that started you, not to the \
user.";

/// A model a subagent uses instead of its parent's.
#[derive(Clone)]
pub struct SubagentModel {
    pub client: Arc<dyn ModelClient>,
    /// The provider's model name, sent in requests and used for pricing.
    pub model_name: String,
}

/// One kind of subagent (Claude Code's `subagent_type`).
#[derive(Clone)]
pub struct SubagentDef {
    pub name: String,
    /// Tells the parent model when to use it.
    pub description: String,
    /// The subagent's system prompt.
    pub prompt: String,
    /// The tools it may use, by name; `None`: its parent's tools except
    /// `AskUserQuestion`.
    pub tools: Option<Vec<String>>,
    /// `None`: its parent's model.
    pub model: Option<SubagentModel>,
}

impl std::fmt::Debug for SubagentDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentDef")
            .field("name", &self.name)
            .field("tools", &self.tools)
            .field("model", &self.model.as_ref().map(|m| &m.model_name))
            .finish_non_exhaustive()
    }
}

/// The subagents an agent may start, and how many.
#[derive(Debug, Clone)]
pub struct Subagents {
    defs: Vec<SubagentDef>,
    /// Subagents started per turn, nested ones included.
    pub max_per_turn: u32,
    /// How deep subagents may nest: 1 lets the main agent start subagents
    /// that cannot start their own.
    pub max_depth: u32,
}

impl Subagents {
    /// `defs` plus the built-in `general-purpose` subagent when `defs` does not
    /// redefine it.
    pub fn new(mut defs: Vec<SubagentDef>, max_per_turn: u32, max_depth: u32) -> Self {
        if !defs.iter().any(|d| d.name == GENERAL_PURPOSE) {
            defs.insert(
                0,
                SubagentDef {
                    name: GENERAL_PURPOSE.into(),
                    description: "General-purpose agent for researching questions, searching \
                                  code and doing multi-step tasks on its own."
                        .into(),
                    prompt: GENERAL_PURPOSE_PROMPT.into(),
                    tools: None,
                    model: None,
                },
            );
        }
        Self {
            defs,
            max_per_turn,
            max_depth,
        }
    }

    pub fn get(&self, name: &str) -> Option<&SubagentDef> {
        self.defs.iter().find(|d| d.name == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &SubagentDef> {
        self.defs.iter()
    }

    /// One line per subagent, `- name: description`, for prompts.
    pub fn listing(&self) -> String {
        self.defs
            .iter()
            .map(|d| format!("- {}: {}", d.name, d.description))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Default for Subagents {
    fn default() -> Self {
        Self::new(Vec::new(), 8, 1)
    }
}
