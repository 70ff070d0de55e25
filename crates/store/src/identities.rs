//! Identity-provider accounts linked to users (see [`IdentityStore`](crate::IdentityStore)).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::access::GrantKind;
use crate::records::Columns;
use crate::types::UserRecord;
use crate::{StoreError, StoreResult};

/// One grant a provider's group gave.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupGrant {
    pub kind: GrantKind,
    pub name: String,
}

/// What the provider's groups gave at the last sign-in: only these are
/// taken back when the groups no longer give them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupGiven {
    pub admin: bool,
    pub grants: Vec<GroupGrant>,
}

/// A provider account (`issuer`, `subject`) and the user it signs in as.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentityRecord {
    pub issuer: String,
    pub subject: String,
    pub user: UserRecord,
    /// When the account was linked.
    pub linked_at: DateTime<Utc>,
    pub group_given: GroupGiven,
}

pub(crate) const IDENTITY_SELECT: &str = "SELECT u.id, u.name, u.is_admin, u.created_at, \
    u.disabled_at, i.issuer, i.subject, i.created_at AS linked_at, i.group_admin, \
    i.group_grants FROM user_identities i JOIN users u ON u.id = i.user_id";

pub(crate) fn identity(row: &impl Columns) -> StoreResult<IdentityRecord> {
    let grants = row.text("group_grants")?;
    let grants = serde_json::from_str(&grants)
        .map_err(|e| StoreError::Corrupt(format!("group_grants {grants:?}: {e}")))?;
    Ok(IdentityRecord {
        issuer: row.text("issuer")?,
        subject: row.text("subject")?,
        user: crate::records::user(row)?,
        linked_at: row.time("linked_at")?,
        group_given: GroupGiven {
            admin: row.flag("group_admin")?,
            grants,
        },
    })
}
