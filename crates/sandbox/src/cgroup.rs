//! A cgroup per command, so the process and memory limits hold even for a
//! server running as root (where `RLIMIT_NPROC` is not enforced), and so
//! everything the command started can be found and killed.
//!
//! Where: on a host with a cgroup v1 `pids` hierarchy, under the server's own
//! cgroup there (`…/agentd-sandbox/<pid>-<n>`); on a unified cgroup v2 host,
//! `/sys/fs/cgroup/agentd-sandbox/<pid>-<n>` with `pids` (and `memory`, when
//! available) enabled for its children. A v2 cgroup that holds processes cannot
//! hand controllers to children, so the server's own cgroup is not used there.
use std::fs;
use std::io::{self, ErrorKind};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

use crate::policy::Limits;

const BASE_NAME: &str = "agentd-sandbox";
/// How long `remove` waits for killed processes to leave before handing the
/// empty-and-rmdir job to a background thread.
const INLINE_WAIT: Duration = Duration::from_secs(2);
const BACKGROUND_WAIT: Duration = Duration::from_secs(60);
/// Polling for the cgroup to empty: usually it already is, or nearly, so a few
/// bare yields first, then sleeps backing off to `MAX_POLL`.
const QUICK_POLLS: u32 = 10;
const FIRST_POLL: Duration = Duration::from_millis(1);
const MAX_POLL: Duration = Duration::from_millis(5);

static NEXT_ID: AtomicU64 = AtomicU64::new(0);
static SWEPT: AtomicBool = AtomicBool::new(false);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

fn join_file(version: Version) -> &'static str {
    match version {
        Version::V1 => "tasks",
        Version::V2 => "cgroup.procs",
    }
}

/// The cgroup of one command; removed (after killing what is left in it) by
/// [`CommandCgroup::remove`] or, failing that, on drop.
#[derive(Debug)]
pub(crate) struct CommandCgroup {
    dir: PathBuf,
    version: Version,
    join: Arc<OwnedFd>,
    removed: bool,
}

impl CommandCgroup {
    /// Make a cgroup carrying `limits.processes` (and `limits.memory_bytes`
    /// where the memory controller is available).
    pub(crate) fn create(limits: &Limits) -> io::Result<Self> {
        let name = format!(
            "{}-{}",
            std::process::id(),
            NEXT_ID.fetch_add(1, Ordering::Relaxed)
        );
        let mut base = cached_base()?;
        let mut dir = base.dir.join(&name);
        let mut created = fs::create_dir(&dir);
        if matches!(&created, Err(err) if err.kind() == ErrorKind::NotFound) {
            // The base went away since it was found: find (and make) it again.
            forget_base();
            base = cached_base()?;
            dir = base.dir.join(&name);
            created = fs::create_dir(&dir);
        }
        if let Err(err) = created {
            // Left by an earlier server with the same pid; empty ones can go.
            if err.kind() != ErrorKind::AlreadyExists {
                return Err(err);
            }
            fs::remove_dir(&dir)?;
            fs::create_dir(&dir)?;
        }
        let (version, memory) = (base.version, base.memory);
        let cleanup = RemoveOnError(Some(&dir));
        write_value(&dir, "pids.max", limits.processes)?;
        if let (true, Some(bytes)) = (memory, limits.memory_bytes) {
            write_value(&dir, "memory.max", Some(bytes))?;
            // Best effort: no swapping past the limit, and an OOM kills the lot.
            let _ = fs::write(dir.join("memory.swap.max"), "0");
            let _ = fs::write(dir.join("memory.oom.group"), "1");
        }
        // v1: the single-threaded child moves itself through `tasks`, which
        // skips the global threadgroup lock (and its RCU grace period, up to
        // tens of milliseconds) that `cgroup.procs` takes. v2 has no such
        // file for ordinary cgroups.
        let join: OwnedFd = fs::OpenOptions::new()
            .write(true)
            .open(dir.join(join_file(version)))?
            .into();
        cleanup.disarm();
        Ok(Self {
            dir,
            version,
            join: Arc::new(join),
            removed: false,
        })
    }

    /// The file the child writes `0` to, to join (`tasks` or `cgroup.procs`).
    pub(crate) fn join_file(&self) -> Arc<OwnedFd> {
        self.join.clone()
    }

    /// Where [`Self::join_file`] is, for a process that opens it itself.
    pub(crate) fn join_path(&self) -> PathBuf {
        self.dir.join(join_file(self.version))
    }

    /// SIGKILL everything in the cgroup (including processes that left the
    /// process group or session).
    pub(crate) fn kill(&self) {
        if self.version == Version::V2 && fs::write(self.dir.join("cgroup.kill"), "1").is_ok() {
            return;
        }
        for pid in self.members() {
            // ESRCH (already gone) is fine.
            let _ = kill_process(pid, Signal::KILL);
        }
    }

    fn members(&self) -> Vec<Pid> {
        fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse::<i32>().ok())
            .filter_map(Pid::from_raw)
            .collect()
    }

    /// Kill its members until it has none (killed again and again: a v1
    /// cgroup is killed member by member, and one forking meanwhile can slip
    /// past a pass). Warns once if that takes long (a task in uninterruptible
    /// sleep), and keeps waiting: whoever waits must not go on beside it.
    pub(crate) async fn emptied(&self) {
        let started = Instant::now();
        let mut poll = FIRST_POLL;
        let mut warned = false;
        for attempt in 0u32.. {
            self.kill();
            if self.members().is_empty() {
                return;
            }
            if !warned && started.elapsed() >= INLINE_WAIT {
                warned = true;
                tracing::warn!(cgroup = %self.dir.display(), "a killed sandbox's processes are still there");
            }
            if attempt < QUICK_POLLS {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(poll).await;
                poll = (poll * 2).min(MAX_POLL);
            }
        }
    }

    /// Kill what is left and remove the cgroup. Waits up to [`INLINE_WAIT`] for
    /// live members to go, but not for zombies (a reparented bwrap may wait a
    /// while for its reaper): the rmdir then continues on a background thread.
    pub(crate) async fn remove(mut self) {
        let deadline = Instant::now() + INLINE_WAIT;
        let mut poll = FIRST_POLL;
        for attempt in 0u32.. {
            if self.try_rmdir() {
                self.removed = true;
                return;
            }
            if self.members().is_empty() || Instant::now() >= deadline {
                return; // Drop takes over.
            }
            self.kill();
            if attempt < QUICK_POLLS {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(poll).await;
                poll = (poll * 2).min(MAX_POLL);
            }
        }
    }

    /// True once the directory is gone.
    fn try_rmdir(&self) -> bool {
        match fs::remove_dir(&self.dir) {
            Ok(()) => true,
            Err(err) if err.kind() == ErrorKind::NotFound => true,
            Err(_) => false,
        }
    }
}

impl Drop for CommandCgroup {
    fn drop(&mut self) {
        if self.removed || self.try_rmdir() {
            return;
        }
        self.kill();
        let cgroup = CommandCgroup {
            dir: self.dir.clone(),
            version: self.version,
            join: self.join.clone(),
            removed: true,
        };
        let spawned = std::thread::Builder::new()
            .name("agentd-cgroup-cleanup".into())
            .spawn(move || {
                let deadline = Instant::now() + BACKGROUND_WAIT;
                while !cgroup.try_rmdir() {
                    if Instant::now() >= deadline {
                        tracing::warn!(cgroup = %cgroup.dir.display(), "sandbox cgroup still busy; left in place");
                        return;
                    }
                    cgroup.kill();
                    std::thread::sleep(MAX_POLL * 4);
                }
            });
        if let Err(err) = spawned {
            tracing::warn!(cgroup = %self.dir.display(), %err, "could not clean up a sandbox cgroup");
        }
    }
}

/// Where command cgroups go, and whether `memory` can be limited there.
#[derive(Debug, Clone)]
struct Base {
    version: Version,
    dir: PathBuf,
    memory: bool,
}

/// Found once: reading mountinfo and preparing the base cost about a
/// millisecond per command otherwise.
static BASE: Mutex<Option<Base>> = Mutex::new(None);

fn cached_base() -> io::Result<Base> {
    let mut cached = BASE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(base) = cached.as_ref() {
        return Ok(base.clone());
    }
    let base = find_base()?;
    *cached = Some(base.clone());
    Ok(base)
}

fn forget_base() {
    *BASE.lock().unwrap_or_else(PoisonError::into_inner) = None;
}

/// Locate the hierarchy and prepare the base directory (and, once per
/// process, sweep what dead servers left there).
fn find_base() -> io::Result<Base> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo")?;
    let own = fs::read_to_string("/proc/self/cgroup")?;
    let (version, dir) = locate(&mountinfo, &own).ok_or_else(|| {
        io::Error::new(
            ErrorKind::Unsupported,
            "no cgroup hierarchy with the pids controller is mounted",
        )
    })?;
    let memory = match version {
        Version::V2 => prepare_v2_base(&dir)?,
        Version::V1 => {
            fs::create_dir_all(&dir)?;
            false
        }
    };
    if !SWEPT.swap(true, Ordering::Relaxed) {
        sweep_stale(&dir);
    }
    Ok(Base {
        version,
        dir,
        memory,
    })
}

/// Remove empty cgroups left by servers that died (named `<pid>-<n>`, with no
/// such process any more). Busy ones stay: their rmdir fails.
fn sweep_stale(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let owner = name.to_str().and_then(|name| name.split_once('-'));
        if let Some((pid, _)) = owner
            && pid.parse::<u32>().is_ok()
            && !Path::new("/proc").join(pid).exists()
        {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

/// Removes a half-made cgroup directory when creation fails part way.
struct RemoveOnError<'a>(Option<&'a Path>);

impl RemoveOnError<'_> {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for RemoveOnError<'_> {
    fn drop(&mut self) {
        if let Some(dir) = self.0 {
            let _ = fs::remove_dir(dir);
        }
    }
}

fn write_value(dir: &Path, file: &str, value: Option<u64>) -> io::Result<()> {
    let text = value.map_or_else(|| "max".to_string(), |value| value.to_string());
    fs::write(dir.join(file), text)
        .map_err(|err| io::Error::new(err.kind(), format!("cannot set {file}: {err}")))
}

/// Make `base` (a child of the v2 root) able to give `pids`, and `memory` if
/// present, to its children. Returns whether `memory` is available.
fn prepare_v2_base(base: &Path) -> io::Result<bool> {
    let root = base.parent().unwrap_or(Path::new("/"));
    let available = read_words(&root.join("cgroup.controllers"))?;
    if !available.iter().any(|c| c == "pids") {
        return Err(io::Error::new(
            ErrorKind::Unsupported,
            "the cgroup v2 pids controller is not available",
        ));
    }
    let memory = available.iter().any(|c| c == "memory");
    enable(root, "pids")?;
    if memory {
        let _ = enable(root, "memory");
    }
    match fs::create_dir(base) {
        Ok(()) => {}
        Err(err) if err.kind() == ErrorKind::AlreadyExists => {}
        Err(err) => return Err(err),
    }
    enable(base, "pids")?;
    Ok(memory && enable(base, "memory").is_ok())
}

fn enable(cgroup: &Path, controller: &str) -> io::Result<()> {
    let file = cgroup.join("cgroup.subtree_control");
    if read_words(&file)?.iter().any(|c| c == controller) {
        return Ok(());
    }
    fs::write(&file, format!("+{controller}")).map_err(|err| {
        io::Error::new(
            err.kind(),
            format!("cannot enable {controller} in {}: {err}", file.display()),
        )
    })
}

fn read_words(file: &Path) -> io::Result<Vec<String>> {
    Ok(fs::read_to_string(file)?
        .split_whitespace()
        .map(str::to_string)
        .collect())
}

/// Which hierarchy to use and the base directory for command cgroups, from
/// `/proc/self/mountinfo` and `/proc/self/cgroup`. A v1 `pids` hierarchy wins
/// (on hybrid hosts the v2 mount has no controllers).
fn locate(mountinfo: &str, own_cgroups: &str) -> Option<(Version, PathBuf)> {
    let mounts: Vec<Mount> = mountinfo.lines().filter_map(Mount::parse).collect();
    let v1 = mounts.iter().find(|mount| {
        mount.fstype == "cgroup" && mount.super_options.split(',').any(|opt| opt == "pids")
    });
    if let Some(mount) = v1 {
        let own = own_cgroups.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers
                .split(',')
                .any(|c| c == "pids")
                .then(|| path.to_string())
        })?;
        // Inside a container the mount shows only part of the hierarchy.
        let relative = Path::new(&own).strip_prefix(&mount.root).ok()?;
        return Some((Version::V1, mount.point.join(relative).join(BASE_NAME)));
    }
    let v2 = mounts.iter().find(|mount| mount.fstype == "cgroup2")?;
    Some((Version::V2, v2.point.join(BASE_NAME)))
}

struct Mount {
    root: PathBuf,
    point: PathBuf,
    fstype: String,
    super_options: String,
}

impl Mount {
    /// `id parent dev root point options [optional…] - fstype source super_options`
    fn parse(line: &str) -> Option<Self> {
        let (left, right) = line.split_once(" - ")?;
        let left: Vec<&str> = left.split(' ').collect();
        let mut right = right.split(' ');
        let (root, point) = (*left.get(3)?, *left.get(4)?);
        // Octal escapes mean spaces or the like in the path; not our hierarchies.
        if root.contains('\\') || point.contains('\\') {
            return None;
        }
        let fstype = right.next()?.to_string();
        let _source = right.next()?;
        Some(Self {
            root: PathBuf::from(root),
            point: PathBuf::from(point),
            fstype,
            super_options: right.next().unwrap_or_default().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
30 25 0:26 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
38 30 0:34 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
39 30 0:35 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
";

    #[test]
    fn v1_pids_hierarchy_wins_and_nests_under_our_cgroup() {
        let own = "9:memory:/x\n8:pids:/system.slice/agentd.service\n0::/\n";
        assert_eq!(
            locate(HYBRID, own),
            Some((
                Version::V1,
                PathBuf::from("/sys/fs/cgroup/pids/system.slice/agentd.service/agentd-sandbox")
            ))
        );
    }

    #[test]
    fn v1_mount_of_a_subtree_is_relative_to_its_root() {
        let info = "38 30 0:34 /docker/abc /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n";
        let own = "8:pids:/docker/abc\n";
        assert_eq!(
            locate(info, own),
            Some((
                Version::V1,
                PathBuf::from("/sys/fs/cgroup/pids/agentd-sandbox")
            ))
        );
    }

    #[test]
    fn unified_hosts_use_the_v2_root() {
        let info =
            "35 24 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n";
        let own = "0::/user.slice/user-0.slice/session-1.scope\n";
        assert_eq!(
            locate(info, own),
            Some((Version::V2, PathBuf::from("/sys/fs/cgroup/agentd-sandbox")))
        );
    }

    /// Regular files stand in for cgroupfs: enough to follow the v2 steps.
    #[test]
    fn v2_base_gets_pids_and_memory_enabled() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().join(BASE_NAME);
        fs::write(root.path().join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        fs::write(root.path().join("cgroup.subtree_control"), "cpu\n").unwrap();
        fs::create_dir(&base).unwrap();
        fs::write(base.join("cgroup.subtree_control"), "").unwrap();
        assert!(prepare_v2_base(&base).unwrap());
        // Each missing controller was asked for (the fake keeps only the last write).
        assert_eq!(
            fs::read_to_string(base.join("cgroup.subtree_control")).unwrap(),
            "+memory"
        );
    }

    #[test]
    fn v2_without_the_pids_controller_is_an_error() {
        let root = tempfile::tempdir().unwrap();
        fs::write(root.path().join("cgroup.controllers"), "cpu memory\n").unwrap();
        let err = prepare_v2_base(&root.path().join(BASE_NAME)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported);
        assert!(!root.path().join(BASE_NAME).exists());
    }

    #[test]
    fn no_cgroup_mounts_means_none() {
        let info = "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n";
        assert_eq!(locate(info, "0::/\n"), None);
    }
}
