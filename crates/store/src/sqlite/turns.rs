//! Starting and ending a turn in one round trip each: SQLite runs the
//! statements of a transaction sent together, with `changes()` telling the
//! second statement whether the first wrote.

use agentd_protocol::TurnStatus;

use super::SqliteStore;
use super::writer::run_script;
use crate::dialect::sql;
use crate::prelude::*;
use crate::queries::sessions::{UPDATE_SET, bind_session_update};
use crate::queries::turns::TURN_EXISTS;
use crate::records::{SESSION_COLUMNS, TURN_COLUMNS, db, now, session, to_ms, turn};
use crate::{
    Fence, SessionRecord, SessionStatus, SessionUpdate, StoreError, StoreResult, TurnStart,
};

sql!(
    /// `$1` turn, `$2` client request id, `$3` now, `$4` session, `$5` running.
    /// No row back means no session or a repeated `client_request_id`.
    START_TURN = "BEGIN IMMEDIATE;\n\
     INSERT INTO turns (id, session_id, status, client_request_id, started_at) \
     SELECT $1, id, NULL, $2, $3 FROM sessions WHERE id = $4 \
     ON CONFLICT (session_id, client_request_id) DO NOTHING \
     RETURNING ", TURN_COLUMNS, ";\n\
     UPDATE sessions SET status = $5, updated_at = $3 WHERE id = $4 AND changes() = 1;\n\
     COMMIT;");

sql!(
    /// `$1`–`$15` the update, `$16` status, `$17` now, `$18` turn, `$19` session:
    /// the turn's status, then the session's totals if the turn exists.
    FINISH_TURN = "BEGIN IMMEDIATE;\n\
     UPDATE turns SET status = $16, finished_at = $17 WHERE id = $18 AND status IS NULL;\n",
     UPDATE_SET, " WHERE id = $19 AND EXISTS (SELECT 1 FROM turns WHERE id = $18) \
     RETURNING ", SESSION_COLUMNS, ";\n\
     COMMIT;");

impl SqliteStore {
    /// Fast path, one round trip: a new turn of an existing session. Else
    /// the transaction of both backends tells which it is.
    pub(super) async fn start_turn_impl(
        &self,
        session_id: &str,
        turn_id: &str,
        client_request_id: Option<&str>,
    ) -> StoreResult<TurnStart> {
        let at = to_ms(now());
        {
            let _write = self.write_guard().await;
            let query = sqlx::query(START_TURN)
                .bind(turn_id)
                .bind(client_request_id)
                .bind(at)
                .bind(session_id)
                .bind(SessionStatus::Running.as_str());
            let rows = run_script(&self.writes, query)
                .await
                .map_err(db("starting turn"))?;
            if let Some(row) = rows.first() {
                return Ok(TurnStart::Started(turn(row)?));
            }
        }
        self.start_turn_in_transaction(session_id, turn_id, client_request_id)
            .await
    }

    pub(super) async fn finish_turn_with_session_impl(
        &self,
        turn_id: &str,
        status: TurnStatus,
        session_id: &str,
        update: SessionUpdate,
    ) -> StoreResult<SessionRecord> {
        let ctx = "finishing turn";
        let query = bind_session_update!(sqlx::query(FINISH_TURN), update)?
            .bind(status.as_str())
            .bind(to_ms(now()))
            .bind(turn_id)
            .bind(session_id);
        let rows = {
            let _write = self.write_guard().await;
            run_script(&self.writes, query).await.map_err(db(ctx))?
        };
        match rows.first() {
            Some(row) => session(row),
            None => {
                let turn: Option<i64> = sqlx::query_scalar(TURN_EXISTS)
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

    /// A single node has no leases to fence by (see [`Fence`]): the
    /// unfenced writes, here and below.
    pub(super) async fn start_turn_fenced_impl(
        &self,
        session_id: &str,
        fence: &Fence,
        client_request_id: Option<&str>,
    ) -> StoreResult<TurnStart> {
        self.start_turn_impl(session_id, &fence.turn_id, client_request_id)
            .await
    }

    pub(super) async fn finish_turn_fenced_impl(
        &self,
        _session_id: &str,
        fence: &Fence,
        status: TurnStatus,
    ) -> StoreResult<()> {
        self.finish_turn(&fence.turn_id, status).await
    }

    pub(super) async fn update_session_fenced_impl(
        &self,
        session_id: &str,
        _fence: &Fence,
        update: SessionUpdate,
    ) -> StoreResult<SessionRecord> {
        self.update_session(session_id, update).await
    }
}
