//! `Glob`: find files by name pattern, newest first.
use std::path::{Path, PathBuf};

use agentd_sandbox::PathGuard;
use agentd_sandbox::confined;
use async_trait::async_trait;
use globset::GlobBuilder;
use rustix::fs::{FileType, Stat};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::context::HiddenPaths;
use crate::host_fs::{confirmed_entry, describe, is_not_found, kind_of, modified};
use crate::input::resolve_path;
use crate::tool_result::run_blocking;
use crate::walk::{split_literal_prefix, walker};
use crate::{ToolContext, ToolResult, TypedTool};

/// Most paths listed; the rest are counted.
const MAX_RESULTS: usize = 100;

#[derive(Debug, Deserialize)]
pub(crate) struct GlobInput {
    pattern: String,
    path: Option<String>,
}

#[derive(Debug, Default)]
pub struct GlobTool;

#[async_trait]
impl TypedTool for GlobTool {
    const NAME: &'static str = "Glob";
    const DESCRIPTION: &'static str = "Find files whose path matches a glob pattern such as \
`**/*.rs` or `src/**/*.{ts,tsx}` (`*` stays within one directory, `**` crosses any \
number). Searches the workspace, or `path` if given; files ignored by .gitignore are \
skipped. Returns absolute paths, most recently modified first, at most 100. Use Grep to \
search file contents.";
    const READ_ONLY: bool = true;
    const REQUIRED: &'static [&'static str] = &["pattern"];
    type Input = GlobInput;

    fn properties() -> Value {
        json!({
            "pattern": {"type": "string", "description": "The glob pattern, e.g. \"**/*.py\"."},
            "path": {"type": "string", "description": "Directory to search in (default: the workspace)."}
        })
    }

    async fn run(&self, input: GlobInput, ctx: &ToolContext) -> Result<ToolResult, String> {
        let (root, rest) = search_root(&input, ctx)?;
        let search = Search {
            guard: ctx.guard.clone(),
            hidden: ctx.hidden.clone(),
            cancel: ctx.cancel.clone(),
        };
        Ok(run_blocking(ctx, move || find_files(&search, &root, &rest)).await)
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

/// What a Glob search works with, on its blocking thread.
struct Search {
    guard: PathGuard,
    hidden: HiddenPaths,
    cancel: CancellationToken,
}

fn find_files(search: &Search, root: &Path, glob: &str) -> Result<String, String> {
    let shown = search.guard.sandbox_view(root).display().to_string();
    let root_stat = search.guard.confined(root, confined::stat_beneath);
    if glob.is_empty() {
        // A plain path: report whether it exists.
        return Ok(if root_stat.is_ok() { shown } else { no_files() });
    }
    let kind = match root_stat {
        Ok(stat) => kind_of(&stat),
        Err(err) if is_not_found(&err) => return Err(format!("directory does not exist: {shown}")),
        Err(err) => return Err(describe(&err, "search", &shown)),
    };
    if kind != FileType::Directory {
        let what = match kind {
            FileType::RegularFile => "a file",
            other => confined::kind_name(other),
        };
        return Err(format!("{shown} is {what}, not a directory to search in"));
    }
    let matcher = GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map_err(|err| format!("invalid glob pattern {glob:?}: {err}"))?
        .compile_matcher();
    let mut found: Vec<(Stat, PathBuf)> = Vec::new();
    let walk = walker(root, &search.guard, &search.hidden, None).build();
    for entry in walk.flatten() {
        if search.cancel.is_cancelled() {
            return Err("interrupted".into());
        }
        if entry.depth() == 0 || entry.file_type().is_some_and(|kind| kind.is_dir()) {
            continue;
        }
        let Ok(relative) = entry.path().strip_prefix(root) else {
            continue;
        };
        if !matcher.is_match(relative) {
            continue;
        }
        // Reported only if the name is beneath the root now: the walker may
        // have listed a directory swapped for a link to elsewhere.
        let Some(stat) = confirmed_entry(&search.guard, entry.path()) else {
            continue;
        };
        // Pipes, sockets and devices are not files to work on.
        if matches!(kind_of(&stat), FileType::RegularFile | FileType::Symlink) {
            found.push((stat, search.guard.sandbox_view(entry.path())));
        }
    }
    if found.is_empty() {
        return Ok(no_files());
    }
    found.sort_by(|a, b| {
        modified(&b.0)
            .cmp(&modified(&a.0))
            .then_with(|| a.1.cmp(&b.1))
    });
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
