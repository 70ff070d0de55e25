//! `LS`: the entries of one directory.
use std::path::Path;

use async_trait::async_trait;
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::{resolve_path, run_blocking, to_result};
use crate::input::parse_input;
use crate::{Tool, ToolContext, ToolResult};

/// Most entries listed; the rest are counted.
const MAX_ENTRIES: usize = 1000;

const DESCRIPTION: &str = "List the entries of a directory (not recursive): \
subdirectories first with a trailing `/`, then files; symlinks show their target. \
`ignore` takes glob patterns of names to leave out, e.g. [\"node_modules\", \"*.log\"]. \
Hidden entries are included. Use Glob to find files by pattern across directories.";

#[derive(Debug, Deserialize)]
struct LsInput {
    path: String,
    ignore: Option<Vec<String>>,
}

/// The `LS` tool.
#[derive(Debug, Default)]
pub struct LsTool;

#[async_trait]
impl Tool for LsTool {
    fn name(&self) -> &str {
        "LS"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The directory to list (absolute, or relative to the workspace)."},
                "ignore": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Glob patterns of entry names to leave out."
                }
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> ToolResult {
        let input: LsInput = match parse_input(self.name(), &self.input_schema(), input) {
            Ok(input) => input,
            Err(error) => return error,
        };
        let path = match resolve_path(ctx, "path", &input.path) {
            Ok(path) => path,
            Err(message) => return ToolResult::error(message),
        };
        let ignore = match build_ignore(input.ignore.as_deref().unwrap_or_default()) {
            Ok(ignore) => ignore,
            Err(message) => return ToolResult::error(message),
        };
        let cancel = ctx.cancel.clone();
        let outcome = run_blocking(ctx, move || list(&path, &ignore, &cancel)).await;
        to_result(outcome, ctx)
    }
}

fn build_ignore(patterns: &[String]) -> Result<GlobSet, String> {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        let glob = Glob::new(pattern)
            .map_err(|err| format!("invalid `ignore` pattern {pattern:?}: {err}"))?;
        builder.add(glob);
    }
    builder
        .build()
        .map_err(|err| format!("invalid `ignore` patterns: {err}"))
}

fn list(dir: &Path, ignore: &GlobSet, cancel: &CancellationToken) -> Result<String, String> {
    let shown = dir.display();
    let meta = std::fs::metadata(dir).map_err(|err| match err.kind() {
        std::io::ErrorKind::NotFound => format!("directory does not exist: {shown}"),
        _ => format!("cannot list {shown}: {err}"),
    })?;
    if !meta.is_dir() {
        return Err(format!(
            "{shown} is a file, not a directory; use Read to read it"
        ));
    }
    let reader = std::fs::read_dir(dir).map_err(|err| format!("cannot list {shown}: {err}"))?;
    let mut dirs = Vec::new();
    let mut others = Vec::new();
    for entry in reader.flatten() {
        if cancel.is_cancelled() {
            return Err("interrupted".into());
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if ignore.is_match(&name) {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            dirs.push(format!("{name}/"));
        } else if kind.is_symlink() {
            let target =
                std::fs::read_link(entry.path()).map(|target| target.display().to_string());
            others.push(format!(
                "{name} -> {}",
                target.unwrap_or_else(|_| "?".into())
            ));
        } else {
            others.push(name);
        }
    }
    dirs.sort();
    others.sort();
    let total = dirs.len() + others.len();
    let mut lines = vec![format!("{}/", shown.to_string().trim_end_matches('/'))];
    if total == 0 {
        lines.push("  (empty directory)".into());
    }
    lines.extend(
        dirs.into_iter()
            .chain(others)
            .take(MAX_ENTRIES)
            .map(|entry| format!("  {entry}")),
    );
    if total > MAX_ENTRIES {
        lines.push(format!(
            "[showing {MAX_ENTRIES} of {total} entries; use ignore or Glob to narrow]"
        ));
    }
    Ok(lines.join("\n"))
}
