//! `MultiEdit`: several replacements in one file, all or nothing.
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::edit::edit_properties;
use crate::edit_core::{EditSpec, apply_edit, change_file, load_text, save_text};
use crate::host_fs::Target;
use crate::{ToolContext, ToolResult, TypedTool, object_schema};

#[derive(Debug, Deserialize)]
pub(crate) struct MultiEditInput {
    file_path: String,
    edits: Vec<EditSpec>,
}

#[derive(Debug, Default)]
pub struct MultiEditTool;

#[async_trait]
impl TypedTool for MultiEditTool {
    const NAME: &'static str = "MultiEdit";
    const DESCRIPTION: &'static str = "Make several replacements in one file in a single call. The \
edits are applied in order, each to the result of the previous one, with the same rules as \
Edit (exact match, unique unless `replace_all`). If any edit fails, none is applied and \
the file is left unchanged. Prefer it over several Edit calls on the same file.";
    const READ_ONLY: bool = false;
    const REQUIRED: &'static [&'static str] = &["file_path", "edits"];
    type Input = MultiEditInput;

    fn properties() -> Value {
        json!({
            "file_path": {"type": "string", "description": "The file to change (absolute, or relative to the workspace)."},
            "edits": {
                "type": "array",
                "minItems": 1,
                "description": "Replacements to apply in order.",
                "items": object_schema(edit_properties(), &["old_string", "new_string"])
            }
        })
    }

    async fn run(&self, input: MultiEditInput, ctx: &ToolContext) -> Result<ToolResult, String> {
        change_file(ctx, &input.file_path, move |file| {
            edit_file(file, &input.edits)
        })
        .await
    }
}

fn edit_file(file: &Target, edits: &[EditSpec]) -> Result<String, String> {
    let may_create = edits.first().is_some_and(|edit| edit.old_string.is_empty());
    let mut text = load_text(file, may_create)?;
    let mut total = 0;
    for (index, edit) in edits.iter().enumerate() {
        let applied = apply_edit(&text, edit).map_err(|reason| {
            format!(
                "edit {} of {} failed, so no edits were applied: {reason}",
                index + 1,
                edits.len()
            )
        })?;
        total += applied.replacements;
        text = applied.text;
    }
    save_text(file, &text)?;
    Ok(format!(
        "Applied {} edits to {} ({total} replacements)",
        edits.len(),
        file.shown
    ))
}
