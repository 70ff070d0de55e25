//! `Bash`: a shell command in the session's sandbox, with live output.
use std::time::Duration;

use agentd_protocol::OutputStream;
use agentd_sandbox::{ExecOutcome, ExecRequest, OutputChunk};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::output_tail::Tail;
use crate::tool_result::finish;
use crate::{ToolContext, ToolOutput, ToolResult, TypedTool};

#[derive(Debug, Deserialize)]
pub(crate) struct BashInput {
    command: String,
    timeout: Option<f64>,
    #[serde(default)]
    run_in_background: bool,
    #[allow(dead_code)] // Shown to the user by the engine, not used here.
    description: Option<String>,
}

#[derive(Debug, Default)]
pub struct BashTool;

#[async_trait]
impl TypedTool for BashTool {
    const NAME: &'static str = "Bash";
    const DESCRIPTION: &'static str = "Run a shell command with `bash -c` in the workspace (the \
working directory and $HOME). The command runs in a sandbox: only the workspace is \
writable, /tmp is private and empty, the environment is minimal, and there is no network \
unless the session allows it. Output (stdout, then stderr) is returned together with the \
exit code; long output is cut in the middle (its start and end are kept). Use it for \
builds, tests, git and other programs; prefer Read, Edit, Write, Glob, Grep and LS for \
looking at and changing files. `timeout` is in milliseconds; the command and everything it started are killed when it expires. \
Background processes (`&`) do not outlive the command: for a server or a watcher, set \
`run_in_background` instead, then read its output with BashOutput and stop it with KillShell.";
    const READ_ONLY: bool = false;
    const REQUIRED: &'static [&'static str] = &["command"];
    type Input = BashInput;

    fn properties() -> Value {
        json!({
            "command": {"type": "string", "description": "The command to run."},
            "timeout": {
                "type": "number",
                "description": "Optional timeout in milliseconds; the server caps it (default 120000)."
            },
            "description": {
                "type": "string",
                "description": "What the command does, in 5-10 words, e.g. \"Run the unit tests\"."
            },
            "run_in_background": {
                "type": "boolean",
                "description": "Set to true to run this command in the background. Use BashOutput to read the output later."
            }
        })
    }

    async fn run(&self, input: BashInput, ctx: &ToolContext) -> Result<ToolResult, String> {
        if input.command.trim().is_empty() {
            return Err("`command` is empty".into());
        }
        if input.run_in_background {
            let id = ctx
                .background
                .start(&ctx.sandbox, &ctx.policy, &input.command, &ctx.cancel)
                .await?;
            return Ok(ToolResult::ok(format!(
                "Command running in background with ID: {id}"
            )));
        }
        let timeout = timeout_for(input.timeout, ctx)?;
        let request = ExecRequest {
            command: input.command,
            timeout,
            // The head; the tails below keep the end.
            output_cap: ctx.result_cap / 2,
        };
        let output = run_with_live_output(&request, ctx).await?;
        Ok(finish(describe(output, timeout), ctx))
    }
}

/// Bytes of each stream's end kept for the result, as a share of the cap.
fn tail_cap(ctx: &ToolContext) -> usize {
    ctx.result_cap / 5
}

fn timeout_for(requested_ms: Option<f64>, ctx: &ToolContext) -> Result<Duration, String> {
    let ceiling = ctx.bash_max_timeout;
    match requested_ms {
        None => Ok(ctx.bash_timeout.min(ceiling)),
        Some(ms) if ms.is_finite() && ms > 0.0 => Ok(Duration::from_secs_f64(
            (ms / 1000.0).min(ceiling.as_secs_f64()),
        )),
        Some(ms) => Err(format!(
            "`timeout` must be a positive number of milliseconds, got {ms}"
        )),
    }
}

/// What a command printed: the sandbox's outcome (with the head of each
/// stream) and the end of each stream.
struct CommandOutput {
    outcome: ExecOutcome,
    stdout_tail: Tail,
    stderr_tail: Tail,
}

/// Run the request, keeping each stream's tail and forwarding output chunks
/// to the context's listener, if any, as they come.
async fn run_with_live_output(
    request: &ExecRequest,
    ctx: &ToolContext,
) -> Result<CommandOutput, String> {
    let listener = ctx.output.clone();
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let exec = ctx
        .sandbox
        .exec(&ctx.policy, request, Some(sender), ctx.cancel.clone());
    let (mut stdout_tail, mut stderr_tail) = (Tail::new(tail_cap(ctx)), Tail::new(tail_cap(ctx)));
    // Ends when `exec` drops its sender, i.e. when the command is done.
    let forward = async {
        while let Some(chunk) = receiver.recv().await {
            let (stream, text, tail) = match chunk {
                OutputChunk::Stdout(text) => (OutputStream::Stdout, text, &mut stdout_tail),
                OutputChunk::Stderr(text) => (OutputStream::Stderr, text, &mut stderr_tail),
            };
            tail.push(&text);
            if let Some(listener) = &listener {
                let _ = listener.send(ToolOutput { stream, text });
            }
        }
    };
    let (outcome, ()) = tokio::join!(exec, forward);
    Ok(CommandOutput {
        outcome: outcome.map_err(|err| err.to_string())?,
        stdout_tail,
        stderr_tail,
    })
}

/// The text the model sees: stdout, stderr, then how the command ended.
fn describe(output: CommandOutput, timeout: Duration) -> ToolResult {
    let CommandOutput {
        outcome,
        stdout_tail,
        stderr_tail,
    } = output;
    let mut parts: Vec<String> = Vec::new();
    for (head, tail) in [
        (&outcome.stdout, stdout_tail),
        (&outcome.stderr, stderr_tail),
    ] {
        let whole = format!("{head}{}", tail.after(head));
        let trimmed = whole.trim_end_matches('\n');
        if !trimmed.is_empty() {
            parts.push(trimmed.to_string());
        }
    }
    let ending = match outcome.exit_code {
        _ if outcome.cancelled => Some("[command interrupted by the user and killed]".to_string()),
        _ if outcome.timed_out => {
            let after = human(timeout);
            Some(format!("[command timed out after {after} and was killed]"))
        }
        Some(0) => None,
        Some(code) => Some(format!("[exit code {code}]")),
        None => Some("[command killed by a signal]".to_string()),
    };
    let is_error = ending.is_some();
    parts.extend(ending);
    if parts.is_empty() {
        parts.push("(no output)".to_string());
    }
    let content = parts.join("\n");
    ToolResult {
        content,
        is_error,
        images: Vec::new(),
    }
}

fn human(duration: Duration) -> String {
    let ms = duration.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}
