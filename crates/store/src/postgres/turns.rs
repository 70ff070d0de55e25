//! Turns: running (status NULL) until finished; `client_request_id` makes
//! starting a turn idempotent per session.

use agentd_protocol::TurnStatus;

use super::PostgresStore;
use super::util::{db, is_fk_violation, now, to_ms};
pub(super) use crate::records::{TURN_COLUMNS as COLUMNS, turn as turn_from_row};
use crate::{SessionStatus, StoreError, StoreResult, TurnStart};

impl PostgresStore {
    pub(super) async fn start_turn_impl(
        &self,
        session_id: &str,
        turn_id: &str,
        client_request_id: Option<&str>,
    ) -> StoreResult<TurnStart> {
        let at = now();
        let mut tx = self.pool.begin().await.map_err(db("starting turn"))?;

        let exists: Option<i64> =
            sqlx::query_scalar("SELECT 1::bigint FROM sessions WHERE id = $1")
                .bind(session_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db("starting turn"))?;
        if exists.is_none() {
            return Err(StoreError::NotFound(format!("session {session_id}")));
        }

        // ON CONFLICT keeps this race-free against concurrent starts: the
        // loser waits for the winner to commit, then reads its turn.
        let sql = format!(
            "INSERT INTO turns (id, session_id, status, client_request_id, started_at) \
             VALUES ($1, $2, NULL, $3, $4) \
             ON CONFLICT (session_id, client_request_id) DO NOTHING \
             RETURNING {COLUMNS}"
        );
        let inserted = sqlx::query(&sql)
            .bind(turn_id)
            .bind(session_id)
            .bind(client_request_id)
            .bind(to_ms(at))
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| {
                // The session was deleted since we looked.
                if is_fk_violation(&e) {
                    StoreError::NotFound(format!("session {session_id}"))
                } else {
                    db("starting turn")(e)
                }
            })?;
        let outcome = match inserted {
            Some(row) => {
                sqlx::query(crate::history::MARK_RUNNING)
                    .bind(SessionStatus::Running.as_str())
                    .bind(to_ms(at))
                    .bind(session_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(db("starting turn"))?;
                TurnStart::Started(turn_from_row(&row)?)
            }
            None => {
                let sql = format!(
                    "SELECT {COLUMNS} FROM turns WHERE session_id = $1 AND client_request_id = $2"
                );
                let row = sqlx::query(&sql)
                    .bind(session_id)
                    .bind(client_request_id)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db("reading duplicate turn"))?;
                TurnStart::Duplicate(turn_from_row(&row)?)
            }
        };
        tx.commit().await.map_err(db("starting turn"))?;
        Ok(outcome)
    }

    /// The first finish wins: a turn ends with exactly one status, so
    /// finishing an already finished turn changes nothing.
    pub(super) async fn finish_turn_impl(
        &self,
        turn_id: &str,
        status: TurnStatus,
    ) -> StoreResult<()> {
        let done = sqlx::query(
            "UPDATE turns SET status = $1, finished_at = $2 WHERE id = $3 AND status IS NULL",
        )
        .bind(status.as_str())
        .bind(to_ms(now()))
        .bind(turn_id)
        .execute(&self.pool)
        .await
        .map_err(db("finishing turn"))?;
        if done.rows_affected() > 0 {
            return Ok(());
        }
        let exists: Option<i64> = sqlx::query_scalar("SELECT 1::bigint FROM turns WHERE id = $1")
            .bind(turn_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("finishing turn"))?;
        match exists {
            Some(_) => Ok(()),
            None => Err(StoreError::NotFound(format!("turn {turn_id}"))),
        }
    }
}
