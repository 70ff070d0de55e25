//! `Write`: create or overwrite a file.
use std::path::Path;

use agentd_sandbox::PathGuard;
use agentd_sandbox::confined::Written;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::edit_core::{change_file, save_text};
use crate::input::parse_input;
use crate::{Tool, ToolContext, ToolResult};

const DESCRIPTION: &str = "Write a file, replacing it completely if it exists. Missing \
parent directories are created. Use it for new files or full rewrites; for changing part \
of an existing file prefer Edit or MultiEdit, which send only the change. Relative paths \
are resolved against the workspace.";

#[derive(Debug, Deserialize)]
struct WriteInput {
    file_path: String,
    content: String,
}

/// The `Write` tool.
#[derive(Debug, Default)]
pub struct WriteTool;

#[async_trait]
impl Tool for WriteTool {
    fn name(&self) -> &str {
        "Write"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The file to write (absolute, or relative to the workspace)."},
                "content": {"type": "string", "description": "The complete new content of the file."}
            },
            "required": ["file_path", "content"],
            "additionalProperties": false
        })
    }

    fn is_read_only(&self) -> bool {
        false
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> ToolResult {
        let input: WriteInput = match parse_input(self.name(), &self.input_schema(), input) {
            Ok(input) => input,
            Err(error) => return error,
        };
        let file_path = input.file_path.clone();
        change_file(ctx, &file_path, move |guard, path, shown| {
            write_file(guard, path, shown, &input.content)
        })
        .await
    }
}

fn write_file(
    guard: &PathGuard,
    path: &Path,
    shown: &str,
    content: &str,
) -> Result<String, String> {
    let written = save_text(guard, path, shown, content)?;
    let lines = content.lines().count();
    let verb = match written {
        Written::Replaced => "Overwrote",
        Written::Created => "Created",
    };
    Ok(format!(
        "{verb} {shown} ({} bytes, {lines} lines)",
        content.len()
    ))
}
