//! What the built-in tools give back: results capped with a note saying so,
//! numbered and shortened lines, and blocking file-system work run off the
//! async threads with its error as the model's result.

use crate::{ToolContext, ToolResult};

/// Longest line shown by Read and Grep, in characters.
pub(crate) const MAX_LINE_CHARS: usize = 2000;

/// Room kept under the result cap for a tool's own "stopped here" note, so the
/// generic truncation never cuts that note off.
pub(crate) const NOTE_RESERVE: usize = 300;

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

/// Run file-system work on the blocking pool and make its outcome the capped
/// result; an interrupt returns at once (the work itself checks `ctx.cancel`
/// to stop early).
pub(crate) async fn run_blocking<F>(ctx: &ToolContext, work: F) -> ToolResult
where
    F: FnOnce() -> Result<String, String> + Send + 'static,
{
    run_blocking_result(ctx, move || work().map(ToolResult::ok)).await
}

/// [`run_blocking`] for work that makes its own result (say, with images).
pub(crate) async fn run_blocking_result<F>(ctx: &ToolContext, work: F) -> ToolResult
where
    F: FnOnce() -> Result<ToolResult, String> + Send + 'static,
{
    let handle = tokio::task::spawn_blocking(work);
    let outcome = tokio::select! {
        joined = handle => joined.unwrap_or_else(|err| Err(format!("the tool failed internally: {err}"))),
        () = ctx.cancel.cancelled() => Err("interrupted".to_string()),
    };
    finish(outcome.unwrap_or_else(ToolResult::error), ctx)
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
