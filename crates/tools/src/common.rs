//! Helpers shared by the built-in tools: path checks, result capping, line
//! formatting, and running blocking file-system work off the async threads.
use std::path::PathBuf;

use agentd_sandbox::PathError;

use crate::{ToolContext, ToolResult};

/// Longest line shown by Read and Grep, in characters.
pub(crate) const MAX_LINE_CHARS: usize = 2000;

/// Room kept under the result cap for a tool's own "stopped here" note, so the
/// generic truncation never cuts that note off.
pub(crate) const NOTE_RESERVE: usize = 300;

/// Resolve a path the model gave in `field`, or explain why it is refused.
pub(crate) fn resolve_path(ctx: &ToolContext, field: &str, path: &str) -> Result<PathBuf, String> {
    ctx.guard.resolve(path).map_err(|err| match err {
        PathError::Outside { path } => format!(
            "`{field}`: {path:?} is outside the workspace ({}); only paths inside it can be used",
            ctx.guard.workspace().display()
        ),
        PathError::Invalid { .. } => format!("`{field}`: {err}"),
    })
}

/// Apply the context's result cap to a finished result.
pub(crate) fn finish(result: ToolResult, ctx: &ToolContext) -> ToolResult {
    result.capped(ctx.result_cap)
}

/// One `cat -n` style line: number right-aligned in six columns, a tab, the text.
pub(crate) fn numbered_line(number: usize, text: &str) -> String {
    format!("{number:>6}\t{text}")
}

/// Shorten an over-long line, marking the cut.
pub(crate) fn truncate_line(text: &str) -> String {
    match text.char_indices().nth(MAX_LINE_CHARS) {
        None => text.to_string(),
        Some((cut_at, _)) => format!("{}… [line truncated]", &text[..cut_at]),
    }
}

/// Run file-system work on the blocking pool; an interrupt returns at once
/// (the work itself checks `ctx.cancel` to stop early).
pub(crate) async fn run_blocking<F>(ctx: &ToolContext, work: F) -> Result<String, String>
where
    F: FnOnce() -> Result<String, String> + Send + 'static,
{
    let handle = tokio::task::spawn_blocking(work);
    tokio::select! {
        joined = handle => joined.unwrap_or_else(|err| Err(format!("the tool failed internally: {err}"))),
        () = ctx.cancel.cancelled() => Err("interrupted".to_string()),
    }
}

/// Turn a tool's outcome into a capped result.
pub(crate) fn to_result(outcome: Result<String, String>, ctx: &ToolContext) -> ToolResult {
    let result = match outcome {
        Ok(text) => ToolResult::ok(text),
        Err(message) => ToolResult::error(message),
    };
    finish(result, ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_and_truncated() {
        assert_eq!(numbered_line(7, "x"), "     7\tx");
        let long = "a".repeat(MAX_LINE_CHARS + 5);
        assert!(truncate_line(&long).ends_with("… [line truncated]"));
        assert_eq!(truncate_line("abc"), "abc");
    }
}
