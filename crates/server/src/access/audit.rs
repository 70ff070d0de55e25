//! The audit log: who did what. Entries are written after the action
//! succeeded; a store that cannot take one is logged, not fatal to the action
//! (which the store has just recorded anyway).

use agentd_store::{NewAudit, Store};
use serde_json::Value;

/// The actor of changes made on the command line: not a user name (those
/// have no `:`), so no user's entries can pass for the operator's.
pub const OPERATOR: &str = "cli:operator";

/// Appends to the audit log.
pub struct Audit<'a> {
    store: &'a dyn Store,
    actor: &'a str,
}

impl<'a> Audit<'a> {
    pub fn new(store: &'a dyn Store, actor: &'a str) -> Self {
        Audit { store, actor }
    }

    /// Record `action` on `target` with `detail` (a JSON object).
    pub async fn record(&self, action: &str, target: Option<&str>, detail: Value) {
        let entry = NewAudit {
            actor: self.actor.to_string(),
            action: action.to_string(),
            target: target.map(str::to_string),
            detail,
        };
        if let Err(err) = self.store.append_audit(&entry).await {
            tracing::error!(%err, actor = self.actor, action, "cannot append to the audit log");
        }
    }
}
