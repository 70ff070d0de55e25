//! INTERFACE (to be implemented): see lib.rs.
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum PathError {
    #[error("path {path:?} is outside the workspace")]
    Outside { path: String },
    #[error("path {path:?} is invalid: {reason}")]
    Invalid { path: String, reason: String },
}

/// Resolves paths given by the agent against the workspace and extra roots.
#[derive(Debug, Clone)]
pub struct PathGuard {
    workspace: PathBuf,
    roots: Vec<PathBuf>,
}

impl PathGuard {
    /// `workspace` must exist; it is canonicalized. `extra_roots` are further
    /// allowed directories (canonicalized; missing ones ignored).
    pub fn new(workspace: &Path, extra_roots: &[PathBuf]) -> std::io::Result<Self> {
        let _ = extra_roots;
        Ok(Self { workspace: workspace.canonicalize()?, roots: Vec::new() })
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Resolve `path` (absolute, relative to the workspace, or `~`-prefixed) to an
    /// absolute path inside an allowed root. The target need not exist (for
    /// writes), but every existing component, including a symlink at the final
    /// component, is resolved and must stay inside. Never rewrites silently.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, PathError> {
        let _ = &self.roots;
        Err(PathError::Invalid { path: path.into(), reason: "unimplemented".into() })
    }

    /// The path relative to the workspace, for display (falls back to the full path).
    pub fn display(&self, path: &Path) -> String {
        path.strip_prefix(&self.workspace).unwrap_or(path).display().to_string()
    }
}
