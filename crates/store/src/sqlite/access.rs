//! Users' admin flags, grants, usage and the audit log (the SQL is shared
//! with PostgreSQL in `crate::access`).

use super::SqliteStore;
use super::util::{db, now, to_json, to_ms};
use crate::access::{
    self, ADD_GRANT, APPEND_AUDIT, AUDIT_LOG, AuditQuery, AuditRecord, GRANTS, GrantKind,
    GrantRecord, LIST_USERS, NewAudit, REMOVE_GRANT, USER_USAGE, UsageWindow, UserUsage,
};
use crate::records::user as user_from_row;
use crate::{StoreResult, UserRecord};

impl SqliteStore {
    pub(super) async fn list_users_impl(&self) -> StoreResult<Vec<UserRecord>> {
        let rows = sqlx::query(LIST_USERS)
            .fetch_all(&self.pool)
            .await
            .map_err(db("listing users"))?;
        rows.iter().map(user_from_row).collect()
    }

    pub(super) async fn set_user_flag_impl(
        &self,
        name: &str,
        admin: Option<bool>,
        disabled: Option<bool>,
    ) -> StoreResult<bool> {
        let _write = self.write_guard().await;
        let done = sqlx::query(
            "UPDATE users SET is_admin = COALESCE(?1, is_admin), \
             disabled_at = CASE WHEN ?2 IS NULL THEN disabled_at \
                                WHEN ?2 THEN COALESCE(disabled_at, ?3) ELSE NULL END \
             WHERE name = ?4",
        )
        .bind(admin)
        .bind(disabled)
        .bind(to_ms(now()))
        .bind(name)
        .execute(&self.writes)
        .await
        .map_err(db("updating user"))?;
        Ok(done.rows_affected() > 0)
    }

    pub(super) async fn set_grant_impl(
        &self,
        user: &str,
        kind: GrantKind,
        name: &str,
        granted: bool,
    ) -> StoreResult<bool> {
        let _write = self.write_guard().await;
        let sql = access::sqlite(if granted { ADD_GRANT } else { REMOVE_GRANT });
        let mut query = sqlx::query(&sql).bind(user).bind(kind.as_str()).bind(name);
        if granted {
            query = query.bind(to_ms(now()));
        }
        let done = query
            .execute(&self.writes)
            .await
            .map_err(db("changing a grant"))?;
        Ok(done.rows_affected() > 0)
    }

    pub(super) async fn grants_impl(&self, user: Option<&str>) -> StoreResult<Vec<GrantRecord>> {
        let rows = sqlx::query(&access::sqlite(GRANTS))
            .bind(user)
            .fetch_all(&self.pool)
            .await
            .map_err(db("listing grants"))?;
        rows.iter().map(access::grant).collect()
    }

    pub(super) async fn user_usage_impl(
        &self,
        owner: &str,
        window: UsageWindow,
    ) -> StoreResult<UserUsage> {
        let row = sqlx::query(&access::sqlite(USER_USAGE))
            .bind(owner)
            .bind(to_ms(window.turns_since))
            .bind(to_ms(window.day_start))
            .bind(to_ms(window.month_start))
            .fetch_one(&self.pool)
            .await
            .map_err(db("reading usage"))?;
        access::usage(&row)
    }

    pub(super) async fn append_audit_impl(&self, entry: &NewAudit) -> StoreResult<AuditRecord> {
        let at = now();
        let detail = to_json(&entry.detail, "audit detail")?;
        let _write = self.write_guard().await;
        let id: i64 = sqlx::query_scalar(&access::sqlite(APPEND_AUDIT))
            .bind(to_ms(at))
            .bind(&entry.actor)
            .bind(&entry.action)
            .bind(&entry.target)
            .bind(&detail)
            .fetch_one(&self.writes)
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

    pub(super) async fn audit_log_impl(&self, query: &AuditQuery) -> StoreResult<Vec<AuditRecord>> {
        let (after, since, limit) = access::audit_bounds(query);
        let rows = sqlx::query(&access::sqlite(AUDIT_LOG))
            .bind(after)
            .bind(&query.actor)
            .bind(&query.action)
            .bind(since)
            .bind(limit)
            .fetch_all(&self.pool)
            .await
            .map_err(db("reading the audit log"))?;
        rows.iter().map(access::audit).collect()
    }
}
