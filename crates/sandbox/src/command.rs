//! Building the process for a [`Policy`]: the bubblewrap argument list, or the
//! plain `bash -c` of an unsandboxed profile. Both get the same clean environment.
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use tokio::process::Command;

use crate::run::Policy;

/// Host directories the system needs; on merged-/usr hosts these are symlinks.
const SYSTEM_DIRS: &[&str] = &["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// Pieces of /etc a shell and common tools need (name lookup, TLS, locale, shells).
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
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/bash.bashrc",
    "/etc/profile",
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
    vars
}

/// `bwrap <args> -- bash -c <command>`.
pub(crate) fn bwrap_command(bwrap: &Path, policy: &Policy, shell_command: &str) -> Command {
    let mut command = Command::new(bwrap);
    command.args(bwrap_args(policy));
    command.args(["--", "bash", "-c", shell_command]);
    // bwrap's own environment is irrelevant (it clears it), but keep secrets out of it too.
    command.env_clear();
    command
}

/// The unsandboxed fallback: the same clean environment and working directory.
pub(crate) fn plain_command(policy: &Policy, shell_command: &str) -> Command {
    let mut command = Command::new("bash");
    command.args(["-c", shell_command]);
    command.env_clear();
    command.envs(environment(policy));
    command.current_dir(&policy.workspace);
    command
}

/// The bubblewrap arguments for `policy`. Order matters: later mounts cover
/// earlier ones, so the workspace is bound after the `/tmp` tmpfs (a workspace
/// under /tmp must stay visible).
pub(crate) fn bwrap_args(policy: &Policy) -> Vec<OsString> {
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
    // A read-only parent of the workspace must come before the workspace bind
    // (or it would hide it); one inside the workspace must come after (to
    // protect e.g. `.git` there).
    let (parents, others): (Vec<&PathBuf>, Vec<&PathBuf>) = policy
        .read_only_paths
        .iter()
        .partition(|path| policy.workspace.starts_with(path));
    bind_read_only(&mut args, &parents);
    args.pair("--bind", &policy.workspace, &policy.workspace);
    bind_read_only(&mut args, &others);
    // The root bwrap builds is a writable tmpfs; without this, writes to /etc
    // or / would "succeed" in a throwaway layer and confuse the agent.
    args.flag_value("--remount-ro", "/");
    args.flag_value("--chdir", &policy.workspace);
    args.flags(&["--clearenv"]);
    for (key, value) in environment(policy) {
        args.pair("--setenv", key, value);
    }
    args.0
}

fn bind_read_only(args: &mut Args, paths: &[&PathBuf]) {
    for path in paths {
        if path.exists() {
            args.pair("--ro-bind", path, path);
        } else {
            tracing::warn!(path = %path.display(), "read-only sandbox path does not exist; skipped");
        }
    }
}

#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn flags(&mut self, flags: &[&str]) {
        self.0.extend(flags.iter().map(OsString::from));
    }

    fn flag_value(&mut self, flag: &str, value: impl Into<OsString>) {
        self.0.push(flag.into());
        self.0.push(value.into());
    }

    fn pair(&mut self, flag: &str, first: impl Into<OsString>, second: impl Into<OsString>) {
        self.0.push(flag.into());
        self.0.push(first.into());
        self.0.push(second.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bwrap_lookup_fails_closed_when_absent() {
        let empty = tempfile::tempdir().unwrap();
        let path_var = std::ffi::OsString::from(empty.path());
        assert_eq!(find_bwrap_in(Some(&path_var), &[empty.path()]), None);
        assert_eq!(find_bwrap_in(None, &[]), None);
    }

    #[test]
    fn bwrap_lookup_searches_path_first() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("bwrap");
        std::fs::write(&fake, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path_var = std::ffi::OsString::from(dir.path());
        assert_eq!(
            find_bwrap_in(Some(&path_var), &[Path::new("/usr/bin")]),
            Some(fake)
        );
    }

    #[test]
    fn policy_env_overrides_and_invalid_names_are_skipped() {
        let mut policy = Policy::new("/ws");
        policy.env.insert("TERM".into(), "xterm".into());
        policy.env.insert("BAD=NAME".into(), "x".into());
        policy.env.insert("EXTRA".into(), "1".into());
        let vars = environment(&policy);
        assert!(vars.contains(&("TERM".into(), "xterm".into())));
        assert!(vars.contains(&("HOME".into(), "/ws".into())));
        assert!(vars.contains(&("EXTRA".into(), "1".into())));
        assert!(!vars.iter().any(|(key, _)| key.contains('=')));
        assert_eq!(vars.iter().filter(|(key, _)| key == "TERM").count(), 1);
    }

    #[test]
    fn read_only_paths_are_ordered_around_the_workspace_bind() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        let mut policy = Policy::new(&ws);
        policy.read_only_paths = vec![ws.join(".git"), root.path().to_path_buf()];
        let args = bwrap_args(&policy);
        let position = |value: &Path| {
            args.iter()
                .position(|arg| arg == value.as_os_str())
                .unwrap()
        };
        let workspace_bind = args.iter().position(|arg| arg == "--bind").unwrap();
        assert!(position(root.path()) < workspace_bind);
        assert!(position(&ws.join(".git")) > workspace_bind);
    }

    #[test]
    fn network_is_shared_only_when_allowed() {
        let mut policy = Policy::new("/ws");
        assert!(!bwrap_args(&policy).iter().any(|arg| arg == "--share-net"));
        policy.network = true;
        assert!(bwrap_args(&policy).iter().any(|arg| arg == "--share-net"));
    }
}
