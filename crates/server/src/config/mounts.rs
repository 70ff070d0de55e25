//! Host mounts: `mounts = [{ host, path, mode }]` in a profile and under
//! `[users.NAME]` (server-chosen; `{user}` in `host` is the session owner's
//! name), and per session in `POST /v1/sessions`, where `host` must lie in
//! one of the owner's mountable roots (`[mounts] allowed` and `[users.NAME]
//! mountable`).

use std::path::{Path, PathBuf};

use agentd_sandbox::check_mount_path;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::Config;

/// A host directory mounted into a session's sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MountSpec {
    /// The host directory (absolute). In the config, `{user}` is replaced
    /// by the session owner's name (a directory made 0700 on first use).
    #[schema(min_length = 1)]
    pub host: String,
    /// Where it appears in the sandbox and to the file tools (absolute;
    /// may equal `host`). Not `/`, a system directory or the workspace.
    #[schema(min_length = 1)]
    pub path: String,
    /// `ro` (the default) or `rw`.
    #[serde(default)]
    pub mode: MountMode,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MountMode {
    #[default]
    Ro,
    Rw,
}

/// `[mounts]`: host roots every user's sessions may mount from.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MountsToml {
    pub allowed: Vec<PathBuf>,
}

impl Config {
    /// The host roots `user`'s sessions may ask to mount from.
    pub fn mountable_roots(&self, user: &str) -> Vec<PathBuf> {
        let own = self.users.get(user).map(|u| u.mountable.iter());
        let mut roots = self.mounts.allowed.clone();
        roots.extend(own.into_iter().flatten().cloned());
        roots
    }
}

/// Why `spec` is not a valid mount in the config (`host` may hold `{user}`,
/// as a whole component). Where the hosts are is checked when the server
/// resolves them (`crate::mounts::MountTable`).
pub(super) fn check_spec(spec: &MountSpec, what: &str) -> Result<(), String> {
    let host = &spec.host;
    let names: Vec<&str> = host.strip_prefix('/').unwrap_or(host).split('/').collect();
    let plain = host.starts_with('/')
        && host != "/"
        && !names
            .iter()
            .any(|n| n.is_empty() || *n == "." || *n == "..");
    if !plain {
        return Err(format!(
            "{what}: mount host {host:?} must be a plain absolute path other than `/` \
             (no `.`, `..` or doubled `/`)"
        ));
    }
    if names.iter().any(|n| n.contains("{user}") && *n != "{user}") {
        return Err(format!(
            "{what}: mount host {host:?}: `{{user}}` must be a whole path component"
        ));
    }
    check_mount_path(Path::new(&spec.path), None).map_err(|err| format!("{what}: {err}"))
}

pub(super) fn check(config: &Config) -> Result<(), String> {
    for (name, profile) in &config.profiles {
        for spec in &profile.mounts {
            check_spec(spec, &format!("profile {name:?}"))?;
        }
    }
    for (name, user) in &config.users {
        for spec in &user.mounts {
            check_spec(spec, &format!("user {name:?}"))?;
        }
    }
    let user_roots = config.users.values().flat_map(|u| &u.mountable);
    for root in config.mounts.allowed.iter().chain(user_roots) {
        if !root.is_absolute() || root == Path::new("/") {
            return Err(format!(
                "mountable root {} must be an absolute path other than `/`",
                root.display()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::MountMode;

    #[test]
    fn mounts_parse_default_to_read_only_and_bad_ones_are_refused() {
        let config = Config::parse(
            "[profiles.default]\nmounts = [{ host = \"/data/{user}\", path = \"/data\" }]\n\
             [users.alice]\nmountable = [\"/srv/a\"]\n\
             mounts = [{ host = \"/var/log\", path = \"/var/log\", mode = \"rw\" }]\n\
             [mounts]\nallowed = [\"/data\"]\n",
        )
        .unwrap();
        let profile = config.profile("default").unwrap();
        assert_eq!(profile.mounts[0].mode, MountMode::Ro);
        assert_eq!(config.users["alice"].mounts[0].mode, MountMode::Rw);
        assert_eq!(config.mountable_roots("alice").len(), 2);
        assert_eq!(config.mountable_roots("bob").len(), 1);
        for bad in [
            "[profiles.default]\nmounts = [{ host = \"/x\", path = \"/usr\" }]\n",
            "[profiles.default]\nmounts = [{ host = \"/x\", path = \"rel\" }]\n",
            "[profiles.default]\nmounts = [{ host = \"/\", path = \"/x\" }]\n",
            "[profiles.default]\nmounts = [{ host = \"/a/../b\", path = \"/x\" }]\n",
            "[profiles.default]\nmounts = [{ host = \"/a/u-{user}\", path = \"/x\" }]\n",
            "[profiles.default]\nmounts = [{ host = \"/x\", path = \"/y\", mode = \"rwx\" }]\n",
            "[users.bob]\nmountable = [\"/\"]\n",
            "[mounts]\nallowed = [\"data\"]\n",
        ] {
            assert!(Config::parse(bad).is_err(), "{bad}");
        }
    }
}
