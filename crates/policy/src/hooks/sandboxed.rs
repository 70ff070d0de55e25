//! Running a hook inside the session's sandbox: a project's hooks come from
//! files the agent can write, so they get exactly what the agent's own
//! commands get (the workspace, the profile's network, its limits), and
//! nothing of the host.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use agentd_sandbox::Sandbox;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::HookContext;
use super::run::{Ending, HookRun, OUTPUT_CAP};

pub(crate) async fn run(
    command: &str,
    timeout: Duration,
    ctx: &HookContext,
    stdin: &[u8],
) -> HookRun {
    let failed = |message: String| HookRun {
        ending: Ending::Failed(message),
        stdout: String::new(),
        stderr: String::new(),
        stdout_truncated: false,
    };
    let Some(policy) = &ctx.sandbox else {
        return failed(
            "a project's hook runs only in the sandbox, and this session has none".into(),
        );
    };
    if policy.unsandboxed {
        return failed(
            "a project's hook runs only in the sandbox, and this profile has it off".into(),
        );
    }
    let mut policy = policy.clone();
    policy.env.extend(ctx.env.clone());
    policy
        .env
        .insert("AGENTD_SESSION_ID".into(), ctx.session_id.clone());
    policy
        .env
        .insert("CLAUDE_PROJECT_DIR".into(), ctx.cwd.display().to_string());
    let argv = ["bash".to_string(), "-c".to_string(), command.to_string()];
    // Through the workspace gate, as the agent's own commands: a project's
    // hook is the agent's code, and must not rename what a sandbox being set
    // up beside it binds (see the sandbox's `gate` module). The timeout
    // counts from here, so a wait at the gate (behind a background command
    // started before `.git` existed, say) cannot hold the turn.
    let deadline = tokio::time::Instant::now() + timeout;
    let never = tokio_util::sync::CancellationToken::new();
    let gated = tokio::time::timeout_at(deadline, Sandbox.spawn_gated(&policy, &argv, &never));
    let mut process = match gated.await {
        Ok(Ok(Some(process))) => process,
        Ok(Ok(None)) => return failed("was interrupted before it started".into()),
        Ok(Err(err)) => return failed(format!("could not be started in the sandbox: {err}")),
        Err(_) => {
            return HookRun {
                ending: Ending::TimedOut(timeout.as_secs()),
                stdout: String::new(),
                stderr: "it waited for the workspace gate (another command runs) until its timeout"
                    .into(),
                stdout_truncated: false,
            };
        }
    };
    if let Some(mut pipe) = process.take_stdin() {
        let input = stdin.to_vec();
        // A hook that never reads its stdin gets EPIPE here, which is fine.
        tokio::spawn(async move {
            let _ = pipe.write_all(&input).await;
            let _ = pipe.shutdown().await;
        });
    }
    let mut stdout = Vec::new();
    let reading = async {
        if let Some(pipe) = process.take_stdout() {
            let _ = pipe
                .take(OUTPUT_CAP as u64 + 1)
                .read_to_end(&mut stdout)
                .await;
        }
        process.exited().await;
    };
    let ending = match tokio::time::timeout_at(deadline, reading).await {
        Err(_) => {
            process.kill();
            Ending::TimedOut(timeout.as_secs())
        }
        Ok(()) => match process.exit_status() {
            Some(status) => match (status.code(), status.signal()) {
                (Some(code), _) => Ending::Exited(code),
                (None, Some(signal)) => Ending::Signaled(signal),
                (None, None) => Ending::Failed(format!("ended with an unknown status: {status}")),
            },
            None => Ending::Failed("could not be waited for".into()),
        },
    };
    let truncated = stdout.len() > OUTPUT_CAP;
    stdout.truncate(OUTPUT_CAP);
    let stderr = process.stderr_tail();
    process.shutdown().await;
    HookRun {
        ending,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr,
        stdout_truncated: truncated,
    }
}
