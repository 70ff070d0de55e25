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
