//! Host directories mounted into a sandbox ([`Mount`]) and which places they
//! may appear at ([`check_mount_path`]).
use std::path::{Path, PathBuf};

/// A host directory bound into the sandbox at `path`, read-only or writable.
/// `host` must be canonical (the server resolves it once, when the mount is
/// configured or asked for); it is bound by descriptor like every other
/// source, so a link swapped in later is refused at launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub host: PathBuf,
    /// Where it appears inside the sandbox (and to the file tools).
    pub path: PathBuf,
    pub read_only: bool,
}

/// Directories of the sandbox itself: a mount on, in or above one of them
/// would hide or replace what commands run on.
const SYSTEM_PATHS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/proc",
    "/dev",
    "/sys",
    "/tmp",
    "/run/agentd",
];

/// Why `path` cannot be where a mount appears in a sandbox of `workspace`:
/// not absolute or not normal (`.`, `..`), `/`, a system directory or a
/// place in or above one, or the workspace, in it or above it (binds in the
/// workspace would create their mount points in the agent's own directory).
pub fn check_mount_path(path: &Path, workspace: Option<&Path>) -> Result<(), String> {
    let shown = path.display();
    if !path.is_absolute() {
        return Err(format!("mount path {shown} must be absolute"));
    }
    if path == Path::new("/") {
        return Err("a mount cannot replace the sandbox's `/`".into());
    }
    let plain = path.to_str().is_some_and(|p| {
        p.split('/')
            .skip(1)
            .all(|name| !name.is_empty() && name != "." && name != "..")
    });
    if !plain {
        return Err(format!(
            "mount path {shown} must be a plain absolute path (no `.`, `..` or doubled `/`)"
        ));
    }
    let overlaps = |other: &Path| path.starts_with(other) || other.starts_with(path);
    if let Some(system) = SYSTEM_PATHS.iter().find(|s| overlaps(Path::new(s))) {
        return Err(format!(
            "mount path {shown} would shadow the sandbox's own {system}"
        ));
    }
    if let Some(workspace) = workspace.filter(|w| overlaps(w)) {
        return Err(format!(
            "mount path {shown} would shadow the workspace {} or lie in it",
            workspace.display()
        ));
    }
    Ok(())
}

/// Check every mount's path, and that no two lie one in the other (the inner
/// one's mount point would be made in the outer one's host directory).
pub fn check_mounts(mounts: &[Mount], workspace: &Path) -> Result<(), String> {
    for (i, mount) in mounts.iter().enumerate() {
        check_mount_path(&mount.path, Some(workspace))?;
        if !mount.host.is_absolute() {
            return Err(format!(
                "mount host {} must be absolute",
                mount.host.display()
            ));
        }
        let earlier = mounts[..i].iter().map(|m| m.path.as_path());
        for other in earlier {
            if mount.path.starts_with(other) || other.starts_with(&mount.path) {
                return Err(format!(
                    "mount paths {} and {} lie one in the other",
                    mount.path.display(),
                    other.display()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_dirs_the_workspace_and_odd_paths_are_refused() {
        let ws = Path::new("/srv/data/ws/1");
        for bad in [
            "/",
            "/usr",
            "/usr/local",
            "/proc",
            "/dev",
            "/etc/x",
            "/tmp",
            "/run",
            "/srv",
            "/srv/data",
            "/srv/data/ws/1",
            "/srv/data/ws/1/sub",
            "rel",
            "/a/../b",
            "/a/./b",
            "/a//b",
            "/a/",
        ] {
            assert!(check_mount_path(Path::new(bad), Some(ws)).is_err(), "{bad}");
        }
        for good in ["/mnt/downloads", "/var/log", "/data", "/srv/other", "/usrx"] {
            assert!(
                check_mount_path(Path::new(good), Some(ws)).is_ok(),
                "{good}"
            );
        }
        let mount = |path: &str| Mount {
            host: "/h".into(),
            path: path.into(),
            read_only: true,
        };
        assert!(check_mounts(&[mount("/mnt/a"), mount("/mnt/b")], ws).is_ok());
        assert!(check_mounts(&[mount("/mnt/a"), mount("/mnt/a/b")], ws).is_err());
    }
}
