//! Pending permission requests and questions, and rules a user allowed for the
//! rest of a session.

use async_trait::async_trait;
use serde_json::Value;

use crate::records::{Columns, PENDING_COLUMNS, now, pending, to_ms};
use crate::sql::{Backend, Query};
use crate::{PendingRecord, PendingStore, StoreResult};

/// Allow rule `$2` for session `$1` from `$3` on (again: nothing).
pub(crate) const ADD_RULE: &str = "INSERT INTO session_rules (session_id, rule, created_at) \
     VALUES ($1, $2, $3) ON CONFLICT DO NOTHING";

/// Session `$1`'s rules, in the order they were allowed.
pub(crate) const RULES: &str =
    "SELECT rule FROM session_rules WHERE session_id = $1 ORDER BY created_at, rule";

#[async_trait]
impl<B: Backend> PendingStore for B {
    async fn create_pending(&self, record: &PendingRecord) -> StoreResult<()> {
        let query = Query::new(
            "storing a pending request",
            "INSERT INTO pending_requests (id, session_id, turn_id, kind, call_id, data, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&record.id)
        .bind(&record.session_id)
        .bind(&record.turn_id)
        .bind(record.kind.as_str())
        .bind(&record.call_id)
        .bind(record.data.to_string())
        .bind(to_ms(record.created_at));
        self.execute(query).await.map(drop)
    }

    async fn resolve_pending(&self, id: &str, resolution: &Value) -> StoreResult<bool> {
        let query = Query::new(
            "resolving a pending request",
            "UPDATE pending_requests SET resolved_at = $1, resolution = $2 \
             WHERE id = $3 AND resolved_at IS NULL",
        )
        .bind(to_ms(now()))
        .bind(resolution.to_string())
        .bind(id);
        Ok(self.execute(query).await? == 1)
    }

    async fn get_pending(&self, id: &str) -> StoreResult<Option<PendingRecord>> {
        let sql = format!("SELECT {PENDING_COLUMNS} FROM pending_requests WHERE id = $1");
        let query = Query::new("reading a pending request", sql).bind(id);
        self.fetch_optional(query)
            .await?
            .as_ref()
            .map(pending)
            .transpose()
    }

    async fn open_pending(&self, session_id: Option<&str>) -> StoreResult<Vec<PendingRecord>> {
        let sql = format!(
            "SELECT {PENDING_COLUMNS} FROM pending_requests \
             WHERE resolved_at IS NULL AND (CAST($1 AS TEXT) IS NULL OR session_id = $1) \
             ORDER BY created_at, id"
        );
        let query = Query::new("listing pending requests", sql).bind(session_id);
        let rows = self.fetch_all(query).await?;
        rows.iter().map(pending).collect()
    }

    async fn add_session_rule(&self, session_id: &str, rule: &str) -> StoreResult<()> {
        let query = Query::new("storing a session rule", ADD_RULE)
            .bind(session_id)
            .bind(rule)
            .bind(to_ms(now()));
        self.execute(query).await.map(drop)
    }

    async fn session_rules(&self, session_id: &str) -> StoreResult<Vec<String>> {
        let query = Query::new("reading session rules", RULES).bind(session_id);
        let rows = self.fetch_all(query).await?;
        rows.iter().map(|row| row.text("rule")).collect()
    }
}
