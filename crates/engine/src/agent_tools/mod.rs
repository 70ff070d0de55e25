//! Tools the engine itself serves because they act on the turn rather than on
//! the workspace: `TodoWrite` (the agent's plan, as `todo.updated`),
//! `AskUserQuestion` (the turn waits for the user) and `Task` (a subagent run
//! inside this turn). They use Claude Code's names and input schemas and go
//! through the same permission gate as every other tool.

mod question;
mod subagent;
mod task;
mod todo;

use agentd_model::ToolSpec;
use serde_json::{Value, json};

pub use question::validate_answers;
pub use subagent::{SubagentDef, SubagentModel, Subagents};

/// Which of the engine's own tools a call names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AgentTool {
    TodoWrite,
    AskUserQuestion,
    Task,
}

impl AgentTool {
    const ALL: [Self; 3] = [Self::TodoWrite, Self::AskUserQuestion, Self::Task];

    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|tool| tool.name() == name)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::TodoWrite => "TodoWrite",
            Self::AskUserQuestion => "AskUserQuestion",
            Self::Task => "Task",
        }
    }

    pub(crate) fn spec(self, subagents: Option<&Subagents>) -> ToolSpec {
        let (description, input_schema) = match self {
            Self::TodoWrite => (todo::DESCRIPTION.to_string(), todo::schema()),
            Self::AskUserQuestion => (question::DESCRIPTION.to_string(), question::schema()),
            Self::Task => (task::description(subagents), task::schema()),
        };
        ToolSpec {
            name: self.name().to_string(),
            description,
            input_schema,
        }
    }
}

/// Which engine tools an agent offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentToolSet {
    pub todo_write: bool,
    pub ask_user_question: bool,
    /// `Task`; only offered while the agent's depth is below the subagents'
    /// `max_depth`.
    pub task: bool,
}

impl Default for AgentToolSet {
    fn default() -> Self {
        Self {
            todo_write: true,
            ask_user_question: true,
            task: true,
        }
    }
}

impl AgentToolSet {
    pub const NONE: Self = Self {
        todo_write: false,
        ask_user_question: false,
        task: false,
    };

    pub(crate) fn contains(&self, tool: AgentTool) -> bool {
        match tool {
            AgentTool::TodoWrite => self.todo_write,
            AgentTool::AskUserQuestion => self.ask_user_question,
            AgentTool::Task => self.task,
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = AgentTool> + '_ {
        AgentTool::ALL
            .into_iter()
            .filter(|tool| self.contains(*tool))
    }
}

/// `{"type": "string", "description": …}`.
fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}
