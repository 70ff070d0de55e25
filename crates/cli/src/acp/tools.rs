//! agentd's tool calls as ACP shows them: a kind, a title, the files they
//! touch (locations) and, for file edits, the diff.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    Diff, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use serde_json::Value;

use crate::output::summarize_input;

/// One agentd tool call, as far as ACP needs it.
pub struct Call<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub input: &'a Value,
    /// Relative paths are the workspace's (known for a local session).
    pub workspace: Option<&'a Path>,
}

impl Call<'_> {
    /// The `tool_call` that announces it.
    pub fn announce(&self, status: ToolCallStatus) -> ToolCall {
        ToolCall::new(self.id.to_string(), self.title())
            .kind(kind(self.name))
            .status(status)
            .locations(self.locations())
            .content(self.diffs())
            .raw_input(self.input.clone())
    }

    /// The same call as a `tool_call_update` (for a permission request).
    pub fn as_update(&self) -> ToolCallUpdate {
        ToolCallUpdate::new(
            self.id.to_string(),
            ToolCallUpdateFields::new()
                .title(self.title())
                .kind(kind(self.name))
                .locations(self.locations())
                .content(self.diffs())
                .raw_input(self.input.clone()),
        )
    }

    pub fn title(&self) -> String {
        format!("{}({})", self.name, summarize_input(self.input))
    }

    fn path(&self, key: &str) -> Option<PathBuf> {
        let path = Path::new(self.input.get(key)?.as_str()?);
        Some(match self.workspace {
            Some(workspace) if path.is_relative() => workspace.join(path),
            _ => path.to_path_buf(),
        })
    }

    fn locations(&self) -> Vec<ToolCallLocation> {
        ["file_path", "notebook_path", "path"]
            .iter()
            .find_map(|key| self.path(key))
            .map(ToolCallLocation::new)
            .into_iter()
            .collect()
    }

    /// What an edit changes: Edit's and MultiEdit's replaced text, Write's
    /// whole new file.
    fn diffs(&self) -> Vec<ToolCallContent> {
        let Some(path) = self.path("file_path") else {
            return Vec::new();
        };
        let text =
            |value: &Value, key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
        let edit = |value: &Value| {
            let new = text(value, "new_string")?;
            Some(ToolCallContent::from(
                Diff::new(path.clone(), new).old_text(text(value, "old_string")),
            ))
        };
        match self.name {
            "Write" => text(self.input, "content")
                .map(|content| ToolCallContent::from(Diff::new(path.clone(), content)))
                .into_iter()
                .collect(),
            "Edit" => edit(self.input).into_iter().collect(),
            "MultiEdit" => self.input["edits"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(edit)
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// The kind an editor shows (icon, grouping) for an agentd tool.
pub fn kind(tool: &str) -> ToolKind {
    match tool {
        "Read" | "NotebookRead" | "LS" => ToolKind::Read,
        "Edit" | "MultiEdit" | "Write" | "NotebookEdit" => ToolKind::Edit,
        "Bash" | "BashOutput" | "KillShell" | "KillBash" => ToolKind::Execute,
        "Grep" | "Glob" => ToolKind::Search,
        "WebFetch" | "WebSearch" => ToolKind::Fetch,
        "TodoWrite" | "Task" | "Think" => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

/// The end of a call: its status and output.
pub fn finished(call_id: &str, is_error: bool, output: &str) -> ToolCallUpdate {
    let status = if is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let content = ToolCallContent::from(output.to_string());
    ToolCallUpdate::new(
        call_id.to_string(),
        ToolCallUpdateFields::new()
            .status(status)
            .content(vec![content]),
    )
}

/// A call the agent began running (it was announced pending, before its
/// permission request).
pub fn running(call_id: &str) -> ToolCallUpdate {
    ToolCallUpdate::new(
        call_id.to_string(),
        ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
    )
}
