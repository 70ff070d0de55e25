//! Sessions on existing directories: one a user names under their workspace
//! roots, or a configured project's. Why only a root's direct children, see
//! `config::workspaces`. agentd never deletes such a directory.
//!
//! The path is resolved once, here, to its canonical form, and every directory
//! above it must be one only root or agentd's own user can change (or, when
//! others may write it, sticky with the next one down theirs): nobody else can
//! then swap a link into the path between now and any later turn.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use agentd_store::SessionRecord;

use super::{SessionError, SessionResult, SessionService};
use crate::config::ProjectToml;
use crate::runtime::check_workspace;

/// `S_ISVTX`: in such a directory only an entry's owner may rename it.
const STICKY: u32 = 0o1000;

impl SessionService {
    /// The directory `raw`, named by `user` for a new session: its canonical
    /// path, when it is a direct child of one of their workspace roots.
    pub async fn chosen_directory(&self, user: &str, raw: &str) -> SessionResult<PathBuf> {
        self.existing_supported()?;
        let runtime = self.registry.runtime();
        let roots = runtime.config.workspace_roots(user);
        let data_dir = runtime.data_dir.clone();
        let raw = raw.to_string();
        blocking(move || {
            if raw.contains('\0') || !Path::new(&raw).is_absolute() {
                return Err(SessionError::Invalid(format!(
                    "workspace {raw:?} must be an absolute path"
                )));
            }
            let dir = existing_directory(Path::new(&raw), &data_dir)?;
            let under_root = roots
                .iter()
                .filter_map(|root| root.canonicalize().ok())
                .any(|root| dir.parent() == Some(root.as_path()));
            if !under_root {
                return Err(SessionError::Forbidden(format!(
                    "workspace {raw:?} is not a directory directly inside one of your \
                     workspace roots ([workspaces] roots)"
                )));
            }
            Ok(dir)
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
        let runtime = self.registry.runtime().clone();
        let user = user.to_string();
        blocking(move || {
            let table = runtime
                .mount_table()
                .map_err(|err| SessionError::Internal(err.to_string()))?;
            crate::mounts::checked_session_mounts(table, &user, &asked)
        })
        .await
    }

    /// A project's directory, checked as a chosen one is (the config put it
    /// where it may be).
    pub async fn project_directory(&self, project: &ProjectToml) -> SessionResult<PathBuf> {
        self.existing_supported()?;
        let data_dir = self.registry.runtime().data_dir.clone();
        let path = project.path.clone();
        blocking(move || existing_directory(&path, &data_dir)).await
    }

    /// `owner`'s newest session working in `workspace`, if any.
    pub async fn session_on(
        &self,
        owner: &str,
        workspace: &Path,
    ) -> SessionResult<Option<SessionRecord>> {
        const PAGE: u32 = 200;
        let mut cursor: Option<String> = None;
        loop {
            let page = self.list(owner, cursor.as_deref(), PAGE).await?;
            if let Some(found) = page.iter().find(|s| Path::new(&s.workspace) == workspace) {
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

/// `path` canonical, a directory that does not hold the data dir, under
/// directories nobody but root and agentd can change.
fn existing_directory(path: &Path, data_dir: &Path) -> SessionResult<PathBuf> {
    let shown = path.display().to_string();
    let dir = check_workspace(path, data_dir).map_err(|err| {
        let message = err.to_string();
        match path.canonicalize() {
            Err(_) => SessionError::Invalid(format!("workspace {shown:?} does not exist")),
            Ok(_) => SessionError::Invalid(message),
        }
    })?;
    safe_ancestors(&dir).map_err(|why| {
        SessionError::Forbidden(format!(
            "workspace {shown:?} cannot be used: {why}; the directories above a workspace \
             must be changeable by root and agentd alone"
        ))
    })?;
    Ok(dir)
}

/// Every directory above `dir` (canonical) is owned by root or agentd's own
/// user, and writable by nobody else unless sticky with the entry below it
/// owned by one of them.
fn safe_ancestors(dir: &Path) -> Result<(), String> {
    let trusted = [0, rustix::process::geteuid().as_raw()];
    let mut below = dir;
    while let Some(above) = below.parent() {
        let meta = std::fs::symlink_metadata(above)
            .map_err(|err| format!("{}: {err}", above.display()))?;
        if !trusted.contains(&meta.uid()) {
            return Err(format!(
                "{} is owned by uid {}",
                above.display(),
                meta.uid()
            ));
        }
        if meta.mode() & 0o022 != 0 {
            let entry = std::fs::symlink_metadata(below)
                .map_err(|err| format!("{}: {err}", below.display()))?;
            if meta.mode() & STICKY == 0 || !trusted.contains(&entry.uid()) {
                return Err(format!("others may rename entries of {}", above.display()));
            }
        }
        below = above;
    }
    Ok(())
}
