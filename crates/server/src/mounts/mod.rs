//! A session's host mounts: those its profile and its owner's `[users.NAME]`
//! give (server-chosen, `{user}` expanded), and those asked for at creation
//! (checked against the owner's mountable roots then, and every turn).
//!
//! Configured paths are resolved once ([`MountTable`]); a session's are
//! stored canonical. Each turn opens every host from `/` through real
//! directories only and pins the object it opened (device, inode): the
//! sandbox binds and the file tools use that object or refuse, so a link
//! planted on the way, or another directory moved into place, is never
//! what the agent gets.

use std::path::{Path, PathBuf};

use agentd_sandbox::confined::FsIdentity;
use agentd_sandbox::{Mount, check_mounts};
use agentd_store::SessionRecord;

use crate::config::{ConfigError, MountSpec, ProfileConfig, SandboxMode};
use crate::runtime::{RunError, Runtime};

mod host;
mod session;
mod table;

pub(crate) use session::checked_session_mounts;
pub(crate) use table::MountTable;

impl Runtime {
    /// The config's mounts, resolved when the runtime was made; why they
    /// cannot be served otherwise (`agentd serve` does not start then).
    pub fn check_mount_config(&self) -> Result<(), String> {
        self.mount_table()
            .map(|_| ())
            .map_err(|err| err.to_string())
    }

    pub(crate) fn mount_table(&self) -> Result<&MountTable, ConfigError> {
        self.mounts
            .as_ref()
            .as_ref()
            .map_err(|err| ConfigError::Invalid(format!("host mounts: {err}")))
    }

    /// Every mount of `session` for this turn, opened and pinned: the
    /// profile's, its owner's, then its own. Any that cannot be had as
    /// checked refuses the turn; none is left out silently.
    pub(crate) async fn mounts_for(
        &self,
        session: &SessionRecord,
        profile: &ProfileConfig,
        identity: Option<FsIdentity>,
    ) -> Result<Vec<Mount>, RunError> {
        let table = self.mount_table()?;
        let stored = match self.store.session_mounts(&session.id).await? {
            Some(json) => serde_json::from_str::<Vec<MountSpec>>(&json)
                .map_err(|err| ConfigError::Invalid(format!("the session's mounts: {err}")))?,
            None => Vec::new(),
        };
        let configured = table.configured(&session.profile, &session.owner);
        if stored.is_empty() && configured.count() == 0 {
            return Ok(Vec::new());
        }
        if profile.sandbox == SandboxMode::Off {
            return Err(ConfigError::Invalid(format!(
                "profile {:?} runs commands unsandboxed (sandbox = \"off\"), where host mounts \
                 can be neither bound nor kept read-only",
                session.profile
            ))
            .into());
        }
        let (runtime, session) = (self.clone(), session.clone());
        let opened = tokio::task::spawn_blocking(move || {
            let table = runtime.mount_table().map_err(|err| err.to_string())?;
            open_all(table, &session, &stored, identity)
        })
        .await
        .map_err(|err| ConfigError::Invalid(err.to_string()))?;
        Ok(opened.map_err(|err| ConfigError::Invalid(format!("host mounts: {err}")))?)
    }
}

/// Open (and pin) the configured mounts and the session's own, and check
/// they fit together in the session's sandbox.
fn open_all(
    table: &MountTable,
    session: &SessionRecord,
    stored: &[MountSpec],
    identity: Option<FsIdentity>,
) -> Result<Vec<Mount>, String> {
    let owner = &session.owner;
    let mut mounts = Vec::new();
    for mount in table.configured(&session.profile, owner) {
        let refused = |why: String| format!("mount {}: {why}", mount.path.display());
        let (host, pin) = match &mount.host {
            table::ConfigHost::Fixed(host) => {
                (host.clone(), host::open_fixed(host).map_err(refused)?.1)
            }
            table::ConfigHost::PerUser { base, below } => {
                host::open_user_dir(base, below, owner, identity).map_err(refused)?
            }
        };
        mounts.push(Mount {
            host,
            path: mount.path.clone(),
            read_only: mount.read_only,
            pin,
        });
    }
    mounts.extend(session::pinned_session_mounts(
        table, owner, stored, identity,
    )?);
    let workspace = PathBuf::from(&session.workspace);
    let workspace = workspace.canonicalize().unwrap_or(workspace);
    // A workspace is the agent's to change: no host may hold or lie in it.
    if let Some(mount) = mounts.iter().find(|m| table::overlaps(&m.host, &workspace)) {
        return Err(format!(
            "mount {}: host {} holds or lies in this session's workspace",
            mount.path.display(),
            mount.host.display()
        ));
    }
    check_mounts(&mounts, Path::new(&workspace))?;
    Ok(mounts)
}
