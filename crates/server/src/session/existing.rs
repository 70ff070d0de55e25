//! Sessions on existing directories: one a user names under their workspace
//! roots, or a configured project's. agentd never deletes such a directory,
//! never changes its owner, and opens it anew for each piece of work
//! ([`crate::workspace_open`]): through real directories only, and only
//! while it is still allowed.

use std::path::{Path, PathBuf};

use agentd_sandbox::confined::{FsIdentity, as_user};
use agentd_store::SessionRecord;

use super::{SessionError, SessionResult, SessionService};
use crate::config::ProjectToml;
use crate::workspace_open::data_dir_problem;

impl SessionService {
    /// The directory `raw`, named by `user` for a new session: its canonical
    /// path, when it lies inside one of their workspace roots. Whether a path
    /// outside them exists is not told.
    pub async fn chosen_directory(&self, user: &str, raw: &str) -> SessionResult<PathBuf> {
        self.existing_supported()?;
        let identity = self.agent_identity(user).await?;
        let runtime = self.registry.runtime();
        let roots = runtime.config.workspace_roots(user);
        let data_dir = runtime.data_dir.clone();
        let raw = raw.to_string();
        // Resolved as the user's agent: a directory its uid could not walk
        // to is neither told about nor given to it.
        blocking(move || {
            if raw.contains('\0') || !Path::new(&raw).is_absolute() {
                return Err(SessionError::Invalid(format!(
                    "workspace {raw:?} must be an absolute path"
                )));
            }
            let forbidden = || {
                SessionError::Forbidden(format!(
                    "workspace {raw:?} is not a directory your agent may reach inside one of \
                     your workspace roots ([workspaces] roots)"
                ))
            };
            let roots: Vec<PathBuf> = roots.iter().filter_map(|r| r.canonicalize().ok()).collect();
            let inside = |dir: &Path| {
                roots
                    .iter()
                    .any(|root| dir.starts_with(root) && dir != root)
            };
            let dir = match as_user(identity, || Path::new(&raw).canonicalize()) {
                Ok(dir) => dir,
                Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
                    return Err(forbidden());
                }
                // Missing: told only when what exists of it lies in a root.
                Err(_)
                    if nearest_existing(Path::new(&raw), identity)
                        .is_some_and(|d| roots.iter().any(|root| d.starts_with(root))) =>
                {
                    return Err(SessionError::Invalid(format!(
                        "workspace {raw:?} does not exist"
                    )));
                }
                Err(_) => return Err(forbidden()),
            };
            if !inside(&dir) {
                return Err(forbidden());
            }
            let is_dir = as_user(identity, || Ok(dir.is_dir())).unwrap_or(false);
            if !is_dir {
                return Err(forbidden());
            }
            usable(&dir, &data_dir)
        })
        .await
    }

    /// The host mounts `user` asks for, checked against their mountable
    /// roots and resolved (see `crate::mounts`).
    pub async fn checked_mounts(
        &self,
        user: &str,
        asked: Vec<crate::config::MountSpec>,
    ) -> SessionResult<Vec<crate::config::MountSpec>> {
        if asked.is_empty() {
            return Ok(asked);
        }
        let identity = self.agent_identity(user).await?;
        let runtime = self.registry.runtime().clone();
        let user = user.to_string();
        blocking(move || {
            let table = runtime
                .mount_table()
                .map_err(|err| SessionError::Internal(err.to_string()))?;
            crate::mounts::checked_session_mounts(table, &user, &asked, identity)
        })
        .await
    }

    /// A project's directory, checked as a chosen one is (the config put it
    /// where it may be).
    pub async fn project_directory(&self, project: &ProjectToml) -> SessionResult<PathBuf> {
        self.existing_supported()?;
        let data_dir = self.registry.runtime().data_dir.clone();
        let path = project.path.clone();
        blocking(move || {
            let dir = path.canonicalize().map_err(|err| {
                SessionError::Invalid(format!(
                    "project directory {} cannot be used: {err}",
                    path.display()
                ))
            })?;
            usable(&dir, &data_dir)
        })
        .await
    }

    /// `owner`'s newest session working in `workspace` on `profile`, if any.
    pub async fn session_on(
        &self,
        owner: &str,
        workspace: &Path,
        profile: &str,
    ) -> SessionResult<Option<SessionRecord>> {
        const PAGE: u32 = 200;
        let mut cursor: Option<String> = None;
        loop {
            let page = self.list(owner, cursor.as_deref(), PAGE).await?;
            if let Some(found) = page
                .iter()
                .find(|s| Path::new(&s.workspace) == workspace && s.profile == profile)
            {
                return Ok(Some(found.clone()));
            }
            match page.last() {
                Some(last) if page.len() == PAGE as usize => cursor = Some(last.id.clone()),
                _ => return Ok(None),
            }
        }
    }

    /// A cluster node works on its own copy of a workspace, which an existing
    /// directory has no place in yet.
    fn existing_supported(&self) -> SessionResult<()> {
        if self.registry.runtime().coordination.sees_all_turns() {
            return Ok(());
        }
        Err(SessionError::Invalid(
            "sessions on existing directories are not supported in a cluster".into(),
        ))
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> SessionResult<T> + Send + 'static,
) -> SessionResult<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| SessionError::Internal(err.to_string()))?
}

/// The canonical form of the longest part of `path` that exists, as
/// `identity` sees it.
pub(crate) fn nearest_existing(path: &Path, identity: Option<FsIdentity>) -> Option<PathBuf> {
    path.ancestors()
        .find_map(|part| as_user(identity, || part.canonicalize()).ok())
}

/// `dir` (canonical) when it is a directory apart from agentd's data dir.
fn usable(dir: &Path, data_dir: &Path) -> SessionResult<PathBuf> {
    if !dir.is_dir() {
        return Err(SessionError::Invalid(format!(
            "workspace {} is not a directory",
            dir.display()
        )));
    }
    if let Some(why) = data_dir_problem(dir, data_dir) {
        return Err(SessionError::Forbidden(format!(
            "workspace {} cannot be used: {why}",
            dir.display()
        )));
    }
    Ok(dir.to_path_buf())
}
