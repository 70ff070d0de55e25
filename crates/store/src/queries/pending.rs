//! [`PendingStore`](crate::PendingStore): open permission requests and
//! questions, and rules a user allowed for the rest of a session.

use crate::dialect::sql;
use crate::records::PENDING_COLUMNS;

pub(crate) const INSERT: &str = "INSERT INTO pending_requests \
     (id, session_id, turn_id, kind, call_id, data, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// The first answer wins.
pub(crate) const RESOLVE: &str = "UPDATE pending_requests SET resolved_at = $1, resolution = $2 \
     WHERE id = $3 AND resolved_at IS NULL";

sql!(pub(crate) GET = "SELECT ", PENDING_COLUMNS, " FROM pending_requests WHERE id = $1");

sql!(pub(crate) OPEN = "SELECT ", PENDING_COLUMNS, " FROM pending_requests \
     WHERE resolved_at IS NULL AND (CAST($1 AS TEXT) IS NULL OR session_id = $1) \
     ORDER BY created_at, id");

/// Also the export's: a session's rules in order.
pub(crate) const ADD_RULE: &str = "INSERT INTO session_rules (session_id, rule, created_at) \
     VALUES ($1, $2, $3) ON CONFLICT DO NOTHING";

pub(crate) const RULES: &str =
    "SELECT rule FROM session_rules WHERE session_id = $1 ORDER BY created_at, rule";

pub(crate) const SET_MOUNTS: &str = "INSERT INTO session_mounts (session_id, mounts) \
     VALUES ($1, $2) ON CONFLICT (session_id) DO UPDATE SET mounts = excluded.mounts";

pub(crate) const MOUNTS: &str = "SELECT mounts FROM session_mounts WHERE session_id = $1";

macro_rules! pending_store {
    ($store:ty) => {
        const _: () = {
            use serde_json::Value;

            use $crate::queries::pending as q;
            use $crate::records::{db, execute, fetch_all, fetch_optional, now, pending, to_ms};
            use $crate::{PendingRecord, StoreResult};

            #[async_trait::async_trait]
            impl $crate::PendingStore for $store {
                async fn create_pending(&self, record: &PendingRecord) -> StoreResult<()> {
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::INSERT)
                        .bind(&record.id)
                        .bind(&record.session_id)
                        .bind(&record.turn_id)
                        .bind(record.kind.as_str())
                        .bind(&record.call_id)
                        .bind(record.data.to_string())
                        .bind(to_ms(record.created_at));
                    execute(self.writer(), query, "storing a pending request").await?;
                    Ok(())
                }

                async fn resolve_pending(&self, id: &str, resolution: &Value) -> StoreResult<bool> {
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::RESOLVE)
                        .bind(to_ms(now()))
                        .bind(resolution.to_string())
                        .bind(id);
                    let done = execute(self.writer(), query, "resolving a pending request").await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn get_pending(&self, id: &str) -> StoreResult<Option<PendingRecord>> {
                    let query = sqlx::query(q::GET).bind(id);
                    fetch_optional(&self.pool, query, "reading a pending request", pending).await
                }

                async fn open_pending(
                    &self,
                    session_id: Option<&str>,
                ) -> StoreResult<Vec<PendingRecord>> {
                    let query = sqlx::query(q::OPEN).bind(session_id);
                    fetch_all(&self.pool, query, "listing pending requests", pending).await
                }

                async fn add_session_rule(&self, session_id: &str, rule: &str) -> StoreResult<()> {
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::ADD_RULE)
                        .bind(session_id)
                        .bind(rule)
                        .bind(to_ms(now()));
                    execute(self.writer(), query, "storing a session rule").await?;
                    Ok(())
                }

                async fn session_rules(&self, session_id: &str) -> StoreResult<Vec<String>> {
                    let context = "reading session rules";
                    let rule =
                        |row: &rusqlite::Row<'_>| $crate::records::Columns::text(row, "rule");
                    if let Some(rules) = self.read_here(q::RULES, &[&session_id], context, rule) {
                        return rules;
                    }
                    sqlx::query_scalar(q::RULES)
                        .bind(session_id)
                        .fetch_all(&self.pool)
                        .await
                        .map_err(db(context))
                }

                async fn set_session_mounts(
                    &self,
                    session_id: &str,
                    mounts: &str,
                ) -> StoreResult<()> {
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::SET_MOUNTS).bind(session_id).bind(mounts);
                    execute(self.writer(), query, "storing a session's mounts").await?;
                    Ok(())
                }

                async fn session_mounts(&self, session_id: &str) -> StoreResult<Option<String>> {
                    let context = "reading a session's mounts";
                    let mounts =
                        |row: &rusqlite::Row<'_>| $crate::records::Columns::text(row, "mounts");
                    if let Some(rows) = self.read_here(q::MOUNTS, &[&session_id], context, mounts) {
                        return rows.map(|rows| rows.into_iter().next());
                    }
                    sqlx::query_scalar(q::MOUNTS)
                        .bind(session_id)
                        .fetch_optional(&self.pool)
                        .await
                        .map_err(db(context))
                }
            }
        };
    };
}
pub(crate) use pending_store;
