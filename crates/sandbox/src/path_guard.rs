//! Resolution of agent-given paths against the allowed roots.
//!
//! Resolution walks the path one component at a time, like the kernel does:
//! symlinks are read and their targets spliced in (so a link anywhere — parent
//! or final component, absolute or relative target, chained — is followed),
//! and `..` pops the already-resolved prefix rather than the text. Components
//! that do not exist yet form a tail that cannot contain links, so it is joined
//! as is. Only the fully resolved result is checked against the roots.
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::ErrorKind;
use std::os::fd::BorrowedFd;
use std::path::{Component, Path, PathBuf};

use crate::Mount;
use crate::confined::{ConfinedError, FsIdentity, Root};

/// Linux gives up after 40 links (ELOOP); so do we.
const MAX_SYMLINK_FOLLOWS: usize = 40;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum PathError {
    #[error("path {path:?} is outside the workspace")]
    Outside { path: String },
    #[error("path {path:?} is invalid: {reason}")]
    Invalid { path: String, reason: String },
}

/// Resolves paths given by the agent against the workspace and extra roots,
/// and does file operations on resolved paths confined to those roots (see
/// [`crate::confined`]): [`PathGuard::resolve`] gives the answer to show and
/// check rules against, [`PathGuard::confined`] reaches the file without
/// trusting that answer a second time.
#[derive(Debug, Clone)]
pub struct PathGuard {
    workspace: PathBuf,
    roots: Vec<PathBuf>,
    /// The workspace first, then the extra roots, then the mounts', held open.
    open_roots: Vec<Root>,
    /// For each of `open_roots`: whether it is a read-only mount's.
    read_only: Vec<bool>,
    identity: Option<FsIdentity>,
    /// Host mounts (canonical `host`), also among `roots`.
    mounts: Vec<Mount>,
}

impl PathGuard {
    /// `workspace` must exist; it is canonicalized. `extra_roots` are further
    /// allowed directories (canonicalized; missing ones ignored).
    pub fn new(workspace: &Path, extra_roots: &[PathBuf]) -> std::io::Result<Self> {
        let workspace = workspace.canonicalize()?;
        let roots: Vec<PathBuf> = extra_roots
            .iter()
            .filter_map(|root| root.canonicalize().ok())
            .collect();
        let mut open_roots = vec![Root::open(&workspace)?];
        for root in &roots {
            open_roots.push(Root::open(root)?);
        }
        Ok(Self {
            workspace,
            roots,
            read_only: vec![false; open_roots.len()],
            open_roots,
            identity: None,
            mounts: Vec::new(),
        })
    }

    /// A guard whose workspace is `root`, already open (and checked by the
    /// caller): every file operation then reaches that very directory.
    pub fn from_root(root: Root) -> Self {
        Self {
            workspace: root.path().to_path_buf(),
            roots: Vec::new(),
            open_roots: vec![root],
            read_only: vec![false],
            identity: None,
            mounts: Vec::new(),
        }
    }

    /// The workspace's directory, held open.
    pub fn workspace_root(&self) -> &Root {
        &self.open_roots[0]
    }

    /// Add host mounts as roots: a path under a mount's `path` (where the
    /// sandbox shows it) means the same place under its `host`. Each root is
    /// the very directory the mount pins (opened through real directories,
    /// its identity compared), so the file tools work on what the sandbox
    /// binds; any other object there refuses the guard.
    pub fn with_mounts(mut self, mounts: &[Mount]) -> std::io::Result<Self> {
        for mount in mounts {
            self.open_roots
                .push(Root::open_pinned(&mount.host, mount.pin)?);
            self.read_only.push(mount.read_only);
            self.roots.push(mount.host.clone());
            self.mounts.push(mount.clone());
        }
        Ok(self)
    }

    /// True when `resolved` lies on a read-only mount: the root holding it
    /// (the deepest, so a workspace inside a mount's host stays writable) is
    /// a read-only mount's.
    pub fn is_read_only(&self, resolved: &Path) -> bool {
        self.root_for(resolved)
            .is_some_and(|(index, _)| self.read_only[index])
    }

    /// Do every file operation as `identity` (the agent's user) from now on.
    pub fn with_identity(mut self, identity: Option<FsIdentity>) -> Self {
        self.identity = identity;
        self
    }

    /// Whom file operations run as (`None`: the server's own user).
    pub fn identity(&self) -> Option<FsIdentity> {
        self.identity
    }

    /// Run `op` on a path [`PathGuard::resolve`] returned: with the
    /// descriptor of the root holding it and the path relative to that root,
    /// on this thread as the guard's identity. Blocking: call it from a
    /// blocking thread. For reads; a change goes through
    /// [`PathGuard::confined_write`].
    pub fn confined<T>(
        &self,
        resolved: &Path,
        op: impl FnOnce(BorrowedFd<'_>, &Path) -> Result<T, ConfinedError>,
    ) -> Result<T, ConfinedError> {
        let (index, relative) = self.root_for(resolved).ok_or(ConfinedError::Escapes)?;
        let root = &self.open_roots[index];
        match self.identity {
            Some(identity) => identity.run(|| op(root.fd(), relative))?,
            None => op(root.fd(), relative),
        }
    }

    /// [`PathGuard::confined`] for an operation that changes files: refused
    /// ([`ConfinedError::ReadOnly`]) on a read-only mount.
    pub fn confined_write<T>(
        &self,
        resolved: &Path,
        op: impl FnOnce(BorrowedFd<'_>, &Path) -> Result<T, ConfinedError>,
    ) -> Result<T, ConfinedError> {
        if self.is_read_only(resolved) {
            return Err(ConfinedError::ReadOnly);
        }
        self.confined(resolved, op)
    }

    /// The index of the deepest open root holding `resolved`, and the path
    /// relative to it.
    fn root_for<'a>(&self, resolved: &'a Path) -> Option<(usize, &'a Path)> {
        self.open_roots
            .iter()
            .enumerate()
            .filter_map(|(index, root)| Some((index, root, root.relative(resolved)?)))
            .max_by_key(|(_, root, _)| root.path().as_os_str().len())
            .map(|(index, _, relative)| (index, relative))
    }

    /// The canonical workspace directory.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The canonical extra roots that exist.
    pub fn extra_roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Resolve `path` (absolute, relative to the workspace, or `~`-prefixed) to an
    /// absolute path inside an allowed root. The target need not exist (for
    /// writes), but every existing component, including a symlink at the final
    /// component, is resolved and must stay inside. Never rewrites silently.
    ///
    /// The returned path contains no symlinks in its existing part, no `.` or
    /// `..`, and starts with the workspace or an extra root.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, PathError> {
        let invalid = |reason: &str| PathError::Invalid {
            path: path.into(),
            reason: reason.into(),
        };
        if path.is_empty() {
            return Err(invalid("the path is empty"));
        }
        if path.contains('\0') {
            return Err(invalid("the path contains a NUL byte"));
        }
        let absolute = self.absolutize(path).map_err(|reason| invalid(&reason))?;
        let resolved = resolve_links(&absolute).map_err(|reason| invalid(&reason))?;
        if self.is_allowed(&resolved) {
            Ok(resolved)
        } else {
            Err(PathError::Outside { path: path.into() })
        }
    }

    /// True when `path` (already resolved) lies in the workspace or an extra root.
    pub fn is_allowed(&self, path: &Path) -> bool {
        path.starts_with(&self.workspace) || self.roots.iter().any(|root| path.starts_with(root))
    }

    /// The path relative to the workspace, for display (falls back to the full path).
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.workspace) {
            Ok(relative) if relative.as_os_str().is_empty() => ".".to_string(),
            Ok(relative) => relative.display().to_string(),
            Err(_) => self.sandbox_view(path).display().to_string(),
        }
    }

    /// Where the sandbox shows `path`: a mount's host path as its `path`.
    pub fn sandbox_view(&self, path: &Path) -> PathBuf {
        match deepest(&self.mounts, path, |m| &m.host) {
            Some(m) if !path.starts_with(&self.workspace) => rebase(path, &m.host, &m.path),
            _ => path.to_path_buf(),
        }
    }

    /// The host path of an absolute path the sandbox shows under a mount's
    /// `path`.
    fn host_view(&self, path: &Path) -> PathBuf {
        match deepest(&self.mounts, path, |m| &m.path) {
            Some(m) => rebase(path, &m.path, &m.host),
            None => path.to_path_buf(),
        }
    }

    /// Expand `~` and anchor relative paths at the workspace.
    fn absolutize(&self, path: &str) -> Result<PathBuf, String> {
        if path == "~" || path.starts_with("~/") {
            let home = std::env::var_os("HOME")
                .filter(|home| !home.is_empty())
                .ok_or_else(|| "`~` cannot be expanded because HOME is not set".to_string())?;
            let rest = path.trim_start_matches('~').trim_start_matches('/');
            return Ok(PathBuf::from(home).join(rest));
        }
        if path.starts_with('~') {
            // `~user` would silently mean "a file named ~user" here; refuse instead.
            return Err("`~user` paths are not supported; use an absolute path".into());
        }
        let path = Path::new(path);
        Ok(if path.is_absolute() {
            self.host_view(path)
        } else {
            self.workspace.join(path)
        })
    }
}

/// The mount whose `key` path holds `path`, the deepest one.
fn deepest<'a>(
    mounts: &'a [Mount],
    path: &Path,
    key: impl Fn(&Mount) -> &PathBuf,
) -> Option<&'a Mount> {
    mounts
        .iter()
        .filter(|m| path.starts_with(key(m)))
        .max_by_key(|m| key(m).as_os_str().len())
}

/// `path` (under `from`) moved under `to`.
fn rebase(path: &Path, from: &Path, to: &Path) -> PathBuf {
    match path.strip_prefix(from) {
        Ok(rest) if rest.as_os_str().is_empty() => to.to_path_buf(),
        Ok(rest) => to.join(rest),
        Err(_) => path.to_path_buf(),
    }
}

/// Resolve every symlink and `..` in an absolute path. The existing prefix is
/// resolved against the file system; a missing tail is kept as written.
fn resolve_links(absolute: &Path) -> Result<PathBuf, String> {
    let mut pending: VecDeque<OsString> = VecDeque::new();
    push_components(&mut pending, absolute);
    let mut resolved = PathBuf::from("/");
    // Components below `resolved` that do not exist (so cannot be links).
    let mut missing_tail: Vec<OsString> = Vec::new();
    let mut follows = 0;

    while let Some(component) = pending.pop_front() {
        if component == ".." {
            if missing_tail.pop().is_none() {
                resolved.pop();
            }
            continue;
        }
        if !missing_tail.is_empty() {
            missing_tail.push(component);
            continue;
        }
        let candidate = resolved.join(&component);
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                follows += 1;
                if follows > MAX_SYMLINK_FOLLOWS {
                    return Err("too many levels of symbolic links".into());
                }
                let target = std::fs::read_link(&candidate).map_err(|err| {
                    // A link replaced between the look and the read.
                    if err.kind() == ErrorKind::InvalidInput || err.kind() == ErrorKind::NotFound {
                        "it changed while it was being resolved; try again".to_string()
                    } else {
                        format!("cannot read symlink {}: {err}", candidate.display())
                    }
                })?;
                if target.is_absolute() {
                    resolved = PathBuf::from("/");
                }
                let mut spliced = VecDeque::new();
                push_components(&mut spliced, &target);
                spliced.extend(pending.drain(..));
                pending = spliced;
            }
            Ok(_) => resolved = candidate,
            Err(err) if err.kind() == ErrorKind::NotFound => missing_tail.push(component),
            Err(err) if err.kind() == ErrorKind::NotADirectory => {
                return Err(format!("{} is not a directory", resolved.display()));
            }
            Err(err) => return Err(format!("cannot inspect {}: {err}", candidate.display())),
        }
    }
    resolved.extend(missing_tail);
    Ok(resolved)
}

/// Append the normal and `..` components of `path` (roots and `.` carry no step).
fn push_components(out: &mut VecDeque<OsString>, path: &Path) {
    for component in path.components() {
        match component {
            Component::Normal(name) => out.push_back(name.to_os_string()),
            Component::ParentDir => out.push_back(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
}

#[cfg(test)]
#[path = "path_guard_tests.rs"]
mod tests;
