//! Spawning a sandbox's first process under its limits: the cgroup, the
//! rlimits, the bind sources and the agent's user, applied by the trampoline
//! (when enabled) or between fork and exec.
use std::process::Stdio;

use tokio::process::{Child, Command};

use crate::cgroup::CommandCgroup;
use crate::command::Launch;
use crate::policy::{Limits, SandboxError};
use crate::run::GroupKiller;

/// Spawn `command` with piped output in its own process group, under
/// `limits` from its first instruction (rlimits and the cgroup are entered
/// before the program is exec'd: by the trampoline when enabled, else
/// between fork and exec). The killer ends the group and the cgroup. For a
/// `serving` sandbox the trampoline also hands its executable on (only with
/// the trampoline enabled).
pub(crate) fn spawn_confined(
    mut command: Command,
    stdin: Stdio,
    limits: &Limits,
    launch: &Launch,
    serving: bool,
) -> Result<(Child, GroupKiller), SandboxError> {
    // A root server never runs agent work as root: no user, no command.
    let is_root = rustix::process::geteuid().is_root();
    let run_as = launch.run_as.filter(|_| is_root);
    if run_as.is_some_and(|identity| identity.uid == 0 || identity.gid == 0) {
        return Err(SandboxError::Spawn(
            "refusing to run a sandbox as uid 0".into(),
        ));
    }
    // The forwarder is this executable, which only the trampoline hands in.
    if launch.exe && !crate::trampoline::enabled() {
        return Err(SandboxError::Spawn(
            "a network allowlist needs the agentd executable to start sandboxes".into(),
        ));
    }
    let launch = Launch {
        binds: launch.binds.clone(),
        run_as,
        exe: launch.exe,
        own_session: launch.own_session,
        host: launch.host,
    };
    let cgroup = command_cgroup(limits, is_root)?;
    // RLIMIT_NPROC counts every process of a uid on the machine: as the
    // agent's uid it would be shared by all of that user's sessions. The
    // sandbox's cgroup (`pids.max`) limits this sandbox alone.
    let mut rlimits = limits.rlimits();
    if run_as.is_some() && cgroup.is_some() {
        rlimits.retain(|(resource, _)| *resource != rustix::process::Resource::Nproc);
    }
    if crate::trampoline::enabled() {
        let join = cgroup.as_ref().map(CommandCgroup::join_path);
        command = crate::trampoline::wrap(
            command.as_std(),
            join.as_deref(),
            &rlimits,
            serving,
            &launch,
        );
    } else {
        let setup;
        (command, setup) = child_setup(command, &launch)?;
        crate::pre_exec::install(
            &mut command,
            cgroup.as_ref().map(CommandCgroup::join_file),
            rlimits,
            setup,
        );
    }
    // An unsandboxed command starts a session of its own (which is also a
    // process group of its own, as a sandbox gets): the trampoline does
    // that itself; otherwise a hook, after those of `install`.
    if launch.own_session {
        if !crate::trampoline::enabled() {
            crate::pre_exec::detach(&mut command, launch.host);
        }
    } else {
        command.process_group(0);
    }
    // A serving sandbox's commands get pipes of their own; what it says
    // itself (why it stopped serving, bwrap's errors) goes to our stderr.
    let (stdout, stderr) = if serving {
        (Stdio::null(), Stdio::inherit())
    } else {
        (Stdio::piped(), Stdio::piped())
    };
    command
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        .kill_on_drop(true);
    let child = command
        .spawn()
        .map_err(|err| SandboxError::Spawn(err.to_string()))?;
    let group = GroupKiller::new(&child, cgroup, !launch.own_session);
    Ok((child, group))
}

/// Without the trampoline: open the bind sources here, and point the
/// arguments at what the child will have (the descriptors themselves, or
/// their staged copies when it becomes the agent's user).
fn child_setup(
    command: Command,
    launch: &Launch,
) -> Result<(Command, crate::pre_exec::ChildSetup), SandboxError> {
    let opened = crate::binds::open_all(&launch.binds)
        .map_err(|err| SandboxError::Spawn(err.to_string()))?;
    let std_command = command.as_std();
    let mut args: Vec<std::ffi::OsString> = std_command.get_args().map(ToOwned::to_owned).collect();
    let mut staged = Vec::new();
    if launch.run_as.is_some() {
        crate::binds::point_at_staged(&mut args);
        for ((target, _), bind) in opened.iter().zip(&launch.binds) {
            let to = std::ffi::CString::new(format!("/tmp/{target}"))
                .map_err(|err| SandboxError::Spawn(err.to_string()))?;
            staged.push((to, bind.directory));
        }
    } else {
        crate::binds::renumber(&mut args, &opened);
    }
    let mut rebuilt = Command::new(std_command.get_program());
    rebuilt.args(args);
    crate::trampoline::copy_env(std_command, &mut rebuilt);
    let setup = crate::pre_exec::ChildSetup {
        binds: opened.into_iter().map(|(_, fd)| fd).collect(),
        staged,
        run_as: launch.run_as,
    };
    Ok((rebuilt, setup))
}

/// The cgroup that carries the process and memory limits. Failing to make one
/// is fatal only where nothing else enforces the process limit: for uid 0,
/// which the kernel exempts from `RLIMIT_NPROC`.
pub(crate) fn command_cgroup(
    limits: &Limits,
    is_root: bool,
) -> Result<Option<CommandCgroup>, SandboxError> {
    if limits.processes.is_none() && limits.memory_bytes.is_none() {
        return Ok(None);
    }
    cgroup_or_refusal(CommandCgroup::create(limits), limits, is_root)
}

fn cgroup_or_refusal<T>(
    created: std::io::Result<T>,
    limits: &Limits,
    is_root: bool,
) -> Result<Option<T>, SandboxError> {
    match created {
        Ok(cgroup) => Ok(Some(cgroup)),
        Err(err) if is_root && limits.processes.is_some() => Err(SandboxError::Limits(format!(
            "the process limit cannot be enforced: the server runs as root, which \
             RLIMIT_NPROC does not bind, and no cgroup could be made ({err}); give it a \
             writable cgroup hierarchy with the pids controller, run it as an \
             unprivileged user, or remove the process limit"
        ))),
        Err(err) => {
            tracing::debug!(%err, "no sandbox cgroup; relying on rlimits");
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed() -> std::io::Result<()> {
        Err(std::io::Error::other("no cgroups here"))
    }

    #[test]
    fn root_without_a_cgroup_is_refused_when_processes_are_limited() {
        let limits = Limits::default();
        let refused = cgroup_or_refusal(failed(), &limits, true).unwrap_err();
        assert!(matches!(refused, SandboxError::Limits(_)), "{refused}");
        assert!(refused.to_string().contains("no cgroups here"));
    }

    #[test]
    fn without_a_cgroup_rlimits_suffice_for_others() {
        let limits = Limits::default();
        assert!(
            cgroup_or_refusal(failed(), &limits, false)
                .unwrap()
                .is_none()
        );
        let no_process_limit = Limits {
            processes: None,
            ..Limits::default()
        };
        assert!(
            cgroup_or_refusal(failed(), &no_process_limit, true)
                .unwrap()
                .is_none()
        );
        assert_eq!(cgroup_or_refusal(Ok(7), &limits, true).unwrap(), Some(7));
    }
}
