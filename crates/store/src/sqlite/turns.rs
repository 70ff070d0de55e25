//! Turns: running (status NULL) until finished; `client_request_id` makes
//! starting a turn idempotent per session.

use super::SqliteStore;
use super::util::{db, now, to_ms};
pub(super) use crate::records::{TURN_COLUMNS as COLUMNS, turn as turn_from_row};
use crate::{SessionStatus, StoreError, StoreResult, TurnStart};

const RUNNING: &str = SessionStatus::Running.as_str();

impl SqliteStore {
    pub(super) async fn start_turn_impl(
        &self,
        session_id: &str,
        turn_id: &str,
        client_request_id: Option<&str>,
    ) -> StoreResult<TurnStart> {
        let at = now();
        let _write = self.write_guard().await;
        // Fast path, one round trip: a new turn of an existing session. No
        // row back means no session or a repeated `client_request_id`; the
        // transaction below tells which.
        let fast = format!(
            "BEGIN IMMEDIATE;\n\
             INSERT INTO turns (id, session_id, status, client_request_id, started_at) \
             SELECT ?, id, NULL, ?, ? FROM sessions WHERE id = ? \
             ON CONFLICT (session_id, client_request_id) DO NOTHING \
             RETURNING {COLUMNS};\n\
             UPDATE sessions SET status = ?, updated_at = ? WHERE id = ? AND changes() = 1;\n\
             COMMIT;"
        );
        let mut conn = self.writes.acquire().await.map_err(db("starting turn"))?;
        let rows = sqlx::query(&fast)
            .bind(turn_id)
            .bind(client_request_id)
            .bind(to_ms(at))
            .bind(session_id)
            .bind(RUNNING)
            .bind(to_ms(at))
            .bind(session_id)
            .fetch_all(&mut *conn)
            .await;
        match rows {
            Ok(rows) if !rows.is_empty() => {
                return Ok(TurnStart::Started(turn_from_row(&rows[0])?));
            }
            Ok(_) => {}
            Err(e) => {
                super::writer::rollback(&mut conn).await;
                return Err(db("starting turn")(e));
            }
        }
        drop(conn);
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db("starting turn"))?;

        let exists = sqlx::query(&crate::history::SESSION_EXISTS.replace('$', "?"))
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db("starting turn"))?;
        if exists.is_none() {
            return Err(StoreError::NotFound(format!("session {session_id}")));
        }

        // ON CONFLICT keeps this race-free even against another process
        // writing the same file; the lock above only covers this one.
        let sql = crate::history::insert_turn().replace('$', "?");
        let inserted = sqlx::query(&sql)
            .bind(turn_id)
            .bind(session_id)
            .bind(client_request_id)
            .bind(to_ms(at))
            .fetch_optional(&mut *tx)
            .await
            .map_err(db("starting turn"))?;
        let outcome = match inserted {
            Some(row) => {
                sqlx::query(crate::history::MARK_RUNNING)
                    .bind(RUNNING)
                    .bind(to_ms(at))
                    .bind(session_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(db("starting turn"))?;
                TurnStart::Started(turn_from_row(&row)?)
            }
            None => {
                let sql = crate::history::turn_by_request().replace('$', "?");
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
