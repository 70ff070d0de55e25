//! `LS`: the entries of one directory.
use std::os::fd::BorrowedFd;
use std::path::Path;

use agentd_sandbox::PathGuard;
use agentd_sandbox::confined::{self, ConfinedError};
use async_trait::async_trait;
use globset::{Glob, GlobSet, GlobSetBuilder};
use rustix::fs::FileType;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::host_fs::{describe, is_not_found, kind_of};
use crate::input::resolve_path;
use crate::tool_result::run_blocking;
use crate::{ToolContext, ToolResult, TypedTool};

/// Most entries listed; the rest are counted.
const MAX_ENTRIES: usize = 1000;

#[derive(Debug, Deserialize)]
pub(crate) struct LsInput {
    path: String,
    ignore: Option<Vec<String>>,
}

#[derive(Debug, Default)]
pub struct LsTool;

#[async_trait]
impl TypedTool for LsTool {
    const NAME: &'static str = "LS";
    const DESCRIPTION: &'static str = "List the entries of a directory (not recursive): \
subdirectories first with a trailing `/`, then files; symlinks show their target. \
`ignore` takes glob patterns of names to leave out, e.g. [\"node_modules\", \"*.log\"]. \
Hidden entries are included. Use Glob to find files by pattern across directories.";
    const READ_ONLY: bool = true;
    const REQUIRED: &'static [&'static str] = &["path"];
    type Input = LsInput;

    fn properties() -> Value {
        json!({
            "path": {"type": "string", "description": "The directory to list (absolute, or relative to the workspace)."},
            "ignore": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Glob patterns of entry names to leave out."
            }
        })
    }

    async fn run(&self, input: LsInput, ctx: &ToolContext) -> Result<ToolResult, String> {
        let path = resolve_path(ctx, "path", &input.path)?;
        let ignore = build_ignore(input.ignore.as_deref().unwrap_or_default())?;
        let cancel = ctx.cancel.clone();
        let guard = ctx.guard.clone();
        Ok(run_blocking(ctx, move || list(&guard, &path, &ignore, &cancel)).await)
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

fn list(
    guard: &PathGuard,
    dir: &Path,
    ignore: &GlobSet,
    cancel: &CancellationToken,
) -> Result<String, String> {
    let shown = dir.display().to_string();
    // Listed through the directory's descriptor, opened beneath the root: a
    // link swapped in for it is refused, never followed.
    let listed = guard.confined(dir, |root, relative| {
        list_entries(root, relative, ignore, cancel)
    });
    let (mut dirs, mut others) = listed.map_err(|err| match err {
        err if is_not_found(&err) => format!("directory does not exist: {shown}"),
        ConfinedError::Kind { found, .. }
            if found == confined::kind_name(FileType::RegularFile) =>
        {
            format!("{shown} is a file, not a directory; use Read to read it")
        }
        ConfinedError::Kind { found, .. } => format!("{shown} is {found}, not a directory"),
        ConfinedError::Io(err) if err.kind() == std::io::ErrorKind::Interrupted => {
            "interrupted".to_string()
        }
        err => describe(&err, "list", &shown),
    })?;
    dirs.sort();
    others.sort();
    let total = dirs.len() + others.len();
    let mut lines = vec![format!("{}/", shown.trim_end_matches('/'))];
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

/// The entries of `relative` beneath `root` not matched by `ignore`, as
/// shown: directories (`name/`) and the rest (links with their targets).
fn list_entries(
    root: BorrowedFd<'_>,
    relative: &Path,
    ignore: &GlobSet,
    cancel: &CancellationToken,
) -> Result<(Vec<String>, Vec<String>), ConfinedError> {
    let mut dirs = Vec::new();
    let mut others = Vec::new();
    for entry in confined::list_dir(root, relative)? {
        if cancel.is_cancelled() {
            return Err(std::io::Error::from(std::io::ErrorKind::Interrupted).into());
        }
        let name = entry.name.to_string_lossy().into_owned();
        if ignore.is_match(&name) {
            continue;
        }
        // Gone between the listing and the look.
        let Some(stat) = entry.stat else {
            continue;
        };
        match kind_of(&stat) {
            FileType::Directory => dirs.push(format!("{name}/")),
            FileType::Symlink => {
                let target = confined::read_link(root, &relative.join(&entry.name))
                    .map(|target| target.display().to_string());
                others.push(format!(
                    "{name} -> {}",
                    target.unwrap_or_else(|_| "?".into())
                ));
            }
            _ => others.push(name),
        }
    }
    Ok((dirs, others))
}
