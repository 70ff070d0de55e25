//! Sessions: create, read, list (cursor pagination), update totals, delete,
//! and the ones old enough for retention.

use agentd_protocol::Usage;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::history::bind_session_update;
use crate::records::{Columns, SESSION_COLUMNS as COLUMNS, db, now, session, to_ms};
use crate::sql::{Backend, Query};
use crate::{
    NewSession, SessionRecord, SessionStatus, SessionStore, SessionUpdate, StoreError, StoreResult,
};

/// The `SET` of a [`SessionUpdate`] with its values at `$first` to
/// `$first + 8`, bound in that order by `bind_session_update!`.
pub(crate) fn update_session_set(first: usize) -> String {
    let n = |k: usize| first + k;
    format!(
        "UPDATE sessions SET \
         title = COALESCE(${}, title), \
         status = COALESCE(${}, status), \
         input_tokens = input_tokens + ${}, \
         output_tokens = output_tokens + ${}, \
         cache_read_tokens = cache_read_tokens + ${}, \
         cache_write_tokens = cache_write_tokens + ${}, \
         cost_usd = cost_usd + ${}, \
         turns = turns + ${}, \
         updated_at = ${}",
        n(0),
        n(1),
        n(2),
        n(3),
        n(4),
        n(5),
        n(6),
        n(7),
        n(8)
    )
}

#[async_trait]
impl<B: Backend> SessionStore for B {
    async fn create_session(&self, new: NewSession) -> StoreResult<SessionRecord> {
        let at = now();
        let record = SessionRecord {
            id: new.id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
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
        let query = Query::new(
            "creating session",
            "INSERT INTO sessions (id, owner, title, workspace, model, profile, status, \
             created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
        )
        .bind(&record.id)
        .bind(&record.owner)
        .bind(&record.title)
        .bind(&record.workspace)
        .bind(&record.model)
        .bind(&record.profile)
        .bind(record.status.as_str())
        .bind(to_ms(at));
        match self.raw_execute(query).await {
            Ok(_) => Ok(record),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Err(StoreError::Database(
                format!("creating session: id {:?} already exists", record.id),
            )),
            Err(e) => Err(db("creating session")(e)),
        }
    }

    async fn get_session(&self, id: &str) -> StoreResult<Option<SessionRecord>> {
        let sql = format!("SELECT {COLUMNS} FROM sessions WHERE id = $1");
        let query = Query::new("reading session", sql).bind(id);
        self.fetch_optional(query)
            .await?
            .as_ref()
            .map(session)
            .transpose()
    }

    /// A `before` cursor that is not one of the owner's sessions is
    /// `NotFound` (it may have been deleted meanwhile), so a caller can tell
    /// "bad cursor" from "no more pages".
    async fn list_sessions(
        &self,
        owner: &str,
        before: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<SessionRecord>> {
        let query = match before {
            None => Query::new(
                "listing sessions",
                format!(
                    "SELECT {COLUMNS} FROM sessions WHERE owner = $1 \
                     ORDER BY created_at DESC, id DESC LIMIT $2"
                ),
            )
            .bind(owner)
            .bind(i64::from(limit)),
            Some(cursor) => {
                let at = Query::new(
                    "reading session cursor",
                    "SELECT created_at FROM sessions WHERE id = $1 AND owner = $2",
                )
                .bind(cursor)
                .bind(owner);
                let Some(row) = self.fetch_optional(at).await? else {
                    return Err(StoreError::NotFound(format!("session {cursor}")));
                };
                Query::new(
                    "listing sessions",
                    format!(
                        "SELECT {COLUMNS} FROM sessions WHERE owner = $1 \
                         AND (created_at, id) < ($2, $3) \
                         ORDER BY created_at DESC, id DESC LIMIT $4"
                    ),
                )
                .bind(owner)
                .bind(row.int("created_at")?)
                .bind(cursor)
                .bind(i64::from(limit))
            }
        };
        let rows = self.fetch_all(query).await?;
        rows.iter().map(session).collect()
    }

    async fn update_session(&self, id: &str, update: SessionUpdate) -> StoreResult<SessionRecord> {
        let sql = format!(
            "{} WHERE id = $10 RETURNING {COLUMNS}",
            update_session_set(1)
        );
        let query = bind_session_update!(Query::new("updating session", sql), update)?.bind(id);
        match self.write_fetch_all(query).await?.first() {
            Some(row) => session(row),
            None => Err(StoreError::NotFound(format!("session {id}"))),
        }
    }

    async fn delete_session(&self, id: &str) -> StoreResult<bool> {
        // Messages, events, turns, … go with it (ON DELETE CASCADE).
        let query = Query::new("deleting session", "DELETE FROM sessions WHERE id = $1").bind(id);
        Ok(self.execute(query).await? > 0)
    }

    async fn sessions_updated_before(
        &self,
        cutoff: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<SessionRecord>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM sessions s WHERE s.updated_at < $1 \
             AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id AND t.status IS NULL) \
             ORDER BY s.updated_at, s.id LIMIT $2"
        );
        let query = Query::new("listing sessions by age", sql)
            .bind(to_ms(cutoff))
            .bind(i64::from(limit));
        let rows = self.fetch_all(query).await?;
        rows.iter().map(session).collect()
    }

    async fn count_sessions(&self) -> StoreResult<u64> {
        let query = Query::new("counting sessions", "SELECT COUNT(*) AS n FROM sessions");
        self.fetch_one(query).await?.count("n")
    }
}
