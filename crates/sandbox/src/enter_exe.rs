//! Which executable sandboxes start through.
//!
//! Every sandboxed command starts with an `exec` of the trampoline, and a
//! serving sandbox's init is that executable again. agentd's own executable
//! is large and position-independent: each start costs ~2 ms of CPU, most of
//! it the loader relocating it. So a build also makes `agentd-sandbox`, a
//! small executable with only this crate's entry points
//! ([`crate::trampoline::run_if_asked`]). Sandboxes start through it when it
//! lies beside the running executable, is a regular executable file of the
//! same owner that no one else may write, and reports this very build (the
//! arguments and messages between the two are defined in this crate, whose
//! sources the build digest covers). Otherwise through the running
//! executable itself. The helper is copied once into a sealed memory file,
//! which is what is checked and run: rewriting or replacing the file later
//! changes nothing (the running agentd's own file is safe from writes only
//! because it runs).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rustix::fs::{FileType, Mode, OFlags};

/// The helper's file name, beside the running executable.
pub const HELPER_NAME: &str = "agentd-sandbox";

/// This build of the sandbox crate (see `build.rs`).
pub(crate) const BUILD: &str = env!("AGENTD_SANDBOX_BUILD");

/// The argument that makes the executable print [`BUILD`] and exit.
pub(crate) const REPORT_BUILD: &str = "__sandbox-build";

/// The running executable, as the kernel knows it.
pub(crate) const SELF_EXE: &str = "/proc/self/exe";

/// How long the helper may take to report its build.
const REPORT_TIMEOUT: Duration = Duration::from_secs(2);

struct Chosen {
    /// `/proc/self/fd/N` of the helper's sealed copy, or [`SELF_EXE`].
    program: PathBuf,
    /// Kept open for the process's life: `program` names it.
    _helper: Option<OwnedFd>,
}

static CHOSEN: OnceLock<Chosen> = OnceLock::new();

/// Start choosing on a thread of its own, so checking the helper (which
/// runs it once) overlaps the caller's start-up. Once per process.
pub(crate) fn choose_soon() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(start_choosing);
}

fn start_choosing() {
    let spawned = std::thread::Builder::new()
        .name("agentd-sandbox-exe".into())
        .spawn(|| {
            program();
        });
    if let Err(err) = spawned {
        tracing::debug!(%err, "choosing the sandbox executable when first needed");
    }
}

/// The program sandboxes start through (waits for a choice under way).
pub(crate) fn program() -> &'static Path {
    &CHOSEN.get_or_init(choose).program
}

fn choose() -> Chosen {
    let itself = Chosen {
        program: SELF_EXE.into(),
        _helper: None,
    };
    let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.to_path_buf()))
    else {
        return itself;
    };
    let helper = dir.join(HELPER_NAME);
    match open_helper(&dir, Path::new(SELF_EXE), BUILD) {
        Ok(Some(fd)) => {
            tracing::info!(helper = %helper.display(), "sandboxes start through the helper");
            Chosen {
                program: fd_path(&fd),
                _helper: Some(fd),
            }
        }
        Ok(None) => {
            tracing::debug!(helper = %helper.display(), "no helper: sandboxes start through agentd itself");
            itself
        }
        Err(reason) => {
            tracing::warn!(
                "sandboxes start through agentd itself, not {}: {reason}",
                helper.display()
            );
            itself
        }
    }
}

fn fd_path(fd: &OwnedFd) -> PathBuf {
    format!("/proc/self/fd/{}", fd.as_raw_fd()).into()
}

/// The helper in `dir` opened, when it may be used in place of `owner_of`
/// (the running executable): `Ok(None)` when there is none, `Err` with the
/// reason when there is one that may not be used.
fn open_helper(dir: &Path, owner_of: &Path, build: &str) -> Result<Option<OwnedFd>, String> {
    let dir = rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|err| format!("cannot open its directory: {err}"))?;
    let dir_mode = Mode::from_raw_mode(
        rustix::fs::fstat(&dir)
            .map_err(|err| format!("cannot stat its directory: {err}"))?
            .st_mode,
    );
    // Read-only, not blocking on a FIFO put there.
    let read_only = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    let fd = match rustix::fs::openat(&dir, HELPER_NAME, read_only, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(err) => return Err(format!("cannot open it: {err}")),
    };
    // Anyone who may put files there could swap in one of their own.
    if dir_mode.intersects(Mode::WGRP | Mode::WOTH) {
        return Err("others may write its directory".into());
    }
    let stat = rustix::fs::fstat(&fd).map_err(|err| format!("cannot stat it: {err}"))?;
    let owner = rustix::fs::stat(owner_of)
        .map_err(|err| format!("cannot stat {}: {err}", owner_of.display()))?
        .st_uid;
    let mode = Mode::from_raw_mode(stat.st_mode);
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err("not a regular file".into());
    }
    if stat.st_uid != owner {
        return Err(format!(
            "owned by uid {}, agentd by uid {owner}",
            stat.st_uid
        ));
    }
    if mode.intersects(Mode::WGRP | Mode::WOTH) {
        return Err("others may write it".into());
    }
    if !mode.contains(Mode::XUSR) {
        return Err("not executable".into());
    }
    if mode.intersects(Mode::SUID | Mode::SGID) {
        return Err("it is set-user-ID or set-group-ID".into());
    }
    let copy = sealed_copy(fd)?;
    let reported = report_build(&fd_path(&copy))?;
    if reported != build {
        return Err(format!(
            "it is another build ({reported:?}, agentd is {build:?})"
        ));
    }
    Ok(Some(copy))
}

/// `file`'s content in a sealed memory file, opened read-only: the file on
/// disk can be rewritten in place (nothing runs it between starts, so the
/// kernel does not refuse that), the copy cannot, so what was checked is
/// what every sandbox starts through.
fn sealed_copy(file: OwnedFd) -> Result<OwnedFd, String> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let failed = |what: &str, err: &dyn std::fmt::Display| format!("cannot {what}: {err}");
    let flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
    // Executable explicitly where the kernel knows the flag (Linux 6.3+).
    let memfd = match rustix::fs::memfd_create(HELPER_NAME, flags | MemfdFlags::EXEC) {
        Err(rustix::io::Errno::INVAL) => rustix::fs::memfd_create(HELPER_NAME, flags),
        made => made,
    }
    .map_err(|err| failed("make a memory file for it", &err))?;
    let mut from = std::fs::File::from(file);
    let mut to = std::fs::File::from(memfd);
    std::io::copy(&mut from, &mut to).map_err(|err| failed("copy it", &err))?;
    // Sandboxes run it as their agent's uid too.
    rustix::fs::fchmod(&to, Mode::from_raw_mode(0o555))
        .map_err(|err| failed("set its copy's mode", &err))?;
    let seals = SealFlags::SEAL | SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE;
    rustix::fs::fcntl_add_seals(&to, seals).map_err(|err| failed("seal its copy", &err))?;
    // A writable descriptor left open would make every exec of it fail
    // (ETXTBSY): reopened read-only, the writable one closed.
    let memfd = OwnedFd::from(to);
    let read_only = rustix::fs::open(
        fd_path(&memfd).as_path(),
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|err| failed("reopen its copy", &err))?;
    drop(memfd);
    Ok(read_only)
}

/// What `program __sandbox-build` prints, within [`REPORT_TIMEOUT`].
fn report_build(program: &Path) -> Result<String, String> {
    use std::io::Read as _;
    use std::process::{Command, Stdio};
    let started = Instant::now();
    let mut child = loop {
        let spawned = Command::new(program)
            .arg(REPORT_BUILD)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        match spawned {
            Ok(child) => break child,
            // Another thread's child may briefly hold a descriptor that was
            // writing the file (it closes on that child's exec).
            Err(err)
                if err.raw_os_error() == Some(libc::ETXTBSY)
                    && started.elapsed() < REPORT_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(err) => return Err(format!("cannot run it: {err}")),
        }
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < REPORT_TIMEOUT => {
                std::thread::sleep(Duration::from_micros(500));
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("it did not report its build in time".into());
            }
        }
    };
    let mut out = String::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = stdout.take(256).read_to_string(&mut out);
    }
    if !status.success() {
        return Err(format!("it did not report its build ({status})"));
    }
    Ok(out.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn file(dir: &Path, text: &str, mode: u32) -> PathBuf {
        let path = dir.join(HELPER_NAME);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn no_helper_means_the_executable_itself() {
        let dir = tempfile::tempdir().unwrap();
        let found = open_helper(dir.path(), Path::new(SELF_EXE), BUILD);
        assert!(matches!(found, Ok(None)), "{:?}", found.err());
    }

    #[test]
    fn a_helper_others_may_write_or_not_executable_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        file(dir.path(), "#!/bin/sh\n", 0o775);
        let err = open_helper(dir.path(), Path::new(SELF_EXE), BUILD).unwrap_err();
        assert!(err.contains("others may write it"), "{err}");
        file(dir.path(), "#!/bin/sh\n", 0o644);
        let err = open_helper(dir.path(), Path::new(SELF_EXE), BUILD).unwrap_err();
        assert!(err.contains("not executable"), "{err}");
        let path = file(dir.path(), "#!/bin/sh\n", 0o4755);
        let err = open_helper(dir.path(), Path::new(SELF_EXE), BUILD).unwrap_err();
        assert!(err.contains("set-user-ID"), "{err}");
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let err = open_helper(dir.path(), Path::new(SELF_EXE), BUILD).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn a_helper_in_a_directory_others_may_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(HELPER_NAME);
        std::fs::copy("/bin/echo", &path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = open_helper(dir.path(), Path::new(SELF_EXE), REPORT_BUILD).unwrap_err();
        assert!(err.contains("others may write its directory"), "{err}");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(open_helper(dir.path(), Path::new(SELF_EXE), REPORT_BUILD).is_ok());
    }

    #[test]
    fn a_helper_of_another_build_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        // A real executable that prints nothing and exits 0.
        let path = dir.path().join(HELPER_NAME);
        std::fs::copy("/bin/true", &path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = open_helper(dir.path(), Path::new(SELF_EXE), BUILD).unwrap_err();
        assert!(err.contains("another build"), "{err}");
        // One that fails is refused too.
        std::fs::copy("/bin/false", &path).unwrap();
        let err = open_helper(dir.path(), Path::new(SELF_EXE), BUILD).unwrap_err();
        assert!(err.contains("did not report its build"), "{err}");
    }

    #[test]
    fn a_helper_reporting_this_build_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        // `echo` prints its arguments: as the "build" it reports the flag.
        let path = dir.path().join(HELPER_NAME);
        std::fs::copy("/bin/echo", &path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let fd = open_helper(dir.path(), Path::new(SELF_EXE), REPORT_BUILD)
            .unwrap()
            .unwrap();
        // Run from its sealed copy: rewriting the file in place, or
        // replacing it, changes nothing.
        std::fs::write(&path, std::fs::read("/bin/false").unwrap()).unwrap();
        assert_eq!(report_build(&fd_path(&fd)).unwrap(), REPORT_BUILD);
        std::fs::remove_file(&path).unwrap();
        std::fs::copy("/bin/false", &path).unwrap();
        assert_eq!(report_build(&fd_path(&fd)).unwrap(), REPORT_BUILD);
        let seals = rustix::fs::fcntl_get_seals(&fd).unwrap();
        assert!(seals.contains(rustix::fs::SealFlags::WRITE | rustix::fs::SealFlags::SEAL));
    }
}
