//! Opening a session's workspace for work (a turn, a rewind, a fork's copy):
//! once, as a descriptor every part of the work then shares.
//!
//! A workspace agentd made, or one `agentd run` was given, is handed to the
//! agent's user first (see [`crate::workspace_owner`]). An existing directory
//! a session was opened on over HTTP ([`crate::session::existing`], marked
//! `existing_workspace` on the session) never is:
//! it keeps its owner and modes, and everything done in it on the agent's
//! behalf is done as the agent's user. Each time, it must still be allowed
//! (under one of the owner's roots, or a project's directory) and it is
//! opened from `/` through real directories only, so a link planted in its
//! path by anyone who can write a parent is refused, never followed.

use std::path::{Path, PathBuf};

use agentd_sandbox::confined::{FsIdentity, Root, as_user};
use agentd_store::SessionRecord;

use crate::runtime::{RunError, Runtime};
use crate::workspace_owner::hand_over_before_turn;

/// A session's workspace held open, and whom file work in it runs as.
#[derive(Debug, Clone)]
pub struct OpenWorkspace {
    pub root: Root,
    /// An existing directory: read (checkpoints included) and written only
    /// as the agent's user, never handed over.
    pub existing: bool,
}

impl OpenWorkspace {
    /// Whom a checkpoint's scan reads as: the agent's user in an existing
    /// directory (the server must not read for it what it cannot), the
    /// server in a workspace of the agent's own.
    pub fn reader(&self, identity: Option<FsIdentity>) -> Option<FsIdentity> {
        identity.filter(|_| self.existing)
    }
}

/// Why `dir` (canonical) cannot be a session's workspace: it holds agentd's
/// data dir (the database, tokens, every workspace) or lies in it.
pub(crate) fn data_dir_problem(dir: &Path, data_dir: &Path) -> Option<String> {
    let data_dir = data_dir
        .canonicalize()
        .unwrap_or_else(|_| data_dir.to_path_buf());
    (dir.starts_with(&data_dir) || data_dir.starts_with(dir)).then(|| {
        format!(
            "{} holds or lies in agentd's data dir {}",
            dir.display(),
            data_dir.display()
        )
    })
}

impl Runtime {
    /// Whether `dir` (canonical) is, right now, a directory `owner` may open
    /// a session on: strictly inside one of their roots, or a project's.
    pub(crate) fn may_work_in(&self, owner: &str, dir: &Path) -> bool {
        let under_root = self
            .config
            .workspace_roots(owner)
            .iter()
            .filter_map(|root| root.canonicalize().ok())
            .any(|root| dir.starts_with(&root) && dir != root);
        let project = self
            .config
            .projects
            .iter()
            .any(|project| project.path.canonicalize().is_ok_and(|path| path == dir));
        under_root || project
    }

    /// The session's workspace opened for work as `identity` (the agent's
    /// user, when the server is root): handed to it first when it may be.
    pub(crate) async fn open_workspace(
        &self,
        session: &SessionRecord,
        identity: Option<FsIdentity>,
    ) -> Result<OpenWorkspace, RunError> {
        if let Some(identity) = identity
            && !session.existing_workspace
        {
            let path = Path::new(&session.workspace);
            hand_over_before_turn(&session.id, path, &self.data_dir, identity).await?;
        }
        self.workspace_root(session, identity).await
    }

    /// The session's workspace held open, as it is (to look at its files);
    /// an existing directory reached as `identity`, who will read it.
    pub(crate) async fn workspace_root(
        &self,
        session: &SessionRecord,
        identity: Option<FsIdentity>,
    ) -> Result<OpenWorkspace, RunError> {
        let path = PathBuf::from(&session.workspace);
        let problem = |message: String| RunError::Workspace {
            path: path.clone(),
            message,
        };
        if !session.existing_workspace {
            // Stored canonical (agentd's own below the data dir's canonical
            // form); a link in its path now is refused, not followed.
            let real = crate::paths::own_workspace(&self.data_dir, session).unwrap_or(path.clone());
            let opened = Root::open_no_links(&real);
            let root = opened.map_err(|err| problem(format!("cannot be opened: {err}")))?;
            return Ok(OpenWorkspace {
                root,
                existing: false,
            });
        }
        if !self.may_work_in(&session.owner, &path) {
            return Err(problem(
                "is no longer under the session owner's workspace roots, nor a project's \
                 directory ([workspaces] roots, [[projects]])"
                    .into(),
            ));
        }
        if let Some(why) = data_dir_problem(&path, &self.data_dir) {
            return Err(problem(why));
        }
        // As the agent's user: a directory it could not walk to is not
        // reached for it through a descriptor root opened.
        let opened = tokio::task::spawn_blocking({
            let path = path.clone();
            move || as_user(identity, || Root::open_no_links(&path))
        })
        .await
        .map_err(|err| problem(err.to_string()))?;
        let root = opened.map_err(|err| match err.raw_os_error() {
            Some(libc::ELOOP) => problem(
                "has a symbolic link in its path now; a session's directory is only ever \
                 reached through real directories"
                    .into(),
            ),
            Some(libc::EACCES) => problem(
                "cannot be reached by the agent's user (a directory on the way is closed to it)"
                    .into(),
            ),
            _ => problem(format!("cannot be opened: {err}")),
        })?;
        Ok(OpenWorkspace {
            root,
            existing: true,
        })
    }
}
