//! `Grep`: regex search over file contents with ripgrep's libraries.
use std::path::{Path, PathBuf};

use agentd_sandbox::PathGuard;
use agentd_sandbox::confined;
use async_trait::async_trait;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use rustix::fs::FileType;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::context::HiddenPaths;
use crate::grep_search::{OutputMode, SearchOptions, search};
use crate::host_fs::{describe, is_not_found, kind_of};
use crate::input::resolve_path;
use crate::tool_result::{NOTE_RESERVE, run_blocking};
use crate::walk::walker;
use crate::{ToolContext, ToolResult, TypedTool};

#[derive(Debug, Deserialize)]
pub(crate) struct GrepInput {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    #[serde(rename = "type")]
    file_type: Option<String>,
    output_mode: Option<OutputMode>,
    #[serde(rename = "-i")]
    case_insensitive: Option<bool>,
    #[serde(rename = "-n")]
    line_numbers: Option<bool>,
    #[serde(rename = "-A")]
    after: Option<usize>,
    #[serde(rename = "-B")]
    before: Option<usize>,
    #[serde(rename = "-C")]
    context: Option<usize>,
    head_limit: Option<usize>,
    multiline: Option<bool>,
}

#[derive(Debug, Default)]
pub struct GrepTool;

#[async_trait]
impl TypedTool for GrepTool {
    const NAME: &'static str = "Grep";
    const DESCRIPTION: &'static str = "Search file contents with a regular expression (ripgrep \
syntax, e.g. `fn\\s+main` or `TODO|FIXME`; escape literal braces and dots). Searches the \
workspace, or `path` (a directory or one file); .gitignore'd and binary files are \
skipped. Narrow the files with `glob` (e.g. \"*.{ts,tsx}\") or `type` (e.g. \"rust\", \
\"py\", \"js\"). `output_mode`: \"files_with_matches\" (default; paths, newest first), \
\"content\" (matching lines as path:line:text, with -A/-B/-C context and -n line \
numbers), or \"count\" (matches per file). `-i` ignores case; `multiline` lets a pattern \
span lines and `.` match newlines; `head_limit` keeps only the first N lines or entries.";
    const READ_ONLY: bool = true;
    const REQUIRED: &'static [&'static str] = &["pattern"];
    type Input = GrepInput;

    fn properties() -> Value {
        let context_lines = |what: &str| json!({"type": "integer", "minimum": 0, "description": format!("Lines of context {what} each match (content mode).")});
        json!({
            "pattern": {"type": "string", "description": "The regular expression to search for."},
            "path": {"type": "string", "description": "File or directory to search (default: the workspace)."},
            "glob": {"type": "string", "description": "Only search files matching this glob, e.g. \"*.js\" or \"src/**/*.rs\"."},
            "type": {"type": "string", "description": "Only search files of this type, e.g. \"rust\", \"py\", \"js\", \"go\"."},
            "output_mode": {
                "type": "string",
                "enum": ["content", "files_with_matches", "count"],
                "description": "What to return (default \"files_with_matches\")."
            },
            "-i": {"type": "boolean", "description": "Case-insensitive search."},
            "-n": {"type": "boolean", "description": "Show line numbers (content mode; default true)."},
            "-A": context_lines("after"),
            "-B": context_lines("before"),
            "-C": context_lines("before and after"),
            "head_limit": {"type": "integer", "minimum": 1, "description": "Return only the first N lines or entries."},
            "multiline": {"type": "boolean", "description": "Let the pattern span lines; `.` also matches newlines."}
        })
    }

    async fn run(&self, input: GrepInput, ctx: &ToolContext) -> Result<ToolResult, String> {
        let prepared = prepare(input, ctx)?;
        let guard = ctx.guard.clone();
        let hidden = ctx.hidden.clone();
        let cancel = ctx.cancel.clone();
        Ok(run_blocking(ctx, move || run(prepared, &guard, &hidden, &cancel)).await)
    }
}

/// A checked search, before it touches the file system.
struct Prepared {
    options: SearchOptions,
    matcher: RegexMatcher,
    base: PathBuf,
    glob: Option<String>,
    file_type: Option<String>,
}

/// Check the input: resolve the path, compile the regex, gather the options.
fn prepare(input: GrepInput, ctx: &ToolContext) -> Result<Prepared, String> {
    let base = match &input.path {
        Some(path) => resolve_path(ctx, "path", path)?,
        None => ctx.guard.workspace().to_path_buf(),
    };
    let multiline = input.multiline.unwrap_or(false);
    let matcher = build_matcher(
        &input.pattern,
        input.case_insensitive.unwrap_or(false),
        multiline,
    )?;
    let options = SearchOptions {
        mode: input.output_mode.unwrap_or(OutputMode::FilesWithMatches),
        line_numbers: input.line_numbers.unwrap_or(true),
        before: input.before.or(input.context).unwrap_or(0),
        after: input.after.or(input.context).unwrap_or(0),
        multiline,
        head_limit: input.head_limit,
        char_budget: ctx.result_cap.saturating_sub(NOTE_RESERVE),
    };
    Ok(Prepared {
        options,
        matcher,
        base,
        glob: input.glob,
        file_type: input.file_type,
    })
}

/// Look at what `path` names (through the guard), then walk and search it.
fn run(
    prepared: Prepared,
    guard: &PathGuard,
    hidden: &HiddenPaths,
    cancel: &CancellationToken,
) -> Result<String, String> {
    let base = &prepared.base;
    let shown = guard.display(base);
    let is_dir = match guard.confined(base, confined::stat_beneath) {
        Ok(stat) => match kind_of(&stat) {
            FileType::Directory => true,
            FileType::RegularFile => false,
            found => {
                return Err(format!(
                    "{shown} is {}, not a regular file or a directory; Grep only searches \
                     regular files",
                    confined::kind_name(found)
                ));
            }
        },
        Err(err) if is_not_found(&err) => return Err(format!("path does not exist: {shown}")),
        Err(err) => return Err(describe(&err, "search", &shown)),
    };
    let walk = build_walk(
        base,
        is_dir,
        guard,
        hidden,
        prepared.glob.as_deref(),
        prepared.file_type.as_deref(),
    )?;
    search(&prepared.options, &prepared.matcher, walk, guard, cancel)
}

fn build_matcher(
    pattern: &str,
    case_insensitive: bool,
    multiline: bool,
) -> Result<RegexMatcher, String> {
    if pattern.is_empty() {
        return Err("`pattern` is empty".into());
    }
    let mut builder = RegexMatcherBuilder::new();
    builder.case_insensitive(case_insensitive).multi_line(true);
    if multiline {
        builder.dot_matches_new_line(true);
    } else {
        // Lets the searcher work line by line (and keeps `\s` from eating newlines).
        builder.line_terminator(Some(b'\n'));
    }
    builder
        .build(pattern)
        .map_err(|err| format!("invalid regular expression {pattern:?}: {err}"))
}

fn build_walk(
    base: &Path,
    is_dir: bool,
    guard: &PathGuard,
    hidden: &HiddenPaths,
    glob: Option<&str>,
    file_type: Option<&str>,
) -> Result<ignore::Walk, String> {
    let root = if is_dir {
        base
    } else {
        base.parent().unwrap_or(base)
    };
    let overrides = match glob.filter(|glob| !glob.is_empty()) {
        Some(glob) => {
            let invalid = |err: ignore::Error| format!("invalid `glob` {glob:?}: {err}");
            let mut overrides = OverrideBuilder::new(root);
            overrides.add(glob).map_err(invalid)?;
            Some(overrides.build().map_err(invalid)?)
        }
        None => None,
    };
    let mut builder = walker(base, guard, hidden, overrides);
    builder.sort_by_file_path(|a, b| a.cmp(b));
    if let Some(file_type) = file_type.filter(|file_type| !file_type.is_empty()) {
        let mut types = TypesBuilder::new();
        types.add_defaults();
        types.select(file_type);
        let types = types
            .build()
            .map_err(|err| format!("invalid `type` {file_type:?}: {err}"))?;
        builder.types(types);
    }
    Ok(builder.build())
}
