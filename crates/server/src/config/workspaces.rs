//! `[workspaces] roots` (and `[users.NAME.workspaces] roots`) and
//! `[[projects]]`: existing directories a session may work in instead of an
//! empty one of its own. Any directory inside a root may be chosen; what
//! keeps a session in its own (links planted in its path, a directory
//! replaced, one no longer allowed) is checked each time it is opened
//! (`crate::workspace_open`), not here.

use std::path::PathBuf;

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
    }
    Ok(())
}
