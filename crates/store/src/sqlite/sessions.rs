//! Sessions: create, read, list (cursor pagination), update totals, delete.

use agentd_protocol::{TurnStatus, Usage};

use super::SqliteStore;
use super::util::{db, now, to_ms};
pub(super) use crate::records::{SESSION_COLUMNS as COLUMNS, session as session_from_row};
use crate::{NewSession, SessionRecord, SessionStatus, SessionUpdate, StoreError, StoreResult};

impl SqliteStore {
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
        let _write = self.write_guard().await;
        let result = sqlx::query(
            "INSERT INTO sessions (id, owner, title, workspace, model, profile, status, \
             created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        .execute(&self.writes)
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
        let sql = format!("SELECT {COLUMNS} FROM sessions WHERE id = ?");
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
                    "SELECT {COLUMNS} FROM sessions WHERE owner = ? \
                     ORDER BY created_at DESC, id DESC LIMIT ?"
                );
                sqlx::query(&sql)
                    .bind(owner)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
            }
            Some(cursor) => {
                let cursor_at: Option<i64> = sqlx::query_scalar(
                    "SELECT created_at FROM sessions WHERE id = ? AND owner = ?",
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
                    "SELECT {COLUMNS} FROM sessions WHERE owner = ? AND (created_at, id) < (?, ?) \
                     ORDER BY created_at DESC, id DESC LIMIT ?"
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
        let sql = format!("{UPDATE_SESSION} WHERE id = ? RETURNING {COLUMNS}");
        let query = crate::history::bind_session_update!(sqlx::query(&sql), update)?.bind(id);
        let _write = self.write_guard().await;
        let row = query
            .fetch_optional(&self.writes)
            .await
            .map_err(db("updating session"))?;
        match row {
            Some(row) => session_from_row(&row),
            None => Err(StoreError::NotFound(format!("session {id}"))),
        }
    }

    /// One round trip: the turn's status, then the session's totals if the
    /// turn exists.
    pub(super) async fn finish_turn_with_session_impl(
        &self,
        turn_id: &str,
        status: TurnStatus,
        session_id: &str,
        update: SessionUpdate,
    ) -> StoreResult<SessionRecord> {
        let ctx = "finishing turn";
        let sql = format!(
            "BEGIN IMMEDIATE;\n\
             UPDATE turns SET status = ?, finished_at = ? WHERE id = ? AND status IS NULL;\n\
             {UPDATE_SESSION} WHERE id = ? AND EXISTS (SELECT 1 FROM turns WHERE id = ?) \
             RETURNING {COLUMNS};\n\
             COMMIT;"
        );
        let at = to_ms(now());
        let query = sqlx::query(&sql)
            .bind(status.as_str())
            .bind(at)
            .bind(turn_id);
        let query = crate::history::bind_session_update!(query, update)?
            .bind(session_id)
            .bind(turn_id);
        let _write = self.write_guard().await;
        let mut conn = self.writes.acquire().await.map_err(db(ctx))?;
        let rows = match query.fetch_all(&mut *conn).await {
            Ok(rows) => rows,
            Err(err) => {
                super::writer::rollback(&mut conn).await;
                return Err(db(ctx)(err));
            }
        };
        drop(conn);
        match rows.first() {
            Some(row) => session_from_row(row),
            None => {
                let turn: Option<i64> = sqlx::query_scalar("SELECT 1 FROM turns WHERE id = ?")
                    .bind(turn_id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db(ctx))?;
                Err(StoreError::NotFound(match turn {
                    Some(_) => format!("session {session_id}"),
                    None => format!("turn {turn_id}"),
                }))
            }
        }
    }

    pub(super) async fn delete_session_impl(&self, id: &str) -> StoreResult<bool> {
        let _write = self.write_guard().await;
        // Messages, events, turns, … go with it (ON DELETE CASCADE).
        let done = sqlx::query("DELETE FROM sessions WHERE id = ?")
            .bind(id)
            .execute(&self.writes)
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
            "SELECT {COLUMNS} FROM sessions s WHERE s.updated_at < ? \
             AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id AND t.status IS NULL) \
             ORDER BY s.updated_at, s.id LIMIT ?"
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

/// The `SET` of a [`SessionUpdate`], its values bound by `bind_session_update!`.
const UPDATE_SESSION: &str = "UPDATE sessions SET \
    title = COALESCE(?, title), \
    status = COALESCE(?, status), \
    input_tokens = input_tokens + ?, \
    output_tokens = output_tokens + ?, \
    cache_read_tokens = cache_read_tokens + ?, \
    cache_write_tokens = cache_write_tokens + ?, \
    cost_usd = cost_usd + ?, \
    turns = turns + ?, \
    updated_at = ?";
