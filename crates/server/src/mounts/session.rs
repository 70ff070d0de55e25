//! Mounts a session asks for in `POST /v1/sessions`: checked then against
//! the owner's mountable roots and stored with canonical hosts, and checked
//! again every turn against the grants of that moment.

use std::path::{Path, PathBuf};

use agentd_sandbox::confined::{FsIdentity, as_user};
use agentd_sandbox::{Mount, check_mount_path};

use super::host::open_fixed;
use super::table::MountTable;
use crate::config::{MountMode, MountSpec};
use crate::session::SessionError;
use crate::session::existing::nearest_existing;

/// Most mounts one session may ask for (the sandbox binds 48 sources at most).
const MAX_SESSION_MOUNTS: usize = 16;

/// The mounts `owner` asked for, checked: each `host` resolved (links
/// followed, this once) to a directory inside one of their mountable roots,
/// holding and lying in no workspace, data dir or `{user}` directory (else
/// `Forbidden`) and reachable through real directories; each `path` a place
/// a mount may be. Returned with canonical hosts, as they are stored.
///
/// Resolved and opened as `identity`, the owner's agent: a host its uid
/// could not walk to is refused like one outside the roots (and whether it
/// exists is not told).
pub(crate) fn checked_session_mounts(
    table: &MountTable,
    owner: &str,
    asked: &[MountSpec],
    identity: Option<FsIdentity>,
) -> Result<Vec<MountSpec>, SessionError> {
    if asked.len() > MAX_SESSION_MOUNTS {
        return Err(SessionError::Invalid(format!(
            "at most {MAX_SESSION_MOUNTS} mounts"
        )));
    }
    let mut checked = Vec::with_capacity(asked.len());
    for spec in asked {
        let invalid =
            |message: String| SessionError::Invalid(format!("mount {:?}: {message}", spec.host));
        check_mount_path(Path::new(&spec.path), None).map_err(invalid)?;
        if spec.host.contains('\0') || !Path::new(&spec.host).is_absolute() {
            return Err(invalid("host must be an absolute path".into()));
        }
        let forbidden = || {
            SessionError::Forbidden(format!(
                "mount host {:?} is not a directory your agent may reach inside one of your \
                 mountable roots",
                spec.host
            ))
        };
        let raw = Path::new(&spec.host);
        let host = match as_user(identity, || raw.canonicalize()) {
            Ok(host) => host,
            Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(forbidden());
            }
            Err(err) => {
                let seen = nearest_existing(raw, identity);
                if seen.is_some_and(|d| table.session_host_problem(owner, &d).is_none()) {
                    return Err(invalid(format!("cannot be resolved: {err}")));
                }
                return Err(forbidden());
            }
        };
        let writable = (spec.mode == MountMode::Rw)
            .then(|| table.writable_problem(&host))
            .flatten();
        if let Some(problem) = table.session_host_problem(owner, &host).or(writable) {
            return Err(SessionError::Forbidden(format!(
                "mount host {:?} {problem}",
                spec.host
            )));
        }
        // What is stored is what later turns open: it must open now.
        as_user(identity, || {
            open_fixed(&host).map_err(std::io::Error::other)
        })
        .map_err(|_| forbidden())?;
        checked.push(MountSpec {
            host: host.display().to_string(),
            ..spec.clone()
        });
    }
    Ok(checked)
}

/// The stored mounts of `owner`'s session for a turn: each still within
/// their grants (a root taken out of the config refuses the turn, it is
/// never bound regardless), opened and pinned.
pub(crate) fn pinned_session_mounts(
    table: &MountTable,
    owner: &str,
    stored: &[MountSpec],
    identity: Option<FsIdentity>,
) -> Result<Vec<Mount>, String> {
    stored
        .iter()
        .map(|spec| {
            let (host, path) = (PathBuf::from(&spec.host), PathBuf::from(&spec.path));
            let refused = |why: String| format!("mount {}: {why}", spec.path);
            check_mount_path(&path, None).map_err(refused)?;
            if !host.is_absolute() {
                return Err(refused(format!("host {:?} is not absolute", spec.host)));
            }
            let writable = (spec.mode == MountMode::Rw)
                .then(|| table.writable_problem(&host))
                .flatten();
            if let Some(problem) = table.session_host_problem(owner, &host).or(writable) {
                return Err(refused(format!("host {} {problem}", spec.host)));
            }
            // As the owner's agent, which must be able to walk to it.
            let opened = as_user(identity, || {
                open_fixed(&host).map_err(std::io::Error::other)
            });
            let (_, pin) = opened.map_err(|err| refused(err.to_string()))?;
            Ok(Mount {
                host,
                path,
                read_only: spec.mode == MountMode::Ro,
                pin,
            })
        })
        .collect()
}
