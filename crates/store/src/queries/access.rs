//! Grants, usage and the audit log (the SQL is in `crate::access`).

use async_trait::async_trait;

use crate::access::{
    ADD_GRANT, APPEND_AUDIT, AUDIT_LOG, AuditQuery, AuditRecord, GRANTS, GrantKind, GrantRecord,
    NewAudit, REMOVE_GRANT, USER_USAGE, UsageWindow, UserUsage, audit, audit_bounds, grant, usage,
};
use crate::records::{Columns, now, to_json, to_ms};
use crate::sql::{Backend, Query};
use crate::{AccessStore, StoreResult};

#[async_trait]
impl<B: Backend> AccessStore for B {
    async fn set_grant(
        &self,
        user: &str,
        kind: GrantKind,
        name: &str,
        granted: bool,
    ) -> StoreResult<bool> {
        let sql = if granted { ADD_GRANT } else { REMOVE_GRANT };
        let mut query = Query::new("changing a grant", sql)
            .bind(user)
            .bind(kind.as_str())
            .bind(name);
        if granted {
            query = query.bind(to_ms(now()));
        }
        Ok(self.execute(query).await? > 0)
    }

    async fn grants(&self, user: Option<&str>) -> StoreResult<Vec<GrantRecord>> {
        let query = Query::new("listing grants", GRANTS).bind(user);
        let rows = self.fetch_all(query).await?;
        rows.iter().map(grant).collect()
    }

    async fn user_usage(&self, owner: &str, window: UsageWindow) -> StoreResult<UserUsage> {
        let query = Query::new("reading usage", USER_USAGE)
            .bind(owner)
            .bind(to_ms(window.turns_since))
            .bind(to_ms(window.day_start))
            .bind(to_ms(window.month_start));
        usage(&self.fetch_one(query).await?)
    }

    async fn append_audit(&self, entry: &NewAudit) -> StoreResult<AuditRecord> {
        let at = now();
        let detail = to_json(&entry.detail, "audit detail")?;
        let query = Query::new("appending to the audit log", APPEND_AUDIT)
            .bind(to_ms(at))
            .bind(&entry.actor)
            .bind(&entry.action)
            .bind(&entry.target)
            .bind(detail);
        let rows = self.write_fetch_all(query).await?;
        let id = match rows.first() {
            Some(row) => row.int("id")?,
            None => {
                return Err(crate::StoreError::Database(
                    "appending to the audit log: no id came back".into(),
                ));
            }
        };
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
        let (after, since, limit) = audit_bounds(query);
        let sql = Query::new("reading the audit log", AUDIT_LOG)
            .bind(after)
            .bind(&query.actor)
            .bind(&query.action)
            .bind(since)
            .bind(limit);
        let rows = self.fetch_all(sql).await?;
        rows.iter().map(audit).collect()
    }
}
