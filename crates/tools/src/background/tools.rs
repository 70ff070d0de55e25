//! `BashOutput` and `KillShell`, with Claude Code's names and schemas.
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{BACKGROUND_OUTPUT_CAP, Output, ShellStatus};
use crate::tool_result::{NOTE_RESERVE, finish};
use crate::{ToolContext, ToolResult, TypedTool};

/// Largest compiled `filter` regex, in bytes.
const FILTER_SIZE_LIMIT: usize = 1 << 20;

#[derive(Debug, Deserialize)]
pub(crate) struct BashOutputInput {
    bash_id: String,
    filter: Option<String>,
}

#[derive(Debug, Default)]
pub struct BashOutputTool;

#[async_trait]
impl TypedTool for BashOutputTool {
    const NAME: &'static str = "BashOutput";
    const DESCRIPTION: &'static str = "\
- Retrieves output from a running or completed background bash shell
- Takes a bash_id parameter identifying the shell (Bash with run_in_background returns it)
- Always returns only new output since the last check
- Returns stdout and stderr output along with shell status
- Supports optional regex filtering to show only lines matching a pattern (the other lines are consumed too)
- Use this tool when you need to monitor or check the output of a long-running shell";
    const READ_ONLY: bool = true;
    const REQUIRED: &'static [&'static str] = &["bash_id"];
    type Input = BashOutputInput;

    fn properties() -> Value {
        json!({
            "bash_id": {"type": "string", "description": "The ID of the background shell to retrieve output from"},
            "filter": {
                "type": "string",
                "description": "Optional regular expression to filter the output lines. Only lines matching this regex will be included in the result. Any lines that do not match will no longer be available to read."
            }
        })
    }

    async fn run(&self, input: BashOutputInput, ctx: &ToolContext) -> Result<ToolResult, String> {
        let filter = match input.filter.as_deref().filter(|f| !f.is_empty()) {
            Some(pattern) => Some(
                regex::RegexBuilder::new(pattern)
                    .size_limit(FILTER_SIZE_LIMIT)
                    .build()
                    .map_err(|err| format!("`filter` is not a valid regular expression: {err}"))?,
            ),
            None => None,
        };
        let Some(output) = ctx.background.read(&input.bash_id) else {
            return Err(gone(&input.bash_id));
        };
        Ok(finish(
            describe(output, filter.as_ref(), ctx.result_cap),
            ctx,
        ))
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct KillShellInput {
    shell_id: String,
}

#[derive(Debug, Default)]
pub struct KillShellTool;

#[async_trait]
impl TypedTool for KillShellTool {
    const NAME: &'static str = "KillShell";
    const DESCRIPTION: &'static str = "\
- Kills a running background bash shell by its ID
- Takes a shell_id parameter identifying the shell to kill
- Returns a success or failure status
- Use this tool when you need to terminate a long-running shell";
    const READ_ONLY: bool = false;
    const REQUIRED: &'static [&'static str] = &["shell_id"];
    type Input = KillShellInput;

    fn properties() -> Value {
        json!({
            "shell_id": {"type": "string", "description": "The ID of the background shell to kill"}
        })
    }

    async fn run(&self, input: KillShellInput, ctx: &ToolContext) -> Result<ToolResult, String> {
        let id = &input.shell_id;
        let Some(shell) = ctx.background.find(id) else {
            return Err(gone(id));
        };
        let status = shell.status();
        if status != ShellStatus::Running {
            return Err(format!(
                "Shell {id} is not running (status: {}), so there is nothing to kill.",
                status.as_str()
            ));
        }
        shell.kill().await;
        Ok(ToolResult::ok(format!(
            "Successfully killed shell: {id} ({})",
            shell.command
        )))
    }
}

/// What the model is told about an id this process does not know.
fn gone(id: &str) -> String {
    format!(
        "Shell {id} is gone: there is no background shell with this ID. Either it was \
         running when agentd restarted (a restart ends every background command) or the ID \
         never existed. Start the command again (Bash with run_in_background) if you still \
         need it."
    )
}

/// Claude Code's shape: status, exit code, stdout, stderr, timestamp. Each
/// stream gets at most a share of `cap` characters, its newest.
fn describe(output: Output, filter: Option<&regex::Regex>, cap: usize) -> ToolResult {
    let mut parts = vec![format!("<status>{}</status>", output.status.as_str())];
    if let Some(code) = output.status.exit_code() {
        parts.push(format!("<exit_code>{code}</exit_code>"));
    }
    if output.status == ShellStatus::IdleKilled {
        parts.push(
            "<note>killed: nobody read its output for the session's background idle timeout</note>"
                .to_string(),
        );
    }
    for (tag, text, dropped) in [
        ("stdout", &output.stdout, output.stdout_dropped),
        ("stderr", &output.stderr, output.stderr_dropped),
    ] {
        let mut text = match filter {
            Some(filter) => text
                .lines()
                .filter(|line| filter.is_match(line))
                .collect::<Vec<_>>()
                .join("\n"),
            None => text.trim_end_matches('\n').to_string(),
        };
        text = keep_end(text, cap.saturating_sub(NOTE_RESERVE) / 2);
        if dropped > 0 {
            let kept = BACKGROUND_OUTPUT_CAP / 1024;
            text = format!(
                "[{dropped} earlier bytes were dropped: only the newest {kept} KiB are kept \
                 between reads]\n{text}"
            );
        }
        if !text.trim().is_empty() {
            parts.push(format!("<{tag}>\n{}\n</{tag}>", text.trim_end()));
        }
    }
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    parts.push(format!("<timestamp>{now}</timestamp>"));
    ToolResult::ok(parts.join("\n\n"))
}

/// The last `max_chars` characters of `text`, with a note of what was cut.
fn keep_end(text: String, max_chars: usize) -> String {
    let chars = text.chars().count();
    if chars <= max_chars {
        return text;
    }
    let cut = chars - max_chars;
    let start = text
        .char_indices()
        .nth(cut)
        .map_or(text.len(), |(at, _)| at);
    format!(
        "[{cut} earlier characters of this read are not shown]\n{}",
        &text[start..]
    )
}
