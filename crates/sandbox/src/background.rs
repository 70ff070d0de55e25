//! Shell commands that outlive the call that started them (`Bash` with
//! `run_in_background`): a cold sandbox of their own, under the same
//! [`Policy`] as a foreground command, with stdout and stderr piped to the
//! caller and no wall-clock timeout.
use std::process::Stdio;

use tokio_util::sync::CancellationToken;

use crate::command::{Launch, plain_command};
use crate::launch::spawn_confined;
use crate::policy::{Policy, SandboxError};
use crate::run::{Sandbox, bwrap_spec, enter_gate};
use crate::spawn::SandboxedProcess;

impl Sandbox {
    /// Start `command` (`bash -c`) under `policy` and return at once; stdin
    /// is `/dev/null`, stdout and stderr are the caller's
    /// ([`SandboxedProcess::take_stdout`], [`SandboxedProcess::take_stderr`]).
    /// `None` when `cancel` came before it started (nothing ran).
    ///
    /// Guarantees as for [`Sandbox::exec`], except the timeout: it never
    /// uses a spare (a spare's sandbox is ended with its command's call);
    /// it holds its pass of the workspace gate, like any cold command, until
    /// it ends; when the main process ends, its group and cgroup are killed;
    /// [`SandboxedProcess::kill`] or dropping it kills them at once.
    pub async fn spawn_shell(
        &self,
        policy: &Policy,
        command: &str,
        cancel: &CancellationToken,
    ) -> Result<Option<SandboxedProcess>, SandboxError> {
        let bwrap = bwrap_spec(policy)?;
        // Biased: an interrupt that came first starts nothing.
        let (pass, bwrap) = tokio::select! {
            biased;
            () = cancel.cancelled() => return Ok(None),
            entered = enter_gate(policy, bwrap) => entered?,
        };
        let (shell, launch) = match &bwrap {
            Some(spec) => {
                let command = crate::egress_forward::shell_command(Some(spec), command);
                (spec.shell(&command), spec.launch())
            }
            None => (plain_command(policy, command), Launch::plain(policy)),
        };
        let (child, group) = spawn_confined(shell, Stdio::null(), &policy.limits, &launch, false)?;
        Ok(Some(SandboxedProcess::supervise(
            child,
            group,
            None,
            Some(pass),
        )))
    }
}
