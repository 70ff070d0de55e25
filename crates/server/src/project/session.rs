//! A turn's view of its project: what the profile lets it read, read once
//! per turn (the agent may have changed the files since the last one).

use std::path::{Path, PathBuf};

use agentd_engine::prompt::file_placeholders;
use agentd_sandbox::confined::{FsIdentity, Root};
use agentd_store::SessionRecord;

use super::{Project, ProjectFiles, ProjectScope, load};
use crate::config::ProfileConfig;
use crate::runtime::{Runtime, TurnOptions};

impl Runtime {
    /// The project of `session`'s workspace (opened as `root`), as `profile`
    /// and this turn's templates use it.
    pub(crate) async fn project_for(
        &self,
        session: &SessionRecord,
        profile: &ProfileConfig,
        options: &TurnOptions,
        root: Root,
        identity: Option<FsIdentity>,
        existing: bool,
    ) -> Project {
        let templates = [
            options.system_prompt.as_deref(),
            profile.system_prompt.as_deref(),
            profile.append_system_prompt.as_deref(),
            options.append_system_prompt.as_deref(),
        ];
        let scope = ProjectScope {
            read: profile.project_config,
            trusted: profile.project_config && profile.trust_project,
            user_file: Some(
                self.data_dir
                    .join("users")
                    .join(&session.owner)
                    .join("CLAUDE.md"),
            ),
            parents: if existing {
                self.parents_within_roots(&session.owner, root.path())
            } else {
                Vec::new()
            },
            template_files: file_placeholders(templates.into_iter().flatten()),
        };
        let files = ProjectFiles::new(root, identity);
        let project = tokio::task::spawn_blocking(move || load(&files, &scope))
            .await
            .unwrap_or_default();
        for warning in &project.warnings {
            tracing::warn!(session = %session.id, "project: {warning}");
        }
        project
    }

    /// The directories between the owner's workspace root holding
    /// `workspace` (that root included) and `workspace`, outermost first.
    fn parents_within_roots(&self, owner: &str, workspace: &Path) -> Vec<PathBuf> {
        let Some(root) = self
            .config
            .workspace_roots(owner)
            .iter()
            .filter_map(|root| root.canonicalize().ok())
            .filter(|root| workspace.starts_with(root) && workspace != root)
            .max_by_key(|root| root.as_os_str().len())
        else {
            return Vec::new();
        };
        let mut parents: Vec<PathBuf> = workspace
            .ancestors()
            .skip(1)
            .take_while(|dir| dir.starts_with(&root))
            .map(Path::to_path_buf)
            .collect();
        parents.reverse();
        parents
    }
}
