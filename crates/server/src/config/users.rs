//! `[users.NAME]` and `[server] agent_uids`: the unprivileged uid each user's
//! agent works as when agentd runs as root (its sandboxes and every file
//! operation of its tools). A user without `[users.NAME] uid` gets the lowest
//! free uid of the range, recorded in the database, kept for good.
//! `[users.NAME.quotas]` overrides `[quotas]` for that user.

use std::collections::{BTreeMap, BTreeSet};

use agentd_sandbox::confined::FsIdentity;
use serde::Deserialize;

use super::ServerConfig;
use super::access::QuotaToml;
use super::sandbox_env::{self, EnvValue};

/// [`ServerConfig::agent_uids`] when unset.
pub const DEFAULT_AGENT_UIDS: [u32; 2] = [200_000, 299_999];
/// Below this are the system's own users and groups.
pub const MIN_AGENT_ID: u32 = 1000;
/// `nobody`, and `(uid_t) -1` (which means "no change" to the kernel): never
/// an agent's.
const RESERVED_IDS: [u32; 3] = [65_534, 65_535, u32::MAX];

/// `[users.NAME]`: settings of one user (the name sessions are owned by).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserToml {
    /// The uid this user's agent works as, instead of one from
    /// `[server] agent_uids`. At least 1000, outside that range, and no other
    /// user's.
    pub uid: Option<u32>,
    /// Its gid (at least 1000); the uid when absent.
    pub gid: Option<u32>,
    /// This user's limits, over `[quotas]` key by key.
    #[serde(default)]
    pub quotas: QuotaToml,
    /// Roots this user's sessions may open a directory in, besides
    /// `[workspaces] roots`.
    #[serde(default)]
    pub workspaces: super::WorkspacesToml,
    /// Variables for this user's sandboxes, over the profile's key by key.
    #[serde(default)]
    pub env: BTreeMap<String, EnvValue>,
    /// Variables copied from the server's environment (secret).
    #[serde(default)]
    pub env_from_host: Vec<String>,
    /// Over the profile's `ssh_agent`.
    pub ssh_agent: Option<bool>,
    /// Host directories in this user's sandboxes, after the profile's.
    #[serde(default)]
    pub mounts: Vec<super::MountSpec>,
    /// Host roots this user's sessions may ask to mount from, besides
    /// `[mounts] allowed`.
    #[serde(default)]
    pub mountable: Vec<std::path::PathBuf>,
}

impl UserToml {
    /// The pinned uid and gid, if `uid` is set.
    pub fn identity(&self) -> Option<FsIdentity> {
        let uid = self.uid?;
        Some(FsIdentity {
            uid,
            gid: self.gid.unwrap_or(uid),
        })
    }
}

/// `[FIRST, LAST]`, exactly two uids (a plain `[u32; 2]` would take more).
pub(super) fn uid_range<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<[u32; 2]>, D::Error> {
    let ids = Vec::<u32>::deserialize(deserializer)?;
    match ids[..] {
        [first, last] => Ok(Some([first, last])),
        _ => Err(serde::de::Error::custom(
            "expected [FIRST, LAST]: two uids, the first and the last of the range",
        )),
    }
}

impl ServerConfig {
    /// The uids agentd allocates agents from, `(first, last)`, both included.
    pub fn agent_uid_range(&self) -> (u32, u32) {
        let [first, last] = self.agent_uids.unwrap_or(DEFAULT_AGENT_UIDS);
        (first, last)
    }
}

/// The range and the pinned ids are usable: never root's, a system user's or
/// group's, or one two users would share.
pub(super) fn check(
    server: &ServerConfig,
    users: &BTreeMap<String, UserToml>,
) -> Result<(), String> {
    let (first, last) = server.agent_uid_range();
    if first < MIN_AGENT_ID || first > last {
        return Err(format!(
            "[server] agent_uids = [{first}, {last}]: must be [FIRST, LAST] with \
             {MIN_AGENT_ID} <= FIRST <= LAST"
        ));
    }
    if let Some(id) = RESERVED_IDS.iter().find(|id| (first..=last).contains(*id)) {
        return Err(format!(
            "[server] agent_uids = [{first}, {last}] contains {id}, which is never an agent's uid"
        ));
    }
    let mut pinned = BTreeSet::new();
    for (name, user) in users {
        if let Some(message) = user.quotas.problem() {
            return Err(format!("[users.{name:?}.quotas] {message}"));
        }
        sandbox_env::check(&format!("[users.{name:?}]"), &user.env, &user.env_from_host)?;
        let Some(uid) = user.uid else {
            if user.gid.is_some() {
                return Err(format!(
                    "[users.{name:?}] gid without uid: set the uid the agent works as too"
                ));
            }
            continue;
        };
        let ids = [("uid", Some(uid)), ("gid", user.gid)];
        for (key, id) in ids.into_iter().filter_map(|(key, id)| Some((key, id?))) {
            if id < MIN_AGENT_ID || RESERVED_IDS.contains(&id) {
                return Err(format!(
                    "[users.{name:?}] {key} = {id}: an agent's {key} must be at least \
                     {MIN_AGENT_ID} (never root's or a system one), and not {}",
                    RESERVED_IDS.map(|id| id.to_string()).join(", ")
                ));
            }
        }
        if (first..=last).contains(&uid) {
            return Err(format!(
                "[users.{name:?}] uid = {uid}: inside [server] agent_uids ({first}-{last}), \
                 where agentd gives uids to other users; choose one outside it"
            ));
        }
        if !pinned.insert(uid) {
            return Err(format!(
                "[users.{name:?}] uid = {uid}: another user has this uid; each user needs their own"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn pinned_users_and_the_range_parse() {
        let config = Config::parse(
            "[server]\nagent_uids = [5000, 5999]\n\
             [users.alice]\nuid = 1500\n\
             [users.\"bob smith\"]\nuid = 1600\ngid = 2000\n",
        )
        .unwrap();
        assert_eq!(config.server.agent_uid_range(), (5000, 5999));
        let alice = config.users["alice"].identity().unwrap();
        assert_eq!((alice.uid, alice.gid), (1500, 1500));
        let bob = config.users["bob smith"].identity().unwrap();
        assert_eq!((bob.uid, bob.gid), (1600, 2000));
        let default = Config::parse("").unwrap();
        assert_eq!(default.server.agent_uid_range(), (200_000, 299_999));
        assert!(default.users.is_empty());
    }

    #[test]
    fn unusable_ranges_are_refused() {
        for (range, needle) in [
            ("[0, 10]", "1000 <= FIRST"),
            ("[999, 5000]", "1000 <= FIRST"),
            ("[6000, 5000]", "FIRST <= LAST"),
            ("[60000, 70000]", "65534"),
            ("[100000, 4294967295]", "4294967295"),
        ] {
            let err = Config::parse(&format!("[server]\nagent_uids = {range}\n")).unwrap_err();
            assert!(err.contains(needle), "{range}: {err}");
        }
        for wrong in ["[5000]", "[5000, 6000, 7000]", "[-1, 5000]", "5000"] {
            let parsed = Config::parse(&format!("[server]\nagent_uids = {wrong}\n"));
            assert!(parsed.is_err(), "{wrong}");
        }
    }

    #[test]
    fn unusable_pinned_ids_are_refused() {
        for (user, needle) in [
            ("uid = 0", "uid = 0"),
            ("uid = 999", "at least 1000"),
            ("uid = 65534", "65534"),
            ("uid = 1500\ngid = 0", "gid = 0"),
            ("uid = 1500\ngid = 27", "gid = 27"),
            ("uid = 250000", "inside [server] agent_uids"),
            ("uid = 1500\nshell = \"/bin/sh\"", "shell"),
            ("gid = 1500", "uid"),
        ] {
            let err = Config::parse(&format!("[users.alice]\n{user}\n")).unwrap_err();
            assert!(err.contains(needle), "{user}: {err}");
        }
        let err = Config::parse("[users.a]\nuid = 1500\n[users.b]\nuid = 1500\n").unwrap_err();
        assert!(err.contains("another user"), "{err}");
        // Sharing a group is fine.
        Config::parse("[users.a]\nuid = 1500\ngid = 3000\n[users.b]\nuid = 1501\ngid = 3000\n")
            .unwrap();
    }
}
