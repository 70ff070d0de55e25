//! `MultiEdit`: several replacements in one file, all or nothing.
use std::path::Path;

use agentd_sandbox::PathGuard;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::edit::edit_properties;
use crate::edit_core::{EditSpec, apply_edit, load_text, save_text};
use crate::input::parse_input;
use crate::input::resolve_path;
use crate::tool_result::to_result;
use crate::{Tool, ToolContext, ToolResult};

const DESCRIPTION: &str = "Make several replacements in one file in a single call. The \
edits are applied in order, each to the result of the previous one, with the same rules as \
Edit (exact match, unique unless `replace_all`). If any edit fails, none is applied and \
the file is left unchanged. Prefer it over several Edit calls on the same file.";

#[derive(Debug, Deserialize)]
struct MultiEditInput {
    file_path: String,
    edits: Vec<EditSpec>,
}

/// The `MultiEdit` tool.
#[derive(Debug, Default)]
pub struct MultiEditTool;

#[async_trait]
impl Tool for MultiEditTool {
    fn name(&self) -> &str {
        "MultiEdit"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The file to change (absolute, or relative to the workspace)."},
                "edits": {
                    "type": "array",
                    "minItems": 1,
                    "description": "Replacements to apply in order.",
                    "items": {
                        "type": "object",
                        "properties": edit_properties(),
                        "required": ["old_string", "new_string"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["file_path", "edits"],
            "additionalProperties": false
        })
    }

    fn is_read_only(&self) -> bool {
        false
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> ToolResult {
        let input: MultiEditInput = match parse_input(self.name(), &self.input_schema(), input) {
            Ok(input) => input,
            Err(error) => return error,
        };
        let path = match resolve_path(ctx, "file_path", &input.file_path) {
            Ok(path) => path,
            Err(message) => return ToolResult::error(message),
        };
        let shown = ctx.guard.display(&path);
        let guard = ctx.guard.clone();
        let outcome =
            tokio::task::spawn_blocking(move || edit_file(&guard, &path, &shown, &input.edits))
                .await
                .unwrap_or_else(|err| Err(format!("the tool failed internally: {err}")));
        to_result(outcome, ctx)
    }
}

fn edit_file(
    guard: &PathGuard,
    path: &Path,
    shown: &str,
    edits: &[EditSpec],
) -> Result<String, String> {
    let may_create = edits.first().is_some_and(|edit| edit.old_string.is_empty());
    let mut text = load_text(guard, path, shown, may_create)?;
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
    save_text(guard, path, shown, &text)?;
    Ok(format!(
        "Applied {} edits to {shown} ({total} replacements)",
        edits.len()
    ))
}
