//! Building the process for a [`Policy`]: the bubblewrap argument list, or the
//! plain `bash -c` of an unsandboxed profile. Both get the same clean environment.
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use tokio::process::Command;

use crate::bind_args::{Args, BindList, protect_git};
use crate::binds::{FIRST_BIND_FD, FdBind, Source, inside};
use crate::confined::FsIdentity;
use crate::policy::{Policy, SSH_AGENT_SOCKET};

/// What the process that execs a sandbox's program must do first: hand over
/// the bind sources (and, for the egress forwarder, the executable), and
/// become the agent's user.
#[derive(Debug, Clone, Default)]
pub(crate) struct Launch {
    pub(crate) binds: Vec<FdBind>,
    pub(crate) run_as: Option<FsIdentity>,
    /// Hand the running executable in as descriptor 3 (the forwarder).
    pub(crate) exe: bool,
    /// Unsandboxed: start a session of its own (`setsid`), so the command
    /// has no controlling terminal (bubblewrap's `--new-session` does this
    /// for a sandbox).
    pub(crate) own_session: bool,
    /// An operator's host command: also `PR_SET_NO_NEW_PRIVS` and umask 077.
    pub(crate) host: bool,
}

impl Launch {
    /// For an unsandboxed command: no binds, the same user.
    pub(crate) fn plain(policy: &Policy) -> Self {
        Self {
            binds: Vec::new(),
            run_as: policy.run_as,
            exe: false,
            own_session: true,
            host: policy.host_command,
        }
    }
}

/// Host directories the system needs; on merged-/usr hosts these are symlinks.
const SYSTEM_DIRS: &[&str] = &["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// Pieces of /etc that commands read at run time (name lookup, TLS, the
/// dynamic loader's cache, Debian alternatives, time zone). Each bind costs
/// bubblewrap ~0.15 ms, so files only tools like `ldconfig` or login shells
/// read (`ld.so.conf*`, `profile`, `bash.bashrc`) are left out.
const ETC_ENTRIES: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/localtime",
];

const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Where bubblewrap is installed: the first `bwrap` on PATH, else the usual places.
pub(crate) fn find_bwrap() -> Option<PathBuf> {
    let fallbacks = [Path::new("/usr/bin"), Path::new("/usr/local/bin")];
    find_bwrap_in(std::env::var_os("PATH").as_deref(), &fallbacks)
}

fn find_bwrap_in(path_var: Option<&std::ffi::OsStr>, fallback_dirs: &[&Path]) -> Option<PathBuf> {
    let on_path = path_var.map(|path| std::env::split_paths(path).collect::<Vec<_>>());
    let fallbacks = fallback_dirs.iter().map(|dir| dir.to_path_buf());
    on_path
        .unwrap_or_default()
        .into_iter()
        .chain(fallbacks)
        // An empty or relative PATH entry would pick up a `bwrap` from the current directory.
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("bwrap"))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The fixed variables plus the policy's own; later entries win.
fn environment(policy: &Policy) -> Vec<(String, String)> {
    let mut vars = vec![
        ("PATH".to_string(), SANDBOX_PATH.to_string()),
        ("HOME".to_string(), policy.workspace.display().to_string()),
        ("LANG".to_string(), "C.UTF-8".to_string()),
        ("TERM".to_string(), "dumb".to_string()),
    ];
    for (key, value) in &policy.env {
        // A key with `=` or NUL cannot be a variable; skipping it beats a confusing spawn error.
        if key.is_empty() || key.contains(['=', '\0']) || value.contains('\0') {
            tracing::warn!(
                key,
                "ignoring invalid environment variable name in sandbox policy"
            );
            continue;
        }
        vars.retain(|(existing, _)| existing != key);
        vars.push((key.clone(), value.clone()));
    }
    if let Some(host_socket) = &policy.ssh_agent {
        let socket = match policy.unsandboxed {
            true => host_socket.display().to_string(),
            false => SSH_AGENT_SOCKET.to_string(),
        };
        vars.retain(|(existing, _)| existing != "SSH_AUTH_SOCK");
        vars.push(("SSH_AUTH_SOCK".to_string(), socket));
    }
    if policy.egress_bridge().is_some() {
        let proxy = format!("http://127.0.0.1:{}", crate::EGRESS_PORT);
        for key in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            vars.retain(|(existing, _)| existing != key);
            vars.push((key.to_string(), proxy.clone()));
        }
        // Everything goes through the proxy, local names too.
        for key in ["NO_PROXY", "no_proxy"] {
            vars.retain(|(existing, _)| existing != key);
            vars.push((key.to_string(), String::new()));
        }
    }
    vars
}

/// Secret variables; their `Debug` shows the names alone.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct SecretEnv(pub(crate) Vec<(String, String)>);

impl std::fmt::Debug for SecretEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(key, _)| key))
            .finish()
    }
}

/// A policy's bubblewrap invocation, computed once per command (computing it
/// stats the host, so it is also how a prestarted spare is matched).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BwrapSpec {
    pub(crate) bwrap: PathBuf,
    pub(crate) args: Vec<OsString>,
    /// Variables whose values are secret: given to bubblewrap in its own
    /// environment (which the sandbox inherits), never in its arguments,
    /// which any user of the host can read in `/proc/PID/cmdline`.
    pub(crate) secret_env: SecretEnv,
    /// The sources `--bind-fd`/`--ro-bind-fd` in `args` name, as recorded.
    pub(crate) binds: Vec<FdBind>,
    pub(crate) run_as: Option<FsIdentity>,
    /// The egress forwarder (the running executable, handed in as
    /// descriptor 3) starts before each program.
    pub(crate) forwarder: bool,
}

impl BwrapSpec {
    pub(crate) fn new(bwrap: PathBuf, policy: &Policy) -> std::io::Result<Self> {
        let (args, binds) = bwrap_args(policy)?;
        let secret_env = SecretEnv(
            environment(policy)
                .into_iter()
                .filter(|(key, _)| policy.secret_env.contains(key))
                .collect(),
        );
        Ok(Self {
            args,
            secret_env,
            binds,
            bwrap,
            run_as: policy.run_as,
            forwarder: policy.egress_bridge().is_some(),
        })
    }

    /// Equal but perhaps for what the descriptor-bound sources are now.
    pub(crate) fn same_shape(&self, other: &Self) -> bool {
        self.bwrap == other.bwrap
            && self.args == other.args
            && self.secret_env == other.secret_env
            && self.run_as == other.run_as
            && self.forwarder == other.forwarder
            && self.binds.len() == other.binds.len()
            && self.binds.iter().zip(&other.binds).all(|(a, b)| {
                a.fd == b.fd
                    && a.source == b.source
                    && a.directory == b.directory
                    && a.socket == b.socket
            })
    }

    /// How the process that execs bubblewrap must prepare it.
    pub(crate) fn launch(&self) -> Launch {
        Launch {
            binds: self.binds.clone(),
            run_as: self.run_as,
            exe: self.forwarder,
            own_session: false,
            host: false,
        }
    }

    /// Whether a source inside the workspace is bound, so that a command
    /// swapping names there while this sandbox starts could misdirect a
    /// mount (see the `gate` module).
    pub(crate) fn pins_workspace(&self) -> bool {
        self.binds
            .iter()
            .any(|bind| matches!(bind.source, Source::InWorkspace(_)))
    }

    /// `bwrap <args> --as-pid-1 -- /proc/self/fd/3 __sandbox-serve <ns>`: a
    /// serving sandbox, whose executable the trampoline hands over as
    /// descriptor 3, told this process's PID namespace (it must be in another).
    pub(crate) fn serve(&self, host_pid_namespace: u64) -> Command {
        let mut command = Command::new(&self.bwrap);
        command.args(&self.args);
        command.args(["--as-pid-1", "--"]);
        command.arg(format!("/proc/self/fd/{}", crate::serve::SELF_FD));
        command.args([crate::serve::SERVE, &host_pid_namespace.to_string()]);
        command.env_clear();
        command.envs(self.secret_env.0.iter().map(|(k, v)| (k, v)));
        command
    }

    /// `bwrap <args> -- bash -c <command>`: the command starts the egress
    /// forwarder itself (`egress_forward::shell_command`), as it must in a
    /// serving sandbox.
    pub(crate) fn shell(&self, shell_command: &str) -> Command {
        self.bwrap_then(&["bash", "-c", shell_command])
    }

    /// `bwrap <args> -- <argv>`: bwrap execs `argv` itself (searching the
    /// sandbox's PATH), so no shell ever parses it. With the egress
    /// forwarder, it starts first and then execs `argv`.
    pub(crate) fn exec(&self, argv: &[&str]) -> Command {
        if !self.forwarder {
            return self.bwrap_then(argv);
        }
        let prefix = crate::egress_forward::exec_prefix();
        let prefixed: Vec<&str> = prefix
            .iter()
            .map(String::as_str)
            .chain(argv.iter().copied())
            .collect();
        self.bwrap_then(&prefixed)
    }

    fn bwrap_then(&self, argv: &[&str]) -> Command {
        let mut command = Command::new(&self.bwrap);
        command.args(&self.args);
        command.arg("--");
        command.args(argv);
        // bwrap passes its environment on: only the secret variables.
        command.env_clear();
        command.envs(self.secret_env.0.iter().map(|(k, v)| (k, v)));
        command
    }
}

/// The unsandboxed fallback: the same clean environment and working directory.
pub(crate) fn plain_command(policy: &Policy, shell_command: &str) -> Command {
    plain_exec(policy, "bash", &["-c", shell_command])
}

/// [`plain_command`] for a program and its arguments.
pub(crate) fn plain_exec(policy: &Policy, program: &str, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    command.args(args);
    command.env_clear();
    command.envs(environment(policy));
    command.current_dir(&policy.workspace);
    command
}

/// The bubblewrap arguments for `policy` and the sources they bind by
/// descriptor. Order matters: later mounts cover earlier ones, so the
/// workspace is bound after the `/tmp` tmpfs (a workspace under /tmp must
/// stay visible). Fixed system directories are bound by path; everything
/// else (the workspace, what is inside it, extra read-only paths) by
/// descriptor (see the `binds` module).
pub(crate) fn bwrap_args(policy: &Policy) -> std::io::Result<(Vec<OsString>, Vec<FdBind>)> {
    let mut args = Args::default();
    args.flags(&[
        "--die-with-parent",
        "--new-session",
        "--unshare-all",
        "--cap-drop",
        "ALL",
    ]);
    if policy.network {
        args.flags(&["--share-net"]);
    }
    args.pair("--ro-bind", "/usr", "/usr");
    for dir in SYSTEM_DIRS {
        let host = Path::new(dir);
        match std::fs::symlink_metadata(host) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(host) {
                    args.pair("--symlink", target, host);
                }
            }
            Ok(meta) if meta.is_dir() => args.pair("--ro-bind", host, host),
            _ => {}
        }
    }
    for entry in ETC_ENTRIES {
        if Path::new(entry).exists() {
            args.pair("--ro-bind", entry, entry);
        }
    }
    args.flags(&["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
    let shield = tmp_shield(&policy.workspace);
    if let Some(shield) = &shield {
        args.flag_value("--tmpfs", shield);
    }
    let mut binds = BindList::default();
    let workspace_fd = binds.workspace(&policy.workspace, policy.workspace_pin)?;
    // A read-only parent of the workspace must come before the workspace bind
    // (or it would hide it); one inside the workspace must come after (to
    // protect e.g. `.git` there).
    let (parents, others): (Vec<&PathBuf>, Vec<&PathBuf>) = policy
        .read_only_paths
        .iter()
        .partition(|path| policy.workspace.starts_with(path));
    for path in parents {
        binds.read_only(&mut args, Source::Path(path.clone()), path, None)?;
    }
    args.fd_bind("--bind-fd", FIRST_BIND_FD, &policy.workspace);
    if !policy.allow_git_config {
        protect_git(&mut args, &mut binds, &workspace_fd, policy)?;
    }
    for path in others {
        let source = match inside(&policy.workspace, path) {
            Some(rel) => Source::InWorkspace(rel),
            None => Source::Path(path.clone()),
        };
        binds.read_only(&mut args, source, path, Some(&workspace_fd))?;
    }
    mount_host_dirs(&mut args, &mut binds, policy)?;
    if let Some(shield) = &shield {
        args.flag_value("--remount-ro", shield);
    }
    if let Some(socket) = &policy.ssh_agent {
        // By descriptor like every other bind: the socket object recorded
        // here is the one mounted, and nothing else of its directory is.
        if !socket.is_absolute() || !binds.socket(&mut args, socket, Path::new(SSH_AGENT_SOCKET))? {
            tracing::warn!(path = %socket.display(), "the SSH agent socket is missing or not a socket; not bound");
        }
    }
    if let Some(egress) = policy.egress_bridge() {
        bind_egress(&mut args, &mut binds, egress)?;
    }
    // The root bwrap builds is a writable tmpfs; without this, writes to /etc
    // or / would "succeed" in a throwaway layer and confuse the agent.
    args.flag_value("--remount-ro", "/");
    args.flag_value("--chdir", &policy.workspace);
    // bwrap's own environment holds the secret variables alone (see
    // `BwrapSpec::secret_env`); the rest are set here.
    for (key, value) in environment(policy) {
        if !policy.secret_env.contains(&key) {
            args.pair("--setenv", key, value);
        }
    }
    Ok((args.0, binds.list))
}

/// The policy's host mounts, by descriptor, each the very directory the
/// server checked (its pin): a host that is missing, reached through a link
/// or another object now refuses the sandbox; none is silently left out.
fn mount_host_dirs(args: &mut Args, binds: &mut BindList, policy: &Policy) -> std::io::Result<()> {
    crate::mounts::check_mounts(&policy.mounts, &policy.workspace)
        .map_err(std::io::Error::other)?;
    for mount in &policy.mounts {
        binds.mount(args, mount)?;
    }
    Ok(())
}

/// The proxy's socket, by descriptor like every other bind. Without it
/// there is no way out (the command still runs, offline). The forwarder is
/// not in the file system at all: see [`Launch::exe`].
fn bind_egress(
    args: &mut Args,
    binds: &mut BindList,
    egress: &crate::EgressBridge,
) -> std::io::Result<()> {
    let socket = Path::new(crate::EGRESS_SOCKET);
    if !egress.socket.is_absolute() || !binds.socket(args, &egress.socket, socket)? {
        tracing::warn!(path = %egress.socket.display(), "the egress proxy socket is missing; not bound");
    }
    Ok(())
}

/// For a workspace deeper under `/tmp`, the directory that shields its
/// ancestors: without it they would be writable directories of the `/tmp`
/// tmpfs, and `echo x > ../f` would "succeed" in a throwaway layer. The shield
/// is a tmpfs remounted read-only after the workspace is bound into it (the
/// remount does not reach the workspace's own mount).
fn tmp_shield(workspace: &Path) -> Option<PathBuf> {
    let below = workspace.strip_prefix("/tmp").ok()?;
    let mut components = below.components();
    let first = components.next()?;
    components.next()?;
    Some(Path::new("/tmp").join(first))
}

#[cfg(test)]
#[path = "command_tests.rs"]
mod tests;
