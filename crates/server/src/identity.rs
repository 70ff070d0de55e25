//! Whom a session owner's agent works as. A server that is not root runs its
//! agents' work as its own uid (`None`: nothing to switch). A root server
//! gives every user an unprivileged uid of their own: `[users.NAME] uid`
//! (and `gid`), else the uid recorded for them in the store, allocated from
//! `[server] agent_uids` on first use (gid = uid). Never uid or gid 0.

use std::collections::HashMap;
use std::sync::Mutex;

use agentd_sandbox::confined::FsIdentity;

use crate::config::ConfigError;
use crate::runtime::{RunError, Runtime};

/// The identities looked up so far, by owner: a user's uid never changes
/// while the server runs.
#[derive(Debug, Default)]
pub struct AgentIdentities(Mutex<HashMap<String, FsIdentity>>);

impl AgentIdentities {
    fn get(&self, owner: &str) -> Option<FsIdentity> {
        self.0.lock().ok()?.get(owner).copied()
    }

    fn remember(&self, owner: &str, identity: FsIdentity) {
        if let Ok(mut known) = self.0.lock() {
            known.insert(owner.to_string(), identity);
        }
    }
}

impl Runtime {
    /// The user a session owner's agent works as: its sandboxes and every
    /// file operation done for it. `None` when the server is not root (its
    /// agent work runs as its own uid).
    pub async fn agent_identity(&self, owner: &str) -> Result<Option<FsIdentity>, RunError> {
        if !rustix::process::geteuid().is_root() {
            return Ok(None);
        }
        self.unprivileged_identity(owner).await.map(Some)
    }

    /// What [`Runtime::agent_identity`] answers in a root server.
    pub(crate) async fn unprivileged_identity(&self, owner: &str) -> Result<FsIdentity, RunError> {
        if let Some(identity) = self.identities.get(owner) {
            return Ok(identity);
        }
        let pinned = self
            .config
            .users
            .get(owner)
            .and_then(|user| user.identity());
        let identity = match pinned {
            Some(identity) => identity,
            None => {
                let (first, last) = self.config.server.agent_uid_range();
                let uid = self.store.agent_uid(owner, first, last).await?;
                FsIdentity { uid, gid: uid }
            }
        };
        if identity.uid == 0 || identity.gid == 0 {
            return Err(RunError::Config(ConfigError::Invalid(format!(
                "user {owner:?} would work as uid {} gid {}: refusing root",
                identity.uid, identity.gid
            ))));
        }
        self.identities.remember(owner, identity);
        Ok(identity)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use agentd_store::Store;
    use agentd_store::sqlite::SqliteStore;

    use super::*;
    use crate::config::Config;

    async fn runtime(toml: &str) -> (Runtime, Arc<dyn Store>) {
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open_url("sqlite::memory:").await.unwrap());
        let config = Config::parse(toml).unwrap();
        let runtime = Runtime::new(store.clone(), config, "/tmp/unused".into());
        (runtime, store)
    }

    #[tokio::test]
    async fn pinned_users_keep_their_uid_and_others_get_one_allocated() {
        let toml = "[server]\nagent_uids = [5000, 5001]\n[users.pinned]\nuid = 1500\ngid = 1600\n";
        let (runtime, store) = runtime(toml).await;
        let pinned = runtime.unprivileged_identity("pinned").await.unwrap();
        assert_eq!(
            pinned,
            FsIdentity {
                uid: 1500,
                gid: 1600
            }
        );
        let alice = runtime.unprivileged_identity("alice").await.unwrap();
        assert_eq!(
            alice,
            FsIdentity {
                uid: 5000,
                gid: 5000
            }
        );
        let bob = runtime.unprivileged_identity("bob").await.unwrap();
        assert_eq!(
            bob,
            FsIdentity {
                uid: 5001,
                gid: 5001
            }
        );
        // Recorded in the store; a pinned user is not.
        assert_eq!(store.agent_uid("alice", 5000, 5001).await.unwrap(), 5000);
        let err = store.agent_uid("pinned", 5000, 5001).await.unwrap_err();
        assert!(err.to_string().contains("taken"), "{err}");
        // Remembered: the store is not asked again.
        assert_eq!(runtime.unprivileged_identity("alice").await.unwrap(), alice);
        let err = runtime.unprivileged_identity("carol").await.unwrap_err();
        assert!(err.to_string().contains("5000-5001"), "{err}");
    }

    #[tokio::test]
    async fn the_server_s_own_uid_when_not_root() {
        let (runtime, _store) = runtime("").await;
        let identity = runtime.agent_identity("alice").await.unwrap();
        if rustix::process::geteuid().is_root() {
            let identity = identity.unwrap();
            assert_eq!(
                identity,
                FsIdentity {
                    uid: 200_000,
                    gid: 200_000
                }
            );
        } else {
            assert_eq!(identity, None);
        }
    }
}
