//! Per-user limits (`[quotas]`, `[users.NAME.quotas]`): turns at once and per
//! hour answer `429` with `Retry-After`; spend per day and month, stored
//! sessions and workspace bytes answer `403 quota_exceeded`. Counted from the
//! store, so every node of a cluster sees the same numbers; two requests at
//! the same instant may both pass a limit they together cross.

use agentd_engine::SpendCap;
use agentd_store::{StoreError, UsageWindow, UserUsage};
use chrono::{DateTime, Datelike, Duration, TimeZone, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::Access;
use crate::config::QuotaToml;

/// How long a client over `max_running_turns` is asked to wait.
const RUNNING_RETRY_S: u64 = 5;

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq)]
pub enum QuotaRefusal {
    /// Try again after this many seconds (`429`).
    Rate {
        limit: &'static str,
        message: String,
        retry_after_s: u64,
    },
    /// Over a quota (`403 quota_exceeded`).
    Exceeded {
        limit: &'static str,
        message: String,
    },
}

/// A user's use of the server against their limits.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UsageReport {
    pub user: String,
    pub running_turns: u64,
    /// Turns started in the last hour.
    pub turns_last_hour: u64,
    /// Spend since midnight UTC, in USD.
    pub spend_today_usd: f64,
    /// Spend since the first of the month (UTC), in USD.
    pub spend_this_month_usd: f64,
    pub sessions: u64,
    /// Bytes in all of the user's workspaces.
    pub workspace_bytes: u64,
    /// The limits that apply (`null`: none).
    pub limits: QuotaToml,
}

fn window(now: DateTime<Utc>) -> UsageWindow {
    let day_start = Utc
        .with_ymd_and_hms(now.year(), now.month(), now.day(), 0, 0, 0)
        .single()
        .unwrap_or(now);
    let month_start = Utc
        .with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0)
        .single()
        .unwrap_or(now);
    UsageWindow {
        turns_since: now - Duration::hours(1),
        day_start,
        month_start,
    }
}

/// The spend quotas and what is left of each, tightest first.
fn spend_left(limits: &QuotaToml, usage: &UserUsage) -> Option<(f64, &'static str, f64)> {
    [
        (
            "spend_usd_per_day",
            limits.spend_usd_per_day,
            usage.spend_day_usd,
        ),
        (
            "spend_usd_per_month",
            limits.spend_usd_per_month,
            usage.spend_month_usd,
        ),
    ]
    .into_iter()
    .filter_map(|(key, cap, spent)| cap.map(|cap| (cap - spent, key, cap)))
    .min_by(|a, b| a.0.total_cmp(&b.0))
}

/// Whether `limits` caps spend (a day's or a month's).
fn limits_spend(limits: &QuotaToml) -> bool {
    limits.spend_usd_per_day.is_some() || limits.spend_usd_per_month.is_some()
}

/// Whether admitting a turn needs the user's counted use: some limit on
/// turns or spend is set. Without one, nothing counted could refuse it, and
/// the count (a sum over the month's spend) is not read for every message.
fn turn_needs_usage(limits: &QuotaToml) -> bool {
    limits.max_running_turns.is_some() || limits.turns_per_hour.is_some() || limits_spend(limits)
}

fn spend_exceeded(limits: &QuotaToml, usage: &UserUsage) -> Result<(), QuotaRefusal> {
    match spend_left(limits, usage) {
        Some((left, key, cap)) if left <= 0.0 => Err(QuotaRefusal::Exceeded {
            limit: key,
            message: format!(
                "your spend reached its quota ({key} = ${cap:.2}); ask an admin to raise \
                 it, or wait for it to reset (midnight UTC, the first of the month)"
            ),
        }),
        _ => Ok(()),
    }
}

impl Access<'_> {
    /// `[quotas]` with the user's own over it.
    pub fn quotas_of(&self, user: &str) -> QuotaToml {
        let defaults = self.config.quotas;
        match self.config.users.get(user) {
            Some(own) => defaults.merged(&own.quotas),
            None => defaults,
        }
    }

    async fn usage_now(&self, user: &str) -> Result<UserUsage, StoreError> {
        self.store.user_usage(user, window(Utc::now())).await
    }

    /// Whether `user` may start another turn now, with `in_flight` of
    /// theirs accepted on this node and not ended (the store counts only
    /// those that started; see `crate::admission`).
    pub async fn check_turn_quotas(
        &self,
        user: &str,
        in_flight: u64,
    ) -> Result<(), QuotaCheckError> {
        let limits = self.quotas_of(user);
        if !turn_needs_usage(&limits) {
            return self.check_workspace_bytes(user, &limits).await;
        }
        let usage = self.usage_now(user).await?;
        let running = usage.running_turns.max(in_flight);
        // Accepted but not started yet: not in the store's hour either.
        let recent = usage.recent_turns + in_flight.saturating_sub(usage.running_turns);
        if let Some(max) = limits.max_running_turns
            && running >= u64::from(max)
        {
            return Err(QuotaRefusal::Rate {
                limit: "max_running_turns",
                message: format!(
                    "you have {running} turns running or queued, your limit at once \
                     (max_running_turns = {max}); wait for one to finish"
                ),
                retry_after_s: RUNNING_RETRY_S,
            }
            .into());
        }
        if let Some(max) = limits.turns_per_hour
            && recent >= u64::from(max)
        {
            let frees_at = usage.oldest_recent_turn.unwrap_or_else(Utc::now) + Duration::hours(1);
            let wait = (frees_at - Utc::now()).num_seconds().max(1) as u64;
            return Err(QuotaRefusal::Rate {
                limit: "turns_per_hour",
                message: format!(
                    "you have started {recent} turns in the last hour, your limit \
                     (turns_per_hour = {max}); try again in {wait} s"
                ),
                retry_after_s: wait,
            }
            .into());
        }
        self.check_exceeded(user, &limits, &usage).await
    }

    /// Whether a turn of `user`'s that waited in a queue may still start:
    /// the quotas that are not about rates (those counted it when it came).
    pub async fn recheck_queued(&self, user: &str) -> Result<(), QuotaCheckError> {
        let limits = self.quotas_of(user);
        if !limits_spend(&limits) {
            return self.check_workspace_bytes(user, &limits).await;
        }
        let usage = self.usage_now(user).await?;
        self.check_exceeded(user, &limits, &usage).await
    }

    async fn check_exceeded(
        &self,
        user: &str,
        limits: &QuotaToml,
        usage: &UserUsage,
    ) -> Result<(), QuotaCheckError> {
        spend_exceeded(limits, usage)?;
        self.check_workspace_bytes(user, limits).await
    }

    /// Whether `user` may spend more: a model call outside any session
    /// (the Anthropic-compatible `/v1/messages`) needs only this.
    pub async fn check_spend_quotas(&self, user: &str) -> Result<(), QuotaCheckError> {
        let limits = self.quotas_of(user);
        if !limits_spend(&limits) {
            return Ok(());
        }
        let usage = self.usage_now(user).await?;
        Ok(spend_exceeded(&limits, &usage)?)
    }

    /// Whether `user` may store another session.
    pub async fn check_session_quotas(&self, user: &str) -> Result<(), QuotaCheckError> {
        let limits = self.quotas_of(user);
        if let Some(max) = limits.max_sessions {
            let usage = self.usage_now(user).await?;
            if usage.sessions >= max {
                return Err(QuotaRefusal::Exceeded {
                    limit: "max_sessions",
                    message: format!(
                        "you have {} sessions, your quota (max_sessions = {max}); \
                         delete some to make room",
                        usage.sessions
                    ),
                }
                .into());
            }
        }
        self.check_workspace_bytes(user, &limits).await
    }

    async fn check_workspace_bytes(
        &self,
        user: &str,
        limits: &QuotaToml,
    ) -> Result<(), QuotaCheckError> {
        let Some(max) = limits.workspace_bytes else {
            return Ok(());
        };
        let used = self.workspace_bytes(user).await?;
        if used >= max {
            return Err(QuotaRefusal::Exceeded {
                limit: "workspace_bytes",
                message: format!(
                    "your workspaces hold {used} bytes, your quota (workspace_bytes = {max}); \
                     delete files or sessions to make room"
                ),
            }
            .into());
        }
        Ok(())
    }

    /// The tightest of `owner`'s spend quotas as a turn starts, for the
    /// engine to stop at.
    pub async fn owner_spend_cap(&self, owner: &str) -> Result<Option<SpendCap>, StoreError> {
        let limits = self.quotas_of(owner);
        if !limits_spend(&limits) {
            return Ok(None);
        }
        let usage = self.usage_now(owner).await?;
        Ok(spend_left(&limits, &usage).map(|(left, key, _)| SpendCap {
            remaining_usd: left.max(0.0),
            quota: key.to_string(),
        }))
    }

    /// `user`'s usage and limits.
    pub async fn usage_report(&self, user: &str) -> Result<UsageReport, StoreError> {
        let usage = self.usage_now(user).await?;
        let workspace_bytes = self.workspace_bytes(user).await?;
        Ok(UsageReport {
            user: user.to_string(),
            running_turns: usage.running_turns,
            turns_last_hour: usage.recent_turns,
            spend_today_usd: usage.spend_day_usd,
            spend_this_month_usd: usage.spend_month_usd,
            sessions: usage.sessions,
            workspace_bytes,
            limits: self.quotas_of(user),
        })
    }
}

/// A refusal, or the store failing while counting.
#[derive(Debug)]
pub enum QuotaCheckError {
    Refused(QuotaRefusal),
    Store(StoreError),
}

impl From<QuotaRefusal> for QuotaCheckError {
    fn from(refusal: QuotaRefusal) -> Self {
        QuotaCheckError::Refused(refusal)
    }
}

impl From<StoreError> for QuotaCheckError {
    fn from(err: StoreError) -> Self {
        QuotaCheckError::Store(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_and_months_start_at_midnight_utc() {
        let now = Utc.with_ymd_and_hms(2026, 11, 26, 22, 5, 9).unwrap();
        let w = window(now);
        assert_eq!(
            w.day_start,
            Utc.with_ymd_and_hms(2026, 11, 26, 0, 0, 0).unwrap()
        );
        assert_eq!(
            w.month_start,
            Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()
        );
        assert_eq!(w.turns_since, now - Duration::hours(1));
    }

    #[test]
    fn the_tightest_spend_quota_is_the_one_left() {
        let limits = QuotaToml {
            spend_usd_per_day: Some(5.0),
            spend_usd_per_month: Some(20.0),
            ..Default::default()
        };
        let usage = UserUsage {
            spend_day_usd: 1.0,
            spend_month_usd: 18.0,
            ..Default::default()
        };
        let (left, key, _) = spend_left(&limits, &usage).unwrap();
        assert_eq!((left, key), (2.0, "spend_usd_per_month"));
        assert!(spend_left(&QuotaToml::default(), &usage).is_none());
    }
}
