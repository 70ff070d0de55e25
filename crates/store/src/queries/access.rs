//! [`AccessStore`](crate::AccessStore): grants, usage and the append-only
//! audit log.

pub(crate) const ADD_GRANT: &str = "INSERT INTO grants (user_name, kind, name, created_at) \
     VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING";

pub(crate) const REMOVE_GRANT: &str =
    "DELETE FROM grants WHERE user_name = $1 AND kind = $2 AND name = $3";

pub(crate) const GRANTS: &str = "SELECT user_name, kind, name, created_at FROM grants \
     WHERE ($1 IS NULL OR user_name = $1) ORDER BY user_name, kind, name";

/// `$1` owner, `$2` turns since, `$3` day start, `$4` month start (spend by
/// the days that start at or after them).
pub(crate) const USER_USAGE: &str = "SELECT \
     (SELECT COUNT(*) FROM turns t JOIN sessions s ON s.id = t.session_id \
        WHERE s.owner = $1 AND t.status IS NULL) AS running_turns, \
     (SELECT COUNT(*) FROM turn_starts WHERE owner = $1 AND at >= $2) AS recent_turns, \
     (SELECT MIN(at) FROM turn_starts WHERE owner = $1 AND at >= $2) AS oldest_recent_turn, \
     (SELECT COALESCE(SUM(cost_usd), 0.0) FROM spend_days WHERE owner = $1 AND day >= $3) \
        AS spend_day_usd, \
     (SELECT COALESCE(SUM(cost_usd), 0.0) FROM spend_days WHERE owner = $1 AND day >= $4) \
        AS spend_month_usd, \
     (SELECT COUNT(*) FROM sessions WHERE owner = $1) AS sessions";

/// `$3` USD more spent by `$1` on the day starting at `$2` (ms, UTC).
pub(crate) const RECORD_SPEND: &str = "INSERT INTO spend_days (owner, day, cost_usd) \
     VALUES ($1, $2, $3) ON CONFLICT (owner, day) \
     DO UPDATE SET cost_usd = spend_days.cost_usd + excluded.cost_usd";

/// Milliseconds in a day: `spend_days.day` is a multiple of it.
pub(crate) const DAY_MS: i64 = 86_400_000;

pub(crate) const APPEND_AUDIT: &str = "INSERT INTO audit_log (at, actor, action, target, detail) \
     VALUES ($1, $2, $3, $4, $5) RETURNING id";

/// `$1` after, `$2` actor, `$3` action, `$4` since, `$5` limit.
pub(crate) const AUDIT_LOG: &str = "SELECT id, at, actor, action, target, detail FROM audit_log \
     WHERE id > $1 AND ($2 IS NULL OR actor = $2) AND ($3 IS NULL OR action = $3) \
     AND at >= $4 ORDER BY id LIMIT $5";

macro_rules! access_store {
    ($store:ty) => {
        const _: () = {
            use $crate::StoreResult;
            use $crate::access::{self, AuditQuery, AuditRecord, GrantKind, GrantRecord};
            use $crate::access::{NewAudit, UsageWindow, UserUsage};
            use $crate::queries::access as q;
            use $crate::records::{db, execute, fetch_all, now, to_json, to_ms};

            #[async_trait::async_trait]
            impl $crate::AccessStore for $store {
                async fn set_grant(
                    &self,
                    user: &str,
                    kind: GrantKind,
                    name: &str,
                    granted: bool,
                ) -> StoreResult<bool> {
                    let sql = if granted {
                        q::ADD_GRANT
                    } else {
                        q::REMOVE_GRANT
                    };
                    let mut query = sqlx::query(sql).bind(user).bind(kind.as_str()).bind(name);
                    if granted {
                        query = query.bind(to_ms(now()));
                    }
                    let _write = self.write_guard().await;
                    let done = execute(self.writer(), query, "changing a grant").await?;
                    Ok(done.rows_affected() > 0)
                }

                async fn grants(&self, user: Option<&str>) -> StoreResult<Vec<GrantRecord>> {
                    let query = sqlx::query(q::GRANTS).bind(user);
                    fetch_all(&self.pool, query, "listing grants", access::grant).await
                }

                async fn user_usage(
                    &self,
                    owner: &str,
                    window: UsageWindow,
                ) -> StoreResult<UserUsage> {
                    let row = sqlx::query(q::USER_USAGE)
                        .bind(owner)
                        .bind(to_ms(window.turns_since))
                        .bind(to_ms(window.day_start))
                        .bind(to_ms(window.month_start))
                        .fetch_one(&self.pool)
                        .await
                        .map_err(db("reading usage"))?;
                    access::usage(&row)
                }

                async fn record_spend(&self, owner: &str, cost_usd: f64) -> StoreResult<()> {
                    let at = to_ms(now());
                    let query = sqlx::query(q::RECORD_SPEND)
                        .bind(owner)
                        .bind(at - at.rem_euclid(q::DAY_MS))
                        .bind(cost_usd);
                    let _write = self.write_guard().await;
                    execute(self.writer(), query, "recording spend").await?;
                    Ok(())
                }

                async fn append_audit(&self, entry: &NewAudit) -> StoreResult<AuditRecord> {
                    let at = now();
                    let detail = to_json(&entry.detail, "audit detail")?;
                    let _write = self.write_guard().await;
                    let id: i64 = sqlx::query_scalar(q::APPEND_AUDIT)
                        .bind(to_ms(at))
                        .bind(&entry.actor)
                        .bind(&entry.action)
                        .bind(&entry.target)
                        .bind(&detail)
                        .fetch_one(self.writer())
                        .await
                        .map_err(db("appending to the audit log"))?;
                    Ok(AuditRecord {
                        id,
                        at,
                        actor: entry.actor.clone(),
                        action: entry.action.clone(),
                        target: entry.target.clone(),
                        detail: entry.detail.clone(),
                    })
                }

                async fn audit_log(&self, query: &AuditQuery) -> StoreResult<Vec<AuditRecord>> {
                    let (after, since, limit) = access::audit_bounds(query);
                    // Planned for each call's filters: the generic plan of a
                    // prepared statement walks the whole log for a rare actor.
                    let query = sqlx::query(q::AUDIT_LOG)
                        .persistent(false)
                        .bind(after)
                        .bind(&query.actor)
                        .bind(&query.action)
                        .bind(since)
                        .bind(limit);
                    fetch_all(&self.pool, query, "reading the audit log", access::audit).await
                }
            }
        };
    };
}
pub(crate) use access_store;
