//! Grants, usage and the audit log: the records, and reading them from rows
//! (their SQL is in `crate::queries::access`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::StoreResult;
use crate::records::{Columns, from_json};

/// What a grant gives: a profile or a model, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantKind {
    Profile,
    Model,
}

crate::types::text_enum!(GrantKind { Profile = "profile", Model = "model" });

/// A profile or model a user may choose beyond the server's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrantRecord {
    pub user_name: String,
    pub kind: GrantKind,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

/// The windows [`UserUsage`] counts over.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UsageWindow {
    /// Turns started since then count as recent (an hour ago, say).
    pub turns_since: DateTime<Utc>,
    /// Spend is kept by UTC day: the day's and the month's count the days
    /// that start at or after these (midnights, UTC, in agentd's use).
    pub day_start: DateTime<Utc>,
    pub month_start: DateTime<Utc>,
}

/// One user's use of the server, by the owner of sessions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UserUsage {
    pub running_turns: u64,
    /// Turns started since [`UsageWindow::turns_since`].
    pub recent_turns: u64,
    /// When the oldest of those started.
    pub oldest_recent_turn: Option<DateTime<Utc>>,
    pub spend_day_usd: f64,
    pub spend_month_usd: f64,
    pub sessions: u64,
}

/// One entry of the append-only audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Increasing; the cursor for reading on.
    pub id: i64,
    pub at: DateTime<Utc>,
    /// The user who did it, or `operator` for the command line.
    pub actor: String,
    /// `session.create`, `grant.add`, `token.revoke`, …
    pub action: String,
    /// What it was done to: a session id, a user name, a token id.
    pub target: Option<String>,
    pub detail: serde_json::Value,
}

/// An entry to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAudit {
    pub actor: String,
    pub action: String,
    pub target: Option<String>,
    pub detail: serde_json::Value,
}

/// Which entries to read: after `after` (an id), oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditQuery {
    pub after: Option<i64>,
    pub limit: u32,
    pub actor: Option<String>,
    pub action: Option<String>,
    pub since: Option<DateTime<Utc>>,
}

pub(crate) fn grant(row: &impl Columns) -> StoreResult<GrantRecord> {
    let kind = row.text("kind")?;
    Ok(GrantRecord {
        user_name: row.text("user_name")?,
        kind: GrantKind::parse(&kind)
            .ok_or_else(|| crate::StoreError::Corrupt(format!("grant kind {kind:?}")))?,
        name: row.text("name")?,
        created_at: row.time("created_at")?,
    })
}

pub(crate) fn usage(row: &impl Columns) -> StoreResult<UserUsage> {
    Ok(UserUsage {
        running_turns: row.count("running_turns")?,
        recent_turns: row.count("recent_turns")?,
        oldest_recent_turn: row.opt_time("oldest_recent_turn")?,
        spend_day_usd: row.real("spend_day_usd")?,
        spend_month_usd: row.real("spend_month_usd")?,
        sessions: row.count("sessions")?,
    })
}

pub(crate) fn audit(row: &impl Columns) -> StoreResult<AuditRecord> {
    Ok(AuditRecord {
        id: row.int("id")?,
        at: row.time("at")?,
        actor: row.text("actor")?,
        action: row.text("action")?,
        target: row.opt_text("target")?,
        detail: from_json(&row.text("detail")?, "audit detail")?,
    })
}

/// The audit query's bounds: from the start, and at most 10 000 at a time.
pub(crate) fn audit_bounds(query: &AuditQuery) -> (i64, i64, i64) {
    let after = query.after.unwrap_or(0);
    let since = query.since.map_or(i64::MIN, |at| at.timestamp_millis());
    let limit = i64::from(query.limit.clamp(1, 10_000));
    (after, since, limit)
}
