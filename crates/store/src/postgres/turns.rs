//! Turns: running (status NULL) until finished; `client_request_id` makes
//! starting a turn idempotent per session.

use super::PostgresStore;
use super::util::{db, is_fk_violation, now, to_ms};
pub(super) use crate::records::turn as turn_from_row;
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

        let exists = sqlx::query(crate::history::SESSION_EXISTS)
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db("starting turn"))?;
        if exists.is_none() {
            return Err(StoreError::NotFound(format!("session {session_id}")));
        }

        // ON CONFLICT keeps this race-free against concurrent starts: the
        // loser waits for the winner to commit, then reads its turn.
        let sql = crate::history::insert_turn();
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
                let sql = crate::history::turn_by_request();
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
}
