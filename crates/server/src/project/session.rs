//! A turn's view of its project: what the profile lets it read, read once
//! per turn (the agent may have changed the files since the last one).

use std::path::{Path, PathBuf};

use agentd_engine::prompt::file_placeholders;
use agentd_sandbox::confined::{FsIdentity, Root};
use agentd_store::SessionRecord;

use agentd_policy::permissions::PermissionPolicy;

use super::{Project, ProjectFiles, ProjectScope, load};
use crate::config::{ProfileConfig, SandboxMode};
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
        let read = profile.project_config && options.project_config != Some(false);
        let scope = ProjectScope {
            read,
            trusted: read && profile.trust_project,
            sandboxed: profile.sandbox != SandboxMode::Off,
            user_file: plain_name(&session.owner).then(|| {
                self.data_dir
                    .join("users")
                    .join(&session.owner)
                    .join("CLAUDE.md")
            }),
            parents: if existing {
                self.parents_within_roots(&session.owner, root.path())
            } else {
                Vec::new()
            },
            template_files: file_placeholders(templates.into_iter().flatten()),
        };
        // What the operator's Read deny rules protect stays out of the
        // prompt, whichever file leads to it.
        let mut deny = profile.deny.clone();
        deny.extend(options.deny.iter().cloned());
        let workspace = root.path().to_path_buf();
        let files = ProjectFiles::new(root, identity);
        // Rules that do not parse fail the turn later; until then nothing
        // is read rather than something they might protect.
        let files = match PermissionPolicy::new(profile.mode, &profile.allow, &deny, &profile.ask) {
            Ok(rules) => files.with_hidden(std::sync::Arc::new(move |path: &Path| {
                rules.read_denied_by(path, &workspace).is_some()
            })),
            Err(_) => files.with_hidden(std::sync::Arc::new(|_: &Path| true)),
        };
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

/// A user name that is one plain path component.
fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/')
}
