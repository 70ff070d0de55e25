//! A turn's end on SQLite: its status and its session's totals in one
//! round trip (several statements, one transaction).

use agentd_protocol::TurnStatus;

use super::SqliteStore;
use super::util::{db, now, to_ms};
use crate::queries::update_session_set;
use crate::records::{SESSION_COLUMNS as COLUMNS, session as session_from_row};
use crate::{SessionRecord, SessionUpdate, StoreError, StoreResult};

impl SqliteStore {
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
             UPDATE turns SET status = ?1, finished_at = ?2 WHERE id = ?3 AND status IS NULL;\n\
             {} WHERE id = ?13 AND EXISTS (SELECT 1 FROM turns WHERE id = ?14) \
             RETURNING {COLUMNS};\n\
             COMMIT;",
            update_session_set(4).replace('$', "?")
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
}
