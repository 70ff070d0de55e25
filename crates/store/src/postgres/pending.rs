//! Pending permission requests and questions, and rules a user allowed for the
//! rest of a session.

use serde_json::Value;

use super::PostgresStore;
use super::util::{db, now, to_ms};
pub(super) use crate::records::{PENDING_COLUMNS as COLUMNS, pending as pending_from_row};
use crate::{PendingRecord, StoreResult};

impl PostgresStore {
    pub(super) async fn create_pending_impl(&self, record: &PendingRecord) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO pending_requests (id, session_id, turn_id, kind, call_id, data, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&record.id)
        .bind(&record.session_id)
        .bind(&record.turn_id)
        .bind(record.kind.as_str())
        .bind(&record.call_id)
        .bind(record.data.to_string())
        .bind(to_ms(record.created_at))
        .execute(&self.pool)
        .await
        .map_err(db("storing a pending request"))?;
        Ok(())
    }

    pub(super) async fn resolve_pending_impl(
        &self,
        id: &str,
        resolution: &Value,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE pending_requests SET resolved_at = $1, resolution = $2 \
             WHERE id = $3 AND resolved_at IS NULL",
        )
        .bind(to_ms(now()))
        .bind(resolution.to_string())
        .bind(id)
        .execute(&self.pool)
        .await
        .map_err(db("resolving a pending request"))?;
        Ok(done.rows_affected() == 1)
    }

    pub(super) async fn get_pending_impl(&self, id: &str) -> StoreResult<Option<PendingRecord>> {
        let sql = format!("SELECT {COLUMNS} FROM pending_requests WHERE id = $1");
        let row = sqlx::query(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("reading a pending request"))?;
        row.as_ref().map(pending_from_row).transpose()
    }

    pub(super) async fn open_pending_impl(
        &self,
        session_id: Option<&str>,
    ) -> StoreResult<Vec<PendingRecord>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM pending_requests \
             WHERE resolved_at IS NULL AND ($1::text IS NULL OR session_id = $1) \
             ORDER BY created_at, id"
        );
        let rows = sqlx::query(&sql)
            .bind(session_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db("listing pending requests"))?;
        rows.iter().map(pending_from_row).collect()
    }

    pub(super) async fn add_session_rule_impl(
        &self,
        session_id: &str,
        rule: &str,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO session_rules (session_id, rule, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT DO NOTHING",
        )
        .bind(session_id)
        .bind(rule)
        .bind(to_ms(now()))
        .execute(&self.pool)
        .await
        .map_err(db("storing a session rule"))?;
        Ok(())
    }

    pub(super) async fn session_rules_impl(&self, session_id: &str) -> StoreResult<Vec<String>> {
        sqlx::query_scalar(
            "SELECT rule FROM session_rules WHERE session_id = $1 ORDER BY created_at, rule",
        )
        .bind(session_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db("reading session rules"))
    }
}
