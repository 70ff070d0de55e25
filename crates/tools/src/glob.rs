//! `Glob`: find files by name pattern, newest first.
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use async_trait::async_trait;
use globset::GlobBuilder;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::{resolve_path, run_blocking, to_result};
use crate::context::HiddenPaths;
use crate::input::parse_input;
use crate::walk::{split_literal_prefix, walker};
use crate::{Tool, ToolContext, ToolResult};

/// Most paths listed; the rest are counted.
const MAX_RESULTS: usize = 100;

const DESCRIPTION: &str = "Find files whose path matches a glob pattern such as \
`**/*.rs` or `src/**/*.{ts,tsx}` (`*` stays within one directory, `**` crosses any \
number). Searches the workspace, or `path` if given; files ignored by .gitignore are \
skipped. Returns absolute paths, most recently modified first, at most 100. Use Grep to \
search file contents.";

#[derive(Debug, Deserialize)]
struct GlobInput {
    pattern: String,
    path: Option<String>,
}

/// The `Glob` tool.
#[derive(Debug, Default)]
pub struct GlobTool;

#[async_trait]
impl Tool for GlobTool {
    fn name(&self) -> &str {
        "Glob"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The glob pattern, e.g. \"**/*.py\"."},
                "path": {"type": "string", "description": "Directory to search in (default: the workspace)."}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> ToolResult {
        let input: GlobInput = match parse_input(self.name(), &self.input_schema(), input) {
            Ok(input) => input,
            Err(error) => return error,
        };
        let (root, rest) = match search_root(&input, ctx) {
            Ok(found) => found,
            Err(message) => return ToolResult::error(message),
        };
        let cancel = ctx.cancel.clone();
        let hidden = ctx.hidden.clone();
        let outcome = run_blocking(ctx, move || find_files(&root, &rest, &hidden, &cancel)).await;
        to_result(outcome, ctx)
    }
}

/// The directory to walk (the literal part of the pattern resolved under
/// `path`, through the path guard) and the glob to match below it.
fn search_root(input: &GlobInput, ctx: &ToolContext) -> Result<(PathBuf, String), String> {
    let base = match &input.path {
        Some(path) => resolve_path(ctx, "path", path)?,
        None => ctx.guard.workspace().to_path_buf(),
    };
    if input.pattern.is_empty() {
        return Err("`pattern` is empty".into());
    }
    let (prefix, rest) = split_literal_prefix(&input.pattern);
    if prefix.is_empty() {
        return Ok((base, rest));
    }
    // Absolute and `~` prefixes stand alone, as they would as a path.
    let joined = if prefix.starts_with('/') || prefix == "~" || prefix.starts_with("~/") {
        prefix
    } else {
        base.join(&prefix).to_string_lossy().into_owned()
    };
    Ok((resolve_path(ctx, "pattern", &joined)?, rest))
}

fn find_files(
    root: &Path,
    glob: &str,
    hidden: &HiddenPaths,
    cancel: &CancellationToken,
) -> Result<String, String> {
    if glob.is_empty() {
        // A plain path: report whether it exists.
        return Ok(if root.exists() {
            root.display().to_string()
        } else {
            no_files()
        });
    }
    if !root.is_dir() {
        return Err(if root.exists() {
            format!("{} is a file, not a directory to search in", root.display())
        } else {
            format!("directory does not exist: {}", root.display())
        });
    }
    let matcher = GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map_err(|err| format!("invalid glob pattern {glob:?}: {err}"))?
        .compile_matcher();
    let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
    for entry in walker(root, hidden).build().flatten() {
        if cancel.is_cancelled() {
            return Err("interrupted".into());
        }
        if entry.depth() == 0 || entry.file_type().is_some_and(|kind| kind.is_dir()) {
            continue;
        }
        let Ok(relative) = entry.path().strip_prefix(root) else {
            continue;
        };
        if matcher.is_match(relative) {
            let modified = std::fs::symlink_metadata(entry.path())
                .and_then(|meta| meta.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            found.push((modified, entry.into_path()));
        }
    }
    if found.is_empty() {
        return Ok(no_files());
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = found.len();
    let mut lines: Vec<String> = found
        .into_iter()
        .take(MAX_RESULTS)
        .map(|(_, path)| path.display().to_string())
        .collect();
    if total > MAX_RESULTS {
        lines.push(format!(
            "[showing the {MAX_RESULTS} most recently modified of {total} matching files; use a more specific pattern or path]"
        ));
    }
    Ok(lines.join("\n"))
}

fn no_files() -> String {
    "No files found".to_string()
}
