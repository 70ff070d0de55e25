//! `Edit`: replace an exact string in a file.
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::edit_core::{EditSpec, apply_edit, change_file, load_text, save_text, snippet};
use crate::host_fs::Target;
use crate::{ToolContext, ToolResult, TypedTool};

#[derive(Debug, Deserialize)]
pub(crate) struct EditInput {
    file_path: String,
    #[serde(flatten)]
    edit: EditSpec,
}

#[derive(Debug, Default)]
pub struct EditTool;

/// The schema of one replacement, shared with `MultiEdit`.
pub(crate) fn edit_properties() -> Value {
    json!({
        "old_string": {"type": "string", "description": "The exact text to replace."},
        "new_string": {"type": "string", "description": "The text to put in its place (must differ from old_string)."},
        "replace_all": {"type": "boolean", "default": false, "description": "Replace every occurrence instead of exactly one."}
    })
}

#[async_trait]
impl TypedTool for EditTool {
    const NAME: &'static str = "Edit";
    const DESCRIPTION: &'static str = "Replace text in a file. `old_string` must match the file \
exactly (whitespace and indentation included) and exactly once, unless `replace_all` is \
true; include enough surrounding lines to make it unique. Copy the text from Read output \
without the line-number prefix. An empty `old_string` creates a new file with \
`new_string` as its content. Relative paths are resolved against the workspace.";
    const READ_ONLY: bool = false;
    const REQUIRED: &'static [&'static str] = &["file_path", "old_string", "new_string"];
    type Input = EditInput;

    fn properties() -> Value {
        let mut properties = edit_properties();
        properties["file_path"] = json!({
            "type": "string",
            "description": "The file to change (absolute, or relative to the workspace)."
        });
        properties
    }

    async fn run(&self, input: EditInput, ctx: &ToolContext) -> Result<ToolResult, String> {
        change_file(ctx, &input.file_path, move |file| {
            edit_file(file, &input.edit)
        })
        .await
    }
}

fn edit_file(file: &Target, edit: &EditSpec) -> Result<String, String> {
    let original = load_text(file, edit.old_string.is_empty())?;
    let applied = apply_edit(&original, edit)?;
    save_text(file, &applied.text)?;
    let what = match applied.replacements {
        1 => "1 replacement".to_string(),
        count => format!("{count} replacements"),
    };
    Ok(format!(
        "Edited {} ({what}). The changed region now reads:\n{}",
        file.shown,
        snippet(&applied.text, applied.first_at, &edit.new_string)
    ))
}
