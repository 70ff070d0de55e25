//! [`SessionStore`](crate::SessionStore): sessions' rows, totals and
//! retention.

use crate::dialect::sql;
use crate::records::SESSION_COLUMNS;

pub(crate) const CREATE: &str = "INSERT INTO sessions (id, owner, title, workspace, model, \
     profile, status, created_at, updated_at, existing_workspace) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";

sql!(pub(crate) GET = "SELECT ", SESSION_COLUMNS, " FROM sessions WHERE id = $1");

sql!(pub(crate) LIST = "SELECT ", SESSION_COLUMNS, " FROM sessions WHERE owner = $1 \
     ORDER BY created_at DESC, id DESC LIMIT $2");

pub(crate) const CURSOR: &str = "SELECT created_at FROM sessions WHERE id = $1 AND owner = $2";

sql!(pub(crate) LIST_BEFORE = "SELECT ", SESSION_COLUMNS, " FROM sessions \
     WHERE owner = $1 AND (created_at, id) < ($2, $3) \
     ORDER BY created_at DESC, id DESC LIMIT $4");

/// The `SET` of a [`SessionUpdate`](crate::SessionUpdate), its values `$1` to
/// `$15` bound by `bind_session_update!`: one statement, so the fields of a
/// `PATCH` change together or not at all. `updated_at` (`$9`) stays for an
/// update of only pin, archive or tags: filing a session away is no
/// activity (the list's age, retention).
pub(crate) const UPDATE_SET: &str = "UPDATE sessions SET \
    title = COALESCE($1, title), \
    model = COALESCE($10, model), \
    thinking_budget = CASE WHEN $11 THEN $12 ELSE thinking_budget END, \
    status = COALESCE($2, status), \
    input_tokens = input_tokens + $3, \
    output_tokens = output_tokens + $4, \
    cache_read_tokens = cache_read_tokens + $5, \
    cache_write_tokens = cache_write_tokens + $6, \
    cost_usd = cost_usd + $7, \
    turns = turns + $8, \
    pinned = COALESCE($13, pinned), \
    archived = COALESCE($14, archived), \
    tags = COALESCE($15, tags), \
    updated_at = COALESCE($9, updated_at)";

sql!(pub(crate) UPDATE = UPDATE_SET, " WHERE id = $16 RETURNING ", SESSION_COLUMNS);

/// Messages, events, turns, … go with it (ON DELETE CASCADE).
pub(crate) const DELETE: &str = "DELETE FROM sessions WHERE id = $1";

sql!(pub(crate) UPDATED_BEFORE = "SELECT ", SESSION_COLUMNS, " FROM sessions s \
     WHERE s.updated_at < $1 AND s.pinned = FALSE \
     AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id AND t.status IS NULL) \
     ORDER BY s.updated_at, s.id LIMIT $2");

pub(crate) const COUNT: &str = "SELECT COUNT(*) AS n FROM sessions";

/// Binds a [`crate::SessionUpdate`]'s fifteen values, `$1` to `$15` of
/// [`UPDATE_SET`] (an `Err` for a count beyond `i64`).
macro_rules! bind_session_update {
    ($query:expr, $update:expr) => {{
        let update: $crate::SessionUpdate = $update;
        let filing_only =
            (update.pinned.is_some() || update.archived.is_some() || update.tags.is_some())
                && update.title.is_none()
                && update.status.is_none()
                && update.model.is_none()
                && update.thinking_budget.is_none()
                && update.add_usage.is_none()
                && update.add_cost_usd.is_none()
                && update.add_turns.is_none();
        let usage = update.add_usage.unwrap_or_default();
        let to_i64 = $crate::records::to_i64;
        (|| {
            Ok::<_, $crate::StoreError>(
                $query
                    .bind(update.title)
                    .bind(update.status.map($crate::SessionStatus::as_str))
                    .bind(to_i64(usage.input_tokens, "input_tokens")?)
                    .bind(to_i64(usage.output_tokens, "output_tokens")?)
                    .bind(to_i64(usage.cache_read_tokens, "cache_read_tokens")?)
                    .bind(to_i64(usage.cache_write_tokens, "cache_write_tokens")?)
                    .bind(update.add_cost_usd.unwrap_or(0.0))
                    .bind(to_i64(update.add_turns.unwrap_or(0), "turns")?)
                    .bind((!filing_only).then(|| $crate::records::to_ms($crate::records::now())))
                    .bind(update.model)
                    .bind(update.thinking_budget.is_some())
                    .bind(update.thinking_budget.flatten().map(i64::from))
                    .bind(update.pinned)
                    .bind(update.archived)
                    .bind(
                        update
                            .tags
                            .as_ref()
                            .map(|tags| $crate::records::to_json(tags, "session tags"))
                            .transpose()?,
                    ),
            )
        })()
    }};
}
pub(crate) use bind_session_update;

macro_rules! session_store {
    ($store:ty) => {
        const _: () = {
            use agentd_protocol::Usage;
            use chrono::{DateTime, Utc};

            use $crate::queries::sessions as q;
            use $crate::records::{Columns, db, execute, fetch_all, fetch_optional, now, session};
            use $crate::records::{to_ms, unique_error};
            use $crate::{NewSession, SessionRecord, SessionStatus, SessionUpdate};
            use $crate::{StoreError, StoreResult};

            #[async_trait::async_trait]
            impl $crate::SessionStore for $store {
                async fn create_session(&self, new: NewSession) -> StoreResult<SessionRecord> {
                    let id = new.id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
                    let at = now();
                    let record = SessionRecord {
                        id,
                        owner: new.owner,
                        title: new.title,
                        workspace: new.workspace,
                        existing_workspace: new.existing_workspace,
                        model: new.model,
                        profile: new.profile,
                        thinking_budget: None,
                        status: SessionStatus::Idle,
                        created_at: at,
                        updated_at: at,
                        usage: Usage::default(),
                        cost_usd: 0.0,
                        turns: 0,
                        last_seq: 0,
                        pinned: false,
                        archived: false,
                        tags: Vec::new(),
                    };
                    let _write = self.write_guard().await;
                    sqlx::query(q::CREATE)
                        .bind(&record.id)
                        .bind(&record.owner)
                        .bind(&record.title)
                        .bind(&record.workspace)
                        .bind(&record.model)
                        .bind(&record.profile)
                        .bind(record.status.as_str())
                        .bind(to_ms(at))
                        .bind(to_ms(at))
                        .bind(record.existing_workspace)
                        .execute(self.writer())
                        .await
                        .map_err(unique_error("creating session", || {
                            format!("id {:?} already exists", record.id)
                        }))?;
                    Ok(record)
                }

                async fn get_session(&self, id: &str) -> StoreResult<Option<SessionRecord>> {
                    let context = "reading session";
                    if let Some(rows) = self.read_here(q::GET, &[&id], context, |row| session(row))
                    {
                        return rows.map(|rows| rows.into_iter().next());
                    }
                    let query = sqlx::query(q::GET).bind(id);
                    fetch_optional(&self.pool, query, context, session).await
                }

                /// A `before` cursor that is not one of the owner's sessions
                /// is `NotFound` (it may have been deleted meanwhile), so a
                /// caller can tell "bad cursor" from "no more pages".
                async fn list_sessions(
                    &self,
                    owner: &str,
                    before: Option<&str>,
                    limit: u32,
                ) -> StoreResult<Vec<SessionRecord>> {
                    let query = match before {
                        None => sqlx::query(q::LIST).bind(owner).bind(i64::from(limit)),
                        Some(cursor) => {
                            let cursor_at: Option<i64> = sqlx::query_scalar(q::CURSOR)
                                .bind(cursor)
                                .bind(owner)
                                .fetch_optional(&self.pool)
                                .await
                                .map_err(db("reading session cursor"))?;
                            let Some(cursor_at) = cursor_at else {
                                return Err(StoreError::NotFound(format!("session {cursor}")));
                            };
                            sqlx::query(q::LIST_BEFORE)
                                .bind(owner)
                                .bind(cursor_at)
                                .bind(cursor)
                                .bind(i64::from(limit))
                        }
                    };
                    fetch_all(&self.pool, query, "listing sessions", session).await
                }

                async fn find_sessions(
                    &self,
                    filter: &$crate::SessionFilter,
                ) -> StoreResult<Vec<$crate::SessionHit>> {
                    self.find_sessions_impl(filter).await
                }

                async fn index_pending_search(&self, limit: u32) -> StoreResult<u64> {
                    self.index_pending_search_impl(limit).await
                }

                async fn update_session(
                    &self,
                    id: &str,
                    update: SessionUpdate,
                ) -> StoreResult<SessionRecord> {
                    let query = q::bind_session_update!(sqlx::query(q::UPDATE), update)?.bind(id);
                    let _write = self.write_guard().await;
                    fetch_optional(self.writer(), query, "updating session", session)
                        .await?
                        .ok_or_else(|| StoreError::NotFound(format!("session {id}")))
                }

                async fn delete_session(&self, id: &str) -> StoreResult<bool> {
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::DELETE).bind(id);
                    let done = execute(self.writer(), query, "deleting session").await?;
                    Ok(done.rows_affected() > 0)
                }

                async fn sessions_updated_before(
                    &self,
                    cutoff: DateTime<Utc>,
                    limit: u32,
                ) -> StoreResult<Vec<SessionRecord>> {
                    let query = sqlx::query(q::UPDATED_BEFORE)
                        .bind(to_ms(cutoff))
                        .bind(i64::from(limit));
                    fetch_all(&self.pool, query, "listing sessions by age", session).await
                }

                async fn count_sessions(&self) -> StoreResult<u64> {
                    let row = sqlx::query(q::COUNT)
                        .fetch_one(&self.pool)
                        .await
                        .map_err(db("counting sessions"))?;
                    row.count("n")
                }
            }
        };
    };
}
pub(crate) use session_store;
