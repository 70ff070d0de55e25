//! `[access]` and `[quotas]`: which profiles and models users may choose
//! without a grant of their own, who is an admin, and each user's limits.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Config, ProfileConfig, SandboxMode};
use agentd_policy::permissions::PermissionMode;

/// `[access]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessConfig {
    /// Profiles every user may choose. Unset: every profile that is not
    /// admin-only (see [`ProfileConfig::admin_only`]). Naming an admin-only
    /// profile here grants it to everyone.
    pub profiles: Option<Vec<String>>,
    /// Models (the names of `GET /v1/models`) every user may choose. Unset: all.
    pub models: Option<Vec<String>>,
    /// Users who are admins whatever the database says (`auth = "header"`
    /// users have no row to mark).
    #[serde(default)]
    pub admins: Vec<String>,
}

/// `[quotas]`, and `[users.NAME.quotas]` over it. Every limit is off unless set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QuotaToml {
    /// Turns running at once (over it: 429).
    pub max_running_turns: Option<u32>,
    /// Turns started in any hour (over it: 429 with `Retry-After`).
    pub turns_per_hour: Option<u32>,
    /// Spend in USD since midnight UTC (over it: 403; a running turn that
    /// reaches it ends as `budget_exceeded`).
    pub spend_usd_per_day: Option<f64>,
    /// Spend in USD since the first of the month, UTC.
    pub spend_usd_per_month: Option<f64>,
    /// Sessions stored (over it, creating or forking one: 403).
    pub max_sessions: Option<u64>,
    /// Bytes in all of the user's workspaces (over it: 403 for new turns
    /// and sessions).
    pub workspace_bytes: Option<u64>,
}

impl QuotaToml {
    /// `self`, with `over`'s limits where it sets them.
    pub fn merged(self, over: &QuotaToml) -> QuotaToml {
        QuotaToml {
            max_running_turns: over.max_running_turns.or(self.max_running_turns),
            turns_per_hour: over.turns_per_hour.or(self.turns_per_hour),
            spend_usd_per_day: over.spend_usd_per_day.or(self.spend_usd_per_day),
            spend_usd_per_month: over.spend_usd_per_month.or(self.spend_usd_per_month),
            max_sessions: over.max_sessions.or(self.max_sessions),
            workspace_bytes: over.workspace_bytes.or(self.workspace_bytes),
        }
    }

    /// What is wrong with these limits, if anything.
    pub(super) fn problem(&self) -> Option<String> {
        [
            ("spend_usd_per_day", self.spend_usd_per_day),
            ("spend_usd_per_month", self.spend_usd_per_month),
        ]
        .into_iter()
        .find_map(|(key, usd)| {
            usd.filter(|usd| !usd.is_finite() || *usd < 0.0)
                .map(|usd| format!("{key} = {usd}: must be a number of USD, 0 or more"))
        })
    }
}

impl ProfileConfig {
    /// Profiles that let the agent past the sandbox or past every
    /// permission check are for admins, unless granted by name.
    pub fn admin_only(&self) -> bool {
        self.mode == PermissionMode::Bypass || self.sandbox == SandboxMode::Off
    }
}

pub(super) fn check(config: &Config) -> Result<(), String> {
    if let Some(message) = config.quotas.problem() {
        return Err(format!("[quotas] {message}"));
    }
    for name in config.access.profiles.iter().flatten() {
        if config.profile(name).is_err() {
            return Err(format!(
                "[access] profiles names {name:?}, which is not a profile"
            ));
        }
    }
    Ok(())
}
