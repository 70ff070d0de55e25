//! What a sandboxed command may do ([`Policy`], [`Limits`]) and what a call
//! asks for and returns.
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use rustix::process::{Resource, Rlimit};

const GIB: u64 = 1 << 30;

/// What a sandboxed command may do. Its `Debug` shows variable names only:
/// values may be secrets.
#[derive(Clone)]
pub struct Policy {
    /// The only writable directory; also the working directory and `HOME`.
    pub workspace: PathBuf,
    /// Further directories bound read-only.
    pub read_only_paths: Vec<PathBuf>,
    /// Host directories bound at paths of their own ([`crate::Mount`]).
    pub mounts: Vec<crate::Mount>,
    pub network: bool,
    /// With `network` off: the host proxy that sandboxed commands reach
    /// through the egress forwarder (see [`EgressBridge`]).
    pub egress: Option<EgressBridge>,
    /// Variables passed in on top of the fixed allowlist (PATH, HOME, LANG, TERM).
    pub env: BTreeMap<String, String>,
    /// Names in `env` whose values are secret: never to be shown to the model
    /// or stored ([`Policy::secrets`]).
    pub secret_env: BTreeSet<String>,
    /// The host's SSH agent socket, bound (the socket alone) into the sandbox
    /// at [`SSH_AGENT_SOCKET`] with `SSH_AUTH_SOCK` pointing there.
    pub ssh_agent: Option<PathBuf>,
    /// Run without bubblewrap. Only when a profile says `sandbox = "off"`.
    pub unsandboxed: bool,
    /// Resource limits for the command and everything it starts (applied
    /// with or without bubblewrap).
    pub limits: Limits,
    /// Let the command write `<workspace>/.git/hooks` and `<workspace>/.git/config`
    /// (both run code the next time anyone uses git there). Off by default.
    pub allow_git_config: bool,
    /// The unprivileged user the sandbox runs as when the server is root
    /// (bubblewrap, and everything inside, with no supplementary groups).
    /// `None` for a server that is not root: it runs as the server's uid.
    pub run_as: Option<crate::confined::FsIdentity>,
    /// (device, inode) the workspace must have: the directory the turn
    /// opened. A command finding another one there is refused, so every
    /// command of a turn works in the directory its file tools use.
    pub workspace_pin: Option<(u64, u64)>,
    /// An operator's `runs_on = "host"` command (with `unsandboxed` and
    /// `run_as`), not a `sandbox = "off"` profile's: what is logged, and the
    /// process gets no new privileges (`PR_SET_NO_NEW_PRIVS`) and umask 077.
    pub host_command: bool,
}

impl Policy {
    /// The strictest policy for `workspace`: sandboxed, no network, no extra
    /// paths or variables, default [`Limits`], git hooks and config read-only.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Self {
            workspace: workspace.into(),
            read_only_paths: Vec::new(),
            mounts: Vec::new(),
            network: false,
            egress: None,
            env: BTreeMap::new(),
            secret_env: BTreeSet::new(),
            ssh_agent: None,
            unsandboxed: false,
            limits: Limits::default(),
            allow_git_config: false,
            run_as: None,
            workspace_pin: None,
            host_command: false,
        }
    }
}

/// A sandbox's only way out when its network is an allowlist: the host
/// proxy's unix socket, bound in at [`crate::EGRESS_SOCKET`]. The forwarder
/// that serves `127.0.0.1:`[`crate::EGRESS_PORT`] inside is the running
/// executable itself, handed in by descriptor ([`crate::FORWARDER`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressBridge {
    pub socket: PathBuf,
}

/// Where the host's SSH agent socket appears inside a sandbox.
pub const SSH_AGENT_SOCKET: &str = "/run/agentd/ssh-agent.sock";

impl Policy {
    /// The egress bridge, when it applies: a sandbox with the host's network
    /// needs none, and an unsandboxed command cannot have one.
    pub fn egress_bridge(&self) -> Option<&EgressBridge> {
        self.egress
            .as_ref()
            .filter(|_| !self.network && !self.unsandboxed)
    }

    /// The secret variables that are set, as (name, value), longest value
    /// first (so a secret that contains another is masked whole).
    pub fn secrets(&self) -> Vec<(&str, &str)> {
        let mut secrets: Vec<(&str, &str)> = self
            .secret_env
            .iter()
            .filter_map(|key| Some((key.as_str(), self.env.get(key)?.as_str())))
            .filter(|(_, value)| !value.is_empty())
            .collect();
        secrets.sort_by_key(|(_, value)| std::cmp::Reverse(value.len()));
        secrets
    }
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("workspace", &self.workspace)
            .field("read_only_paths", &self.read_only_paths)
            .field("mounts", &self.mounts)
            .field("network", &self.network)
            .field("egress", &self.egress)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("secret_env", &self.secret_env)
            .field("ssh_agent", &self.ssh_agent)
            .field("unsandboxed", &self.unsandboxed)
            .field("limits", &self.limits)
            .field("allow_git_config", &self.allow_git_config)
            .field("run_as", &self.run_as)
            .finish()
    }
}

/// Resource limits; `None` leaves that resource unlimited.
///
/// The rlimits (`cpu_seconds`, `address_space_bytes`, `file_size_bytes`,
/// `open_files`, and `processes` as `RLIMIT_NPROC`) are set in the child before
/// it execs, soft = hard so nothing inside can raise them, and never above the
/// server's own hard limit. `processes` and `memory_bytes` are also enforced by
/// a cgroup made for each command (`pids.max`, `memory.max`): `RLIMIT_NPROC`
/// does not bind uid 0, so when the server runs as root and no cgroup can be
/// made, a command with a process limit is refused. See the crate docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// CPU time per process (`RLIMIT_CPU`). Default 300 s.
    pub cpu_seconds: Option<u64>,
    /// Virtual address space per process (`RLIMIT_AS`). Default 4 GiB. Runtimes
    /// that reserve large address ranges up front (JVM, some WebAssembly
    /// engines) may need more.
    pub address_space_bytes: Option<u64>,
    /// Largest file a process may write (`RLIMIT_FSIZE`). Default 1 GiB.
    pub file_size_bytes: Option<u64>,
    /// Tasks (processes and threads) in the command's cgroup, and
    /// `RLIMIT_NPROC`. Default 512.
    pub processes: Option<u64>,
    /// Open file descriptors per process (`RLIMIT_NOFILE`). Default 1024.
    pub open_files: Option<u64>,
    /// Memory of the whole command (cgroup v2 `memory.max`, swap off), where
    /// the memory controller is available. Default 4 GiB.
    pub memory_bytes: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            cpu_seconds: Some(300),
            address_space_bytes: Some(4 * GIB),
            file_size_bytes: Some(GIB),
            processes: Some(512),
            open_files: Some(1024),
            memory_bytes: Some(4 * GIB),
        }
    }
}

impl Limits {
    /// No limits at all (only for callers that enforce their own).
    pub fn unlimited() -> Self {
        Self {
            cpu_seconds: None,
            address_space_bytes: None,
            file_size_bytes: None,
            processes: None,
            open_files: None,
            memory_bytes: None,
        }
    }

    /// The rlimits to set in the child: each limit as soft = hard, capped at
    /// the server's own hard limit (which it could not raise), plus no core
    /// dumps.
    pub(crate) fn rlimits(&self) -> Vec<(Resource, Rlimit)> {
        let wanted = [
            (Resource::Cpu, self.cpu_seconds),
            (Resource::As, self.address_space_bytes),
            (Resource::Fsize, self.file_size_bytes),
            (Resource::Nproc, self.processes),
            (Resource::Nofile, self.open_files),
            (Resource::Core, Some(0)),
        ];
        wanted
            .into_iter()
            .filter_map(|(resource, limit)| {
                let hard = rustix::process::getrlimit(resource).maximum;
                let value = limit?.min(hard.unwrap_or(u64::MAX));
                let limit = Rlimit {
                    current: Some(value),
                    maximum: Some(value),
                };
                Some((resource, limit))
            })
            .collect()
    }
}

#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// Run as `bash -c <command>`.
    pub command: String,
    pub timeout: Duration,
    /// Bytes of combined output kept for the result; the rest is counted, not kept.
    pub output_cap: usize,
}

/// A piece of live output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputChunk {
    Stdout(String),
    Stderr(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutcome {
    /// None when the process was killed by a signal (a sandbox's command
    /// killed on timeout or cancel may instead report bubblewrap's 128 + 9
    /// = 137, when its PID 1 died before its outer process).
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// True when output beyond `output_cap` was dropped.
    pub truncated: bool,
    /// How many bytes of output were dropped because of `output_cap`.
    pub dropped_bytes: u64,
    pub timed_out: bool,
    pub cancelled: bool,
    pub duration: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "bubblewrap (bwrap) is not installed, so sandboxed commands cannot run; install it with `apt-get install bubblewrap`"
    )]
    BwrapMissing,
    #[error("could not start the command: {0}")]
    Spawn(String),
    /// A configured limit cannot be enforced here, so nothing ran.
    #[error("refusing to run the command: {0}")]
    Limits(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_no_values_and_secrets_come_longest_first() {
        let mut policy = Policy::new("/ws");
        policy.env.insert("PLAIN".into(), "visible-value".into());
        policy.env.insert("SHORT".into(), "s3cr3t".into());
        policy.env.insert("LONG".into(), "s3cr3t-and-more".into());
        policy.env.insert("EMPTY".into(), String::new());
        policy.secret_env = ["SHORT", "LONG", "EMPTY", "UNSET"].map(String::from).into();
        let shown = format!("{policy:?}");
        assert!(
            shown.contains("PLAIN") && shown.contains("SHORT"),
            "{shown}"
        );
        assert!(!shown.contains("s3cr3t") && !shown.contains("visible-value"));
        assert_eq!(
            policy.secrets(),
            [("LONG", "s3cr3t-and-more"), ("SHORT", "s3cr3t")]
        );
    }

    #[test]
    fn rlimits_are_hard_and_skip_unlimited_ones() {
        let limits = Limits {
            cpu_seconds: None,
            file_size_bytes: Some(10 << 20),
            ..Limits::default()
        };
        let rlimits = limits.rlimits();
        assert!(
            !rlimits
                .iter()
                .any(|(resource, _)| *resource == Resource::Cpu)
        );
        let fsize = rlimits
            .iter()
            .find(|(resource, _)| *resource == Resource::Fsize)
            .unwrap()
            .1;
        assert_eq!(fsize.current, Some(10 << 20));
        assert_eq!(fsize.maximum, Some(10 << 20));
        assert!(rlimits.contains(&(
            Resource::Core,
            Rlimit {
                current: Some(0),
                maximum: Some(0)
            }
        )));
        assert!(Limits::unlimited().rlimits().len() == 1);
    }

    #[test]
    fn rlimits_never_exceed_the_current_hard_limit() {
        let limits = Limits {
            open_files: Some(u64::MAX - 1),
            ..Limits::default()
        };
        let hard = rustix::process::getrlimit(Resource::Nofile).maximum;
        let nofile = limits
            .rlimits()
            .into_iter()
            .find(|(resource, _)| *resource == Resource::Nofile)
            .unwrap()
            .1;
        assert_eq!(nofile.maximum, Some(hard.unwrap_or(u64::MAX - 1)));
    }
}
