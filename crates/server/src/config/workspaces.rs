//! `[workspaces] roots` (and `[users.NAME.workspaces] roots`) and
//! `[[projects]]`: existing directories a session may work in instead of an
//! empty one of its own.
//!
//! An agent may change anything inside its workspace, a directory swapped for
//! a link included, so no session's workspace may hold another's: a session
//! could otherwise point another one's workspace anywhere on the host. So a
//! directory named in `POST /v1/sessions` must be a direct child of a root
//! (never a root, never deeper), and a project's directory must neither hold
//! nor lie in another project's or a root's children.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::Config;

/// Most characters of a project's name.
const MAX_PROJECT_NAME: usize = 100;

/// `[workspaces]`: where sessions may be opened on an existing directory.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkspacesToml {
    /// Directories whose direct subdirectories a session may work in.
    pub roots: Vec<PathBuf>,
}

/// `[[projects]]`: a named directory sessions open on.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectToml {
    pub name: String,
    pub path: PathBuf,
    /// The profile its sessions run on; the request's (or `default`) when unset.
    pub profile: Option<String>,
    /// Stored as the session's first (assistant) message.
    pub greeting: Option<String>,
    /// A user has at most one session on it: asking for another returns it.
    #[serde(default)]
    pub single_session: bool,
}

impl Config {
    /// The roots `user`'s sessions may open a directory in.
    pub fn workspace_roots(&self, user: &str) -> Vec<PathBuf> {
        let own = self.users.get(user).map(|u| u.workspaces.roots.iter());
        let mut roots: Vec<PathBuf> = self.workspaces.roots.clone();
        roots.extend(own.into_iter().flatten().cloned());
        roots
    }

    pub fn project(&self, name: &str) -> Option<&ProjectToml> {
        self.projects.iter().find(|project| project.name == name)
    }
}

pub(super) fn check(config: &Config) -> Result<(), String> {
    let user_roots = config.users.values().flat_map(|u| &u.workspaces.roots);
    let roots: Vec<&PathBuf> = config.workspaces.roots.iter().chain(user_roots).collect();
    if let Some(root) = roots.iter().find(|root| !root.is_absolute()) {
        return Err(format!(
            "workspace root {} must be an absolute path",
            root.display()
        ));
    }
    for (i, root) in roots.iter().enumerate() {
        if let Some(other) = roots[..i].iter().find(|o| nested(root, o) && root != *o) {
            return Err(format!(
                "workspace roots {} and {} lie one in the other; a session in the outer one \
                 could redirect the inner one's",
                root.display(),
                other.display()
            ));
        }
    }
    for (i, project) in config.projects.iter().enumerate() {
        let what = format!("project {:?}", project.name);
        let name = project.name.as_str();
        if name.trim().is_empty()
            || name.chars().count() > MAX_PROJECT_NAME
            || name.chars().any(char::is_control)
        {
            return Err(format!(
                "{what}: a name is 1 to {MAX_PROJECT_NAME} characters"
            ));
        }
        if config.projects[..i].iter().any(|p| p.name == name) {
            return Err(format!("{what} is defined twice"));
        }
        if !project.path.is_absolute() {
            return Err(format!("{what}: path must be absolute"));
        }
        if let Some(profile) = &project.profile {
            config
                .profile(profile)
                .map_err(|err| format!("{what}: {err}"))?;
        }
        let others = config.projects[..i].iter().map(|p| p.path.as_path());
        for other in others {
            if nested(&project.path, other) && project.path != other {
                return Err(format!(
                    "{what}: {} and {} lie one in the other; an agent working in the outer one \
                     could redirect the inner one",
                    project.path.display(),
                    other.display()
                ));
            }
        }
        if let Some(root) = roots
            .iter()
            .find(|root| overlaps_children(&project.path, root))
        {
            return Err(format!(
                "{what}: {} holds or lies deep in workspace root {}'s directories; a project \
                 there must be one of them",
                project.path.display(),
                root.display()
            ));
        }
    }
    Ok(())
}

/// One of `a` and `b` lies in (or is) the other.
fn nested(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// `path` is `root` or above it, or below one of its children: anywhere but
/// a direct child, or outside it.
fn overlaps_children(path: &Path, root: &Path) -> bool {
    root.starts_with(path) || (path.starts_with(root) && path.parent() != Some(root))
}
