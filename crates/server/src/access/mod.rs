//! Who may use what, and how much: grants of profiles and models
//! ([`grants`]), quotas and rate limits ([`quotas`]), and the audit log
//! ([`audit`]). The HTTP handlers ask before they create or start anything.

pub mod admin;
pub mod audit;
pub mod grants;
pub mod metrics;
pub mod quotas;
mod workspace_bytes;

pub use admin::{AdminError, Grants, UserView};
pub use audit::{Audit, OPERATOR};
pub use grants::Usable;
pub use quotas::{QuotaRefusal, UsageReport};

use std::path::Path;

use agentd_store::Store;

use crate::config::Config;
use crate::runtime::Runtime;

/// What the access checks read: the store, the config, the data dir (where
/// workspaces are). The server's [`Runtime`] has one; so does the command
/// line, which has no runtime.
#[derive(Clone, Copy)]
pub struct Access<'a> {
    pub store: &'a dyn Store,
    pub config: &'a Config,
    pub data_dir: &'a Path,
}

impl Runtime {
    pub fn access(&self) -> Access<'_> {
        Access {
            store: self.store.as_ref(),
            config: &self.config,
            data_dir: &self.data_dir,
        }
    }
}

impl<'a> Access<'a> {
    /// Appends to the audit log as `actor`.
    pub fn audit(self, actor: &'a str) -> Audit<'a> {
        Audit::new(self.store, actor)
    }

    /// A page of the audit log.
    pub async fn audit_log(
        self,
        query: &agentd_store::AuditQuery,
    ) -> agentd_store::StoreResult<Vec<agentd_store::AuditRecord>> {
        self.store.audit_log(query).await
    }
}

/// Credentials: what sign-in and authentication read and change.
impl<'a> Access<'a> {
    pub async fn user_by_name(
        self,
        name: &str,
    ) -> agentd_store::StoreResult<Option<agentd_store::UserRecord>> {
        self.store.get_user_by_name(name).await
    }

    pub async fn token_by_hash(
        self,
        hash: &str,
    ) -> agentd_store::StoreResult<Option<agentd_store::TokenRecord>> {
        self.store.token_by_hash(hash).await
    }

    pub async fn create_token(
        self,
        user_id: &str,
        name: &str,
        hash: &str,
        prefix: &str,
    ) -> agentd_store::StoreResult<()> {
        self.store
            .create_token(user_id, name, hash, prefix)
            .await
            .map(drop)
    }

    pub async fn revoke_token(self, token_id: &str) -> agentd_store::StoreResult<()> {
        self.store.revoke_token(token_id).await.map(drop)
    }

    /// Sessions of all users (for `/metrics`).
    pub async fn count_sessions(self) -> agentd_store::StoreResult<u64> {
        self.store.count_sessions().await
    }
}
