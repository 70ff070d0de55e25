//! A leased turn's writes besides its appends (those are in `events` and
//! `messages`): its row started and finished, its session's status and
//! totals, its compaction. Each is one statement that first locks the turn's lease row
//! `FOR SHARE` (before the session's or the turn's row, the order every
//! fenced write keeps) and writes only while that row names the fence's
//! node and turn. A takeover (`FOR UPDATE SKIP LOCKED`) and these never
//! overlap; after one they write nothing and say `LeaseLost`.

use agentd_protocol::TurnStatus;

use super::PostgresStore;
use crate::dialect::sql;
use crate::queries::sessions::{UPDATE_SET, bind_session_update};
use crate::queries::transcript::bind_compaction;
use crate::queries::turns::BY_REQUEST;
use crate::records::{COMPACTION_COLUMNS, SESSION_COLUMNS, TURN_COLUMNS, db, fetch_optional};
use crate::records::{insert_error, now, session, session_error, to_ms, turn};
use crate::{
    CompactionRecord, Fence, SessionRecord, SessionStatus, SessionUpdate, StoreError, StoreResult,
    TurnStart,
};

/// Node `$3` holds the lease of turn `$2` of session `$1`: its row, locked.
const LEASE: &str = "SELECT 1 FROM turn_leases \
     WHERE session_id = $1 AND turn_id = $2 AND node_id = $3 FOR SHARE";

sql!(
    /// [`LEASE`], then turn `$2`'s row (`$4` client request id, `$5` now)
    /// and its session marked running (`$6`). No row back: the lease is not
    /// held, or the request id names another turn.
    START = "WITH lease AS (", LEASE, "), \
     t AS (INSERT INTO turns (id, session_id, status, client_request_id, started_at) \
       SELECT $2, $1, NULL, $4, $5 FROM lease \
       ON CONFLICT (session_id, client_request_id) DO NOTHING RETURNING ", TURN_COLUMNS, "), \
     s AS (UPDATE sessions SET status = $6, updated_at = $5 \
       WHERE id = $1 AND EXISTS (SELECT 1 FROM t)) \
     SELECT ", TURN_COLUMNS, " FROM t"
);

sql!(
    /// [`LEASE`], then turn `$2` finished (`$4` status, `$5` now; the first
    /// finish wins): whether the lease was held, and the turn exists.
    FINISH = "WITH lease AS (", LEASE, "), \
     u AS (UPDATE turns SET status = $4, finished_at = $5 \
       WHERE id = $2 AND status IS NULL AND EXISTS (SELECT 1 FROM lease)) \
     SELECT EXISTS (SELECT 1 FROM lease), EXISTS (SELECT 1 FROM turns WHERE id = $2)"
);

sql!(
    /// The update (`$1`–`$15`) of session `$16` while node `$18` holds the
    /// lease of its turn `$17` (that row locked first).
    UPDATE_SESSION = UPDATE_SET, " WHERE id = $16 AND EXISTS (SELECT 1 FROM turn_leases \
       WHERE session_id = $16 AND turn_id = $17 AND node_id = $18 FOR SHARE) \
     RETURNING ", SESSION_COLUMNS
);

sql!(
    /// The compaction (`$1`–`$10`, as `INSERT_COMPACTION`'s) of turn `$11`
    /// while node `$12` holds its lease: no row inserted otherwise.
    COMPACTION = "INSERT INTO compactions (", COMPACTION_COLUMNS, ") \
     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 WHERE EXISTS (SELECT 1 FROM turn_leases \
       WHERE session_id = $2 AND turn_id = $11 AND node_id = $12 FOR SHARE)"
);

impl PostgresStore {
    pub(super) async fn add_compaction_fenced_impl(
        &self,
        r: &CompactionRecord,
        fence: &Fence,
    ) -> StoreResult<()> {
        let what = "storing a compaction";
        let inserted = bind_compaction!(sqlx::query(COMPACTION), r)?
            .bind(&fence.turn_id)
            .bind(&fence.node_id)
            .execute(&self.pool)
            .await
            .map_err(insert_error(what, &r.session_id, &r.id))?;
        match inserted.rows_affected() {
            0 => Err(self.refused(&r.session_id, fence, what).await),
            _ => Ok(()),
        }
    }

    pub(super) async fn start_turn_fenced_impl(
        &self,
        session_id: &str,
        fence: &Fence,
        client_request_id: Option<&str>,
    ) -> StoreResult<TurnStart> {
        let what = "starting turn";
        let started = sqlx::query(START)
            .bind(session_id)
            .bind(&fence.turn_id)
            .bind(&fence.node_id)
            .bind(client_request_id)
            .bind(to_ms(now()))
            .bind(SessionStatus::Running.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(session_error(what, session_id))?;
        if let Some(row) = started {
            return Ok(TurnStart::Started(turn(&row)?));
        }
        // Nothing inserted: the request id's turn was there first, or the
        // lease is not this node's.
        if let Some(request) = client_request_id {
            let query = sqlx::query(BY_REQUEST).bind(session_id).bind(request);
            if let Some(earlier) = fetch_optional(&self.pool, query, what, turn).await? {
                return Ok(TurnStart::Duplicate(earlier));
            }
        }
        Err(self.refused(session_id, fence, what).await)
    }

    pub(super) async fn finish_turn_fenced_impl(
        &self,
        session_id: &str,
        fence: &Fence,
        status: TurnStatus,
    ) -> StoreResult<()> {
        let what = "finishing turn";
        let (held, known): (bool, bool) = sqlx::query_as(FINISH)
            .bind(session_id)
            .bind(&fence.turn_id)
            .bind(&fence.node_id)
            .bind(status.as_str())
            .bind(to_ms(now()))
            .fetch_one(&self.pool)
            .await
            .map_err(db(what))?;
        match (held, known) {
            (true, true) => Ok(()),
            (true, false) => Err(StoreError::NotFound(format!("turn {}", fence.turn_id))),
            (false, _) => Err(self.refused(session_id, fence, what).await),
        }
    }

    pub(super) async fn update_session_fenced_impl(
        &self,
        session_id: &str,
        fence: &Fence,
        update: SessionUpdate,
    ) -> StoreResult<SessionRecord> {
        let what = "updating session";
        let query = bind_session_update!(sqlx::query(UPDATE_SESSION), update)?
            .bind(session_id)
            .bind(&fence.turn_id)
            .bind(&fence.node_id);
        match fetch_optional(&self.pool, query, what, session).await? {
            Some(updated) => Ok(updated),
            None => Err(self.refused(session_id, fence, what).await),
        }
    }

    /// Why a fenced write of `session_id` wrote nothing: the lease is not
    /// `fence`'s node's any more, or the session is gone.
    pub(super) async fn refused(&self, session_id: &str, fence: &Fence, what: &str) -> StoreError {
        let exists = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1)")
            .bind(session_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db(what));
        match exists {
            Ok(true) => fence.lost(session_id),
            Ok(false) => StoreError::NotFound(format!("session {session_id}")),
            Err(err) => err,
        }
    }
}
