//! A session's host mounts: those its profile and its owner's `[users.NAME]`
//! give (server-chosen, `{user}` expanded), and those asked for at creation
//! (checked then against the owner's mountable roots, stored canonical).
//! Hosts are resolved canonically once; the sandbox and the file tools then
//! open them through real directories only, so a link planted later is
//! refused, never followed.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use agentd_sandbox::confined::FsIdentity;
use agentd_sandbox::{Mount, check_mount_path, check_mounts};
use agentd_store::SessionRecord;

use crate::config::{ConfigError, MountMode, MountSpec, ProfileConfig};
use crate::runtime::{RunError, Runtime};
use crate::session::SessionError;

/// Most mounts one session may ask for (the sandbox binds 48 sources at most).
const MAX_SESSION_MOUNTS: usize = 16;

/// Why `host` (canonical) may not be mounted: `/`, or the data dir (which
/// holds the database and every workspace) inside it or it inside that.
fn host_problem(host: &Path, data_dir: &Path) -> Option<String> {
    let data_dir = data_dir.canonicalize().unwrap_or_else(|_| data_dir.into());
    if host == Path::new("/") {
        return Some("`/` cannot be mounted".into());
    }
    if host.starts_with(&data_dir) || data_dir.starts_with(host) {
        return Some(format!(
            "{} holds or lies in agentd's data dir",
            host.display()
        ));
    }
    None
}

/// The mounts `user` asked for at creation, checked: each `host` a
/// directory whose canonical path lies in one of their mountable roots
/// (else `Forbidden`), each `path` a place a mount may be. Returned with
/// canonical hosts, as they are stored.
pub(crate) fn checked_session_mounts(
    mountable: &[PathBuf],
    data_dir: &Path,
    asked: &[MountSpec],
) -> Result<Vec<MountSpec>, SessionError> {
    if asked.len() > MAX_SESSION_MOUNTS {
        return Err(SessionError::Invalid(format!(
            "at most {MAX_SESSION_MOUNTS} mounts"
        )));
    }
    let roots: Vec<PathBuf> = mountable
        .iter()
        .filter_map(|root| root.canonicalize().ok())
        .collect();
    let mut checked = Vec::with_capacity(asked.len());
    for spec in asked {
        let invalid =
            |message: String| SessionError::Invalid(format!("mount {:?}: {message}", spec.host));
        check_mount_path(Path::new(&spec.path), None).map_err(invalid)?;
        if spec.host.contains('\0') || !Path::new(&spec.host).is_absolute() {
            return Err(invalid("host must be an absolute path".into()));
        }
        let host = Path::new(&spec.host)
            .canonicalize()
            .map_err(|err| invalid(format!("cannot be resolved: {err}")))?;
        if !host.is_dir() {
            return Err(invalid("host is not a directory".into()));
        }
        if !roots.iter().any(|root| host.starts_with(root))
            || host_problem(&host, data_dir).is_some()
        {
            return Err(SessionError::Forbidden(format!(
                "mount host {:?} is not inside one of your mountable roots ([mounts] allowed)",
                spec.host
            )));
        }
        checked.push(MountSpec {
            host: host.display().to_string(),
            ..spec.clone()
        });
    }
    Ok(checked)
}

impl Runtime {
    /// Every mount of `session` for this turn: the profile's, its owner's,
    /// then its own. A config mount whose host is missing is skipped (the
    /// sandbox logs it); `{user}` directories are made first.
    pub(crate) async fn mounts_for(
        &self,
        session: &SessionRecord,
        profile: &ProfileConfig,
        identity: Option<FsIdentity>,
    ) -> Result<Vec<Mount>, RunError> {
        let user = self.config.users.get(&session.owner);
        let configured: Vec<MountSpec> = profile
            .mounts
            .iter()
            .chain(user.into_iter().flat_map(|u| &u.mounts))
            .cloned()
            .collect();
        let stored = match self.store.session_mounts(&session.id).await? {
            Some(json) => serde_json::from_str::<Vec<MountSpec>>(&json)
                .map_err(|err| ConfigError::Invalid(format!("the session's mounts: {err}")))?,
            None => Vec::new(),
        };
        let (owner, data_dir) = (session.owner.clone(), self.data_dir.clone());
        let workspace = PathBuf::from(&session.workspace);
        let resolved = tokio::task::spawn_blocking(move || {
            let mut mounts = Vec::new();
            for spec in &configured {
                if let Some(mount) = configured_mount(spec, &owner, &data_dir, identity)? {
                    mounts.push(mount);
                }
            }
            mounts.extend(
                stored
                    .iter()
                    .map(|spec| to_mount(spec, PathBuf::from(&spec.host))),
            );
            check_mounts(&mounts, &workspace)?;
            Ok::<_, String>(mounts)
        })
        .await
        .map_err(|err| ConfigError::Invalid(err.to_string()))?;
        Ok(resolved.map_err(|err| ConfigError::Invalid(format!("mounts: {err}")))?)
    }
}

fn to_mount(spec: &MountSpec, host: PathBuf) -> Mount {
    Mount {
        host,
        path: PathBuf::from(&spec.path),
        read_only: spec.mode == MountMode::Ro,
    }
}

/// A profile's or user's mount for `owner`: `{user}` expanded (that
/// directory made 0700, the agent's, when missing), the host resolved
/// canonically. `None` when it does not exist.
fn configured_mount(
    spec: &MountSpec,
    owner: &str,
    data_dir: &Path,
    identity: Option<FsIdentity>,
) -> Result<Option<Mount>, String> {
    let host = if spec.host.contains("{user}") {
        if owner.is_empty() || owner.contains('/') || owner == "." || owner == ".." {
            return Err(format!("user name {owner:?} cannot name a directory"));
        }
        let host = PathBuf::from(spec.host.replace("{user}", owner));
        make_user_dir(&host, identity).map_err(|err| format!("{}: {err}", host.display()))?;
        host
    } else {
        PathBuf::from(&spec.host)
    };
    let Ok(host) = host.canonicalize() else {
        tracing::warn!(host = %host.display(), "mount source is missing; skipped");
        return Ok(None);
    };
    if let Some(problem) = host_problem(&host, data_dir) {
        return Err(problem);
    }
    Ok(Some(to_mount(spec, host)))
}

/// Make a per-user directory on first use: 0700, owned by the agent's uid
/// when agentd runs as root. An existing one is left as it is.
fn make_user_dir(dir: &Path, identity: Option<FsIdentity>) -> std::io::Result<()> {
    if std::fs::symlink_metadata(dir).is_ok() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(err) => return Err(err),
    }
    if let Some(identity) = identity {
        std::os::unix::fs::lchown(dir, Some(identity.uid), Some(identity.gid))?;
    }
    Ok(())
}
