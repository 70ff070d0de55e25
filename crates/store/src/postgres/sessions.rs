//! Sessions: create, read, list (cursor pagination), update totals, delete.

use agentd_protocol::Usage;

use super::PostgresStore;
use super::util::{db, now, to_ms};
pub(super) use crate::records::{SESSION_COLUMNS as COLUMNS, session as session_from_row};
use crate::{NewSession, SessionRecord, SessionStatus, SessionUpdate, StoreError, StoreResult};

impl PostgresStore {
    pub(super) async fn create_session_impl(&self, new: NewSession) -> StoreResult<SessionRecord> {
        let id = new.id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let at = now();
        let record = SessionRecord {
            id,
            owner: new.owner,
            title: new.title,
            workspace: new.workspace,
            model: new.model,
            profile: new.profile,
            status: SessionStatus::Idle,
            created_at: at,
            updated_at: at,
            usage: Usage::default(),
            cost_usd: 0.0,
            turns: 0,
            last_seq: 0,
        };
        let result = sqlx::query(
            "INSERT INTO sessions (id, owner, title, workspace, model, profile, status, \
             created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&record.id)
        .bind(&record.owner)
        .bind(&record.title)
        .bind(&record.workspace)
        .bind(&record.model)
        .bind(&record.profile)
        .bind(record.status.as_str())
        .bind(to_ms(at))
        .bind(to_ms(at))
        .execute(&self.pool)
        .await;
        match result {
            Ok(_) => Ok(record),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Err(StoreError::Database(
                format!("creating session: id {:?} already exists", record.id),
            )),
            Err(e) => Err(db("creating session")(e)),
        }
    }

    pub(super) async fn get_session_impl(&self, id: &str) -> StoreResult<Option<SessionRecord>> {
        let sql = format!("SELECT {COLUMNS} FROM sessions WHERE id = $1");
        sqlx::query(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("reading session"))?
            .as_ref()
            .map(session_from_row)
            .transpose()
    }

    /// Newest first by `(created_at, id)`. A `before` cursor that is not one of
    /// the owner's sessions is `NotFound` (it may have been deleted meanwhile),
    /// so a caller can tell "bad cursor" from "no more pages".
    pub(super) async fn list_sessions_impl(
        &self,
        owner: &str,
        before: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<SessionRecord>> {
        let rows = match before {
            None => {
                let sql = format!(
                    "SELECT {COLUMNS} FROM sessions WHERE owner = $1 \
                     ORDER BY created_at DESC, id DESC LIMIT $2"
                );
                sqlx::query(&sql)
                    .bind(owner)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
            }
            Some(cursor) => {
                let cursor_at: Option<i64> = sqlx::query_scalar(
                    "SELECT created_at FROM sessions WHERE id = $1 AND owner = $2",
                )
                .bind(cursor)
                .bind(owner)
                .fetch_optional(&self.pool)
                .await
                .map_err(db("reading session cursor"))?;
                let Some(cursor_at) = cursor_at else {
                    return Err(StoreError::NotFound(format!("session {cursor}")));
                };
                let sql = format!(
                    "SELECT {COLUMNS} FROM sessions WHERE owner = $1 AND (created_at, id) < ($2, $3) \
                     ORDER BY created_at DESC, id DESC LIMIT $4"
                );
                sqlx::query(&sql)
                    .bind(owner)
                    .bind(cursor_at)
                    .bind(cursor)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
            }
        }
        .map_err(db("listing sessions"))?;
        rows.iter().map(session_from_row).collect()
    }

    pub(super) async fn update_session_impl(
        &self,
        id: &str,
        update: SessionUpdate,
    ) -> StoreResult<SessionRecord> {
        let sql = format!(
            "UPDATE sessions SET \
               title = COALESCE($1, title), \
               status = COALESCE($2, status), \
               input_tokens = input_tokens + $3, \
               output_tokens = output_tokens + $4, \
               cache_read_tokens = cache_read_tokens + $5, \
               cache_write_tokens = cache_write_tokens + $6, \
               cost_usd = cost_usd + $7, \
               turns = turns + $8, \
               updated_at = $9 \
             WHERE id = $10 RETURNING {COLUMNS}"
        );
        let query = crate::history::bind_session_update!(sqlx::query(&sql), update)?.bind(id);
        let row = query
            .fetch_optional(&self.pool)
            .await
            .map_err(db("updating session"))?;
        match row {
            Some(row) => session_from_row(&row),
            None => Err(StoreError::NotFound(format!("session {id}"))),
        }
    }

    pub(super) async fn delete_session_impl(&self, id: &str) -> StoreResult<bool> {
        // Messages, events, turns, … go with it (ON DELETE CASCADE).
        let done = sqlx::query("DELETE FROM sessions WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(db("deleting session"))?;
        Ok(done.rows_affected() > 0)
    }

    /// Sessions idle since before `cutoff` with no running turn, oldest first.
    pub(super) async fn sessions_updated_before_impl(
        &self,
        cutoff: chrono::DateTime<chrono::Utc>,
        limit: u32,
    ) -> StoreResult<Vec<SessionRecord>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM sessions s WHERE s.updated_at < $1 \
             AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id AND t.status IS NULL) \
             ORDER BY s.updated_at, s.id LIMIT $2"
        );
        let rows = sqlx::query(&sql)
            .bind(to_ms(cutoff))
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(db("listing sessions by age"))?;
        rows.iter().map(session_from_row).collect()
    }
}
