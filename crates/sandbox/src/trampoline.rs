//! Starting sandboxed commands without forking the server.
//!
//! The cgroup join and the rlimits must happen in the child before it execs
//! (see the crate docs). Doing that in a `pre_exec` hook makes the standard
//! library fork the whole server: the kernel copies every page table of a
//! process that may hold hundreds of MiB, and the child tears that copy down
//! again at exec. Profiles of 1 000 concurrent turns put a third of the
//! server's CPU there, and the fork holds the address-space lock that every
//! other thread's page faults wait for.
//!
//! Instead a small executable is started first (`agentd-sandbox
//! __sandbox-enter …`, or the server's own, see `enter_exe`): without a
//! hook the standard library uses `posix_spawn`, which shares the address space until exec. That small
//! process joins the cgroup, sets the rlimits and execs the real program, so
//! nothing the command runs is ever outside its limits. A binary opts in by
//! calling [`run_if_asked`] first thing in `main` and then [`enable`]; anything
//! else (tests, examples) keeps the `pre_exec` hook.

use std::ffi::{OsStr, OsString};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::process::{Resource, Rlimit};

use crate::command::Launch;
use crate::confined::FsIdentity;

/// The hidden first argument that makes the executable a trampoline.
const ENTER: &str = "__sandbox-enter";

/// The same, also handing the executable on as descriptor 3 (for bubblewrap
/// to start a serving sandbox with, see the `serve` module, or for the
/// egress forwarder of a sandbox with a network allowlist).
const ENTER_SERVING: &str = "__sandbox-enter-serving";

/// The same for an unsandboxed command: first a session of its own
/// (`pre_exec::harden`), and for a host command (`_HOST`) no new privileges
/// and umask 077.
const ENTER_SESSION: &str = "__sandbox-enter-session";
const ENTER_HOST: &str = "__sandbox-enter-host";

// This executable, as the kernel knows it: stays right even if the file on
// disk is replaced by an upgrade while the server runs.
use crate::enter_exe::SELF_EXE;

/// Exit status when the limits cannot be applied (the program never runs).
const CANNOT_ENTER: i32 = 126;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Start sandboxed commands through this executable from now on. Only for a
/// binary whose `main` calls [`run_if_asked`] first.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// `command` (whose environment was cleared, as every command built here
/// is) started through the trampoline: inside its cgroup (`cgroup_procs`,
/// the file a process writes `0` to in order to join) and with `rlimits`.
pub(crate) fn wrap(
    command: &std::process::Command,
    cgroup_procs: Option<&std::path::Path>,
    rlimits: &[(Resource, Rlimit)],
    serving: bool,
    launch: &Launch,
) -> tokio::process::Command {
    let mut wrapped = tokio::process::Command::new(crate::enter_exe::program());
    let mut args = enter_args(cgroup_procs, rlimits, launch, command.get_program());
    if serving || launch.exe {
        args[0] = ENTER_SERVING.into();
    } else if launch.host {
        args[0] = ENTER_HOST.into();
    } else if launch.own_session {
        args[0] = ENTER_SESSION.into();
    }
    wrapped.args(args).args(command.get_args());
    copy_env(command, &mut wrapped);
    wrapped
}

/// Give `to` the environment of `from` (only that: `to`'s is cleared) and
/// its working directory.
pub(crate) fn copy_env(from: &std::process::Command, to: &mut tokio::process::Command) {
    to.env_clear();
    for (key, value) in from.get_envs() {
        if let Some(value) = value {
            to.env(key, value);
        }
    }
    if let Some(dir) = from.get_current_dir() {
        to.current_dir(dir);
    }
}

fn enter_args(
    cgroup_procs: Option<&std::path::Path>,
    rlimits: &[(Resource, Rlimit)],
    launch: &Launch,
    program: &OsStr,
) -> Vec<OsString> {
    let join = cgroup_procs.map_or_else(|| OsString::from("-"), |p| p.as_os_str().to_owned());
    // `Limits::rlimits` sets every limit soft = hard to a number, from the
    // resources in `NAMES`; anything else would be dropped here, so it must
    // stay that way (`every_limit_the_policy_sets_reaches_the_trampoline`).
    let limits = rlimits
        .iter()
        .filter_map(|(resource, limit)| {
            let value = limit.maximum?;
            Some(format!("{}={value}", name(*resource)?))
        })
        .collect::<Vec<_>>()
        .join(",");
    let run_as = launch
        .run_as
        .map_or_else(|| "-".to_string(), |id| format!("{}:{}", id.uid, id.gid));
    let mut args = vec![
        ENTER.into(),
        join,
        if limits.is_empty() {
            "-".into()
        } else {
            limits.into()
        },
        run_as.into(),
    ];
    args.extend(crate::binds::to_args(&launch.binds));
    args.push(program.to_owned());
    args
}

const NAMES: [(Resource, &str); 6] = [
    (Resource::Cpu, "cpu"),
    (Resource::As, "as"),
    (Resource::Fsize, "fsize"),
    (Resource::Nproc, "nproc"),
    (Resource::Nofile, "nofile"),
    (Resource::Core, "core"),
];

fn name(resource: Resource) -> Option<&'static str> {
    NAMES
        .iter()
        .find(|(r, _)| *r == resource)
        .map(|(_, name)| *name)
}

fn resource(name: &str) -> Option<Resource> {
    NAMES.iter().find(|(_, n)| *n == name).map(|(r, _)| *r)
}

/// When this process was started as a trampoline, apply the limits and exec
/// the program; never returns then. Otherwise returns at once. Call it before
/// anything else in `main` (no threads, no runtime).
pub fn run_if_asked() {
    let mut args = std::env::args_os();
    let mode = match args.nth(1) {
        Some(first) if first == ENTER => Mode::Plain,
        Some(first) if first == ENTER_SERVING => Mode::Serving,
        Some(first) if first == ENTER_SESSION => Mode::Session { host: false },
        Some(first) if first == ENTER_HOST => Mode::Session { host: true },
        Some(first) if first == crate::serve::SERVE => crate::serve::serve(),
        Some(first) if first == crate::enter_exe::REPORT_BUILD => {
            println!("{}", crate::enter_exe::BUILD);
            std::process::exit(0)
        }
        Some(first) if first == crate::egress_forward::FORWARD => {
            crate::egress_forward::run(&args.collect::<Vec<_>>())
        }
        _ => return,
    };
    let rest: Vec<OsString> = args.collect();
    let error = match enter(&rest, mode) {
        Ok(never) => match never {},
        Err(error) => error,
    };
    eprintln!("agentd: cannot start the sandboxed command: {error}");
    std::process::exit(CANNOT_ENTER);
}

enum Never {}

#[derive(Clone, Copy)]
enum Mode {
    Plain,
    Serving,
    Session { host: bool },
}

fn enter(args: &[OsString], mode: Mode) -> Result<Never, String> {
    if let Mode::Session { host } = mode {
        // First: until then the process is in the server's group.
        crate::pre_exec::harden(host).map_err(|err| format!("starting a session: {err}"))?;
    }
    let serving = matches!(mode, Mode::Serving);
    let [join, limits, run_as, rest @ ..] = args else {
        return Err("usage: __sandbox-enter JOIN LIMITS RUN_AS BINDS PROGRAM [ARG…]".into());
    };
    let (binds, rest) = crate::binds::from_args(rest)?;
    let [program, argv @ ..] = rest else {
        return Err("no program".into());
    };
    let limits = if limits == "-" {
        Vec::new()
    } else {
        parse_limits(limits)?
    };
    let run_as = parse_identity(run_as)?;
    // Everything that needs descriptors or memory comes before the limits,
    // which may allow little of either.
    crate::pre_exec::close_inherited_fds()
        .map_err(|err| format!("closing inherited descriptors: {err}"))?;
    let _binds = hand_over_binds(&binds, run_as)?;
    // Opened here, so it is this executable even if the file was replaced.
    let _exe = if serving {
        let exe = std::fs::File::open(SELF_EXE).map_err(|err| format!("{SELF_EXE}: {err}"))?;
        let exe = std::os::fd::OwnedFd::from(exe);
        crate::pre_exec::hand_over_exe(&exe)
            .map_err(|err| format!("handing over the executable: {err}"))?;
        Some(exe)
    } else {
        None
    };
    let mut command = std::process::Command::new(program);
    command.args(argv);
    if join != "-" {
        // First, so every process the command ever starts is counted.
        std::fs::write(join, b"0")
            .map_err(|err| format!("joining cgroup {}: {err}", join.to_string_lossy()))?;
    }
    for (resource, limit) in limits {
        rustix::process::setrlimit(resource, limit)
            .map_err(|err| format!("setting limit {resource:?}: {err}"))?;
    }
    if let Some(identity) = run_as {
        crate::become_user::become_user(identity)
            .map_err(|err| format!("becoming uid {}: {err}", identity.uid))?;
    }
    // Environment, working directory and stdio are this process's: the
    // server set them up for the program.
    use std::os::unix::process::CommandExt;
    let err = command.exec();
    Err(format!("{}: {err}", program.to_string_lossy()))
}

fn parse_identity(arg: &OsStr) -> Result<Option<FsIdentity>, String> {
    if arg == "-" {
        return Ok(None);
    }
    let text = arg.to_str().ok_or("bad user")?;
    let (uid, gid) = text.split_once(':').ok_or("bad user")?;
    let identity = FsIdentity {
        uid: uid.parse().map_err(|_| "bad uid")?,
        gid: gid.parse().map_err(|_| "bad gid")?,
    };
    if identity.uid == 0 || identity.gid == 0 {
        return Err("refusing to run a sandbox as uid or gid 0".into());
    }
    Ok(Some(identity))
}

/// Open the bind sources, check they are what the arguments were built
/// from, stage them for the agent's user when there is one, and put them
/// where bubblewrap's `--bind-fd` arguments expect them.
fn hand_over_binds(
    binds: &[crate::binds::FdBind],
    run_as: Option<FsIdentity>,
) -> Result<Vec<std::os::fd::OwnedFd>, String> {
    use std::os::fd::AsFd;
    let opened = crate::binds::open_all(binds).map_err(|err| err.to_string())?;
    let opened = if run_as.is_some() && !opened.is_empty() {
        let places: Vec<std::ffi::CString> = opened
            .iter()
            .map(|(target, _)| cstring(format!("/tmp/{target}")))
            .collect();
        let staged: Vec<crate::become_user::Staged<'_>> = opened
            .iter()
            .zip(binds)
            .zip(&places)
            .map(|(((_, fd), bind), to)| crate::become_user::Staged {
                from: fd.as_fd(),
                to,
                directory: bind.directory,
            })
            .collect();
        crate::become_user::stage(staged.iter())
            .map_err(|err| format!("staging the binds: {err}"))?;
        drop(staged);
        // Closed before `place` puts descriptors at their numbers: a
        // descriptor dropped after that could close one of those.
        let targets: Vec<i32> = opened.iter().map(|(target, _)| *target).collect();
        drop(opened);
        places
            .iter()
            .zip(targets)
            .map(|(to, target)| {
                let fd = rustix::fs::open(
                    to.as_c_str(),
                    rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
                    rustix::fs::Mode::empty(),
                )
                .map_err(|err| format!("reopening a staged bind: {err}"))?;
                Ok((target, fd))
            })
            .collect::<Result<Vec<_>, String>>()?
    } else {
        opened
    };
    crate::binds::place(opened).map_err(|err| format!("handing over the binds: {err}"))
}

fn cstring(text: String) -> std::ffi::CString {
    // Digits and slashes only: never an interior NUL.
    std::ffi::CString::new(text).unwrap_or_default()
}

fn parse_limits(limits: &OsStr) -> Result<Vec<(Resource, Rlimit)>, String> {
    let text = limits.to_str().ok_or("bad limits")?;
    text.split(',')
        .map(|item| {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| format!("bad limit {item:?}"))?;
            let resource = resource(name).ok_or_else(|| format!("unknown limit {name:?}"))?;
            let value: u64 = value
                .parse()
                .map_err(|_| format!("bad limit value {item:?}"))?;
            let limit = Rlimit {
                current: Some(value),
                maximum: Some(value),
            };
            Ok((resource, limit))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_round_trip_through_the_arguments() {
        let limit = |v| Rlimit {
            current: Some(v),
            maximum: Some(v),
        };
        let rlimits = [
            (Resource::Cpu, limit(300)),
            (Resource::Nofile, limit(1024)),
            (Resource::Core, limit(0)),
        ];
        let procs = std::path::Path::new("/sys/fs/cgroup/x/cgroup.procs");
        let mut bwrap = std::process::Command::new("/usr/bin/bwrap");
        bwrap
            .args(["--ro-bind", "/usr", "/usr"])
            .env_clear()
            .env("A", "1");
        let wrapped = wrap(&bwrap, Some(procs), &rlimits, false, &Launch::default());
        let wrapped = wrapped.as_std();
        assert_eq!(wrapped.get_program(), "/proc/self/exe");
        let args: Vec<_> = wrapped.get_args().collect();
        assert_eq!(
            args,
            [
                "__sandbox-enter",
                "/sys/fs/cgroup/x/cgroup.procs",
                "cpu=300,nofile=1024,core=0",
                "-",
                "0",
                "/usr/bin/bwrap",
                "--ro-bind",
                "/usr",
                "/usr"
            ]
        );
        let envs: Vec<_> = wrapped.get_envs().collect();
        assert_eq!(envs, [(OsStr::new("A"), Some(OsStr::new("1")))]);
        let bare = enter_args(None, &[], &Launch::default(), OsStr::new("bash"));
        assert_eq!(bare[1..3], ["-", "-"]);
        for (resource, _) in rlimits {
            assert_eq!(name(resource).and_then(super::resource), Some(resource));
        }
    }

    #[test]
    fn every_limit_the_policy_sets_reaches_the_trampoline() {
        let rlimits = crate::Limits::default().rlimits();
        let args = enter_args(None, &rlimits, &Launch::default(), OsStr::new("bash"));
        let passed = parse_limits(&args[2]).unwrap();
        assert_eq!(passed.len(), rlimits.len(), "{args:?}");
        for ((sent, _), (got, limit)) in rlimits.iter().zip(&passed) {
            assert_eq!(sent, got);
            assert!(limit.maximum.is_some());
        }
    }
}
