//! `Write`: create or overwrite a file.
use agentd_sandbox::confined::Written;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::edit_core::{change_file, save_text};
use crate::host_fs::Target;
use crate::{ToolContext, ToolResult, TypedTool};

#[derive(Debug, Deserialize)]
pub(crate) struct WriteInput {
    file_path: String,
    content: String,
}

#[derive(Debug, Default)]
pub struct WriteTool;

#[async_trait]
impl TypedTool for WriteTool {
    const NAME: &'static str = "Write";
    const DESCRIPTION: &'static str = "Write a file, replacing it completely if it exists. Missing \
parent directories are created. Use it for new files or full rewrites; for changing part \
of an existing file prefer Edit or MultiEdit, which send only the change. Relative paths \
are resolved against the workspace.";
    const READ_ONLY: bool = false;
    const REQUIRED: &'static [&'static str] = &["file_path", "content"];
    type Input = WriteInput;

    fn properties() -> Value {
        json!({
            "file_path": {"type": "string", "description": "The file to write (absolute, or relative to the workspace)."},
            "content": {"type": "string", "description": "The complete new content of the file."}
        })
    }

    async fn run(&self, input: WriteInput, ctx: &ToolContext) -> Result<ToolResult, String> {
        change_file(ctx, &input.file_path, move |file| {
            write_file(file, &input.content)
        })
        .await
    }
}

fn write_file(file: &Target, content: &str) -> Result<String, String> {
    let written = save_text(file, content)?;
    let lines = content.lines().count();
    let verb = match written {
        Written::Replaced => "Overwrote",
        Written::Created => "Created",
    };
    Ok(format!(
        "{verb} {} ({} bytes, {lines} lines)",
        file.shown,
        content.len()
    ))
}
