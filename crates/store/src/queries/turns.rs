//! [`TurnStore`](crate::TurnStore): turns run (status NULL) until finished;
//! `client_request_id` makes starting one idempotent per session. Starting
//! and ending a turn are each backend's own (`start_turn_impl`,
//! `finish_turn_with_session_impl`): SQLite does them in one round trip. So
//! are a leased turn's fenced writes (`…_fenced_impl`): PostgreSQL's check
//! the lease; SQLite has none.

use crate::dialect::sql;
use crate::records::TURN_COLUMNS;

pub(crate) const SESSION_EXISTS: &str = "SELECT CAST(1 AS BIGINT) FROM sessions WHERE id = $1";

sql!(
    /// `$1` turn, `$2` session, `$3` client request id, `$4` now.
    pub(crate) INSERT = "INSERT INTO turns \
     (id, session_id, status, client_request_id, started_at) VALUES ($1, $2, NULL, $3, $4) \
     ON CONFLICT (session_id, client_request_id) DO NOTHING RETURNING ", TURN_COLUMNS);

/// Marks session `$3` running (`$1`) at `$2`, when it starts a turn.
pub(crate) const MARK_RUNNING: &str =
    "UPDATE sessions SET status = $1, updated_at = $2 WHERE id = $3";

sql!(pub(crate) BY_REQUEST = "SELECT ", TURN_COLUMNS,
     " FROM turns WHERE session_id = $1 AND client_request_id = $2");

/// `$1` status, `$2` now, `$3` turn. The first finish wins.
pub(crate) const FINISH: &str =
    "UPDATE turns SET status = $1, finished_at = $2 WHERE id = $3 AND status IS NULL";

pub(crate) const TURN_EXISTS: &str = "SELECT CAST(1 AS BIGINT) FROM turns WHERE id = $1";

sql!(pub(crate) RUNNING = "SELECT ", TURN_COLUMNS,
     " FROM turns WHERE status IS NULL ORDER BY started_at, id");

macro_rules! turn_store {
    ($store:ty) => {
        const _: () = {
            use agentd_protocol::TurnStatus;

            use $crate::queries::turns as q;
            use $crate::records::{db, execute, fetch_all, fetch_optional, now, session_error};
            use $crate::records::{to_ms, turn};
            use $crate::{SessionRecord, SessionStatus, SessionUpdate, StoreError, StoreResult};
            use $crate::{TurnRecord, TurnStart};

            impl $store {
                /// Start a turn in a write transaction of its own: the
                /// session checked, the turn inserted (or the one with the
                /// same `client_request_id` read), the session marked running.
                pub(super) async fn start_turn_in_transaction(
                    &self,
                    session_id: &str,
                    turn_id: &str,
                    client_request_id: Option<&str>,
                ) -> StoreResult<TurnStart> {
                    let at = now();
                    let _write = self.write_guard().await;
                    let mut tx = self.begin_write().await.map_err(db("starting turn"))?;
                    let exists: Option<i64> = sqlx::query_scalar(q::SESSION_EXISTS)
                        .bind(session_id)
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(db("starting turn"))?;
                    if exists.is_none() {
                        return Err(StoreError::NotFound(format!("session {session_id}")));
                    }
                    // ON CONFLICT keeps this race-free against concurrent
                    // starts (other processes too): the loser waits for the
                    // winner to commit, then reads its turn.
                    let inserted = sqlx::query(q::INSERT)
                        .bind(turn_id)
                        .bind(session_id)
                        .bind(client_request_id)
                        .bind(to_ms(at))
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(session_error("starting turn", session_id))?;
                    let outcome = match inserted {
                        Some(row) => {
                            let query = sqlx::query(q::MARK_RUNNING)
                                .bind(SessionStatus::Running.as_str())
                                .bind(to_ms(at))
                                .bind(session_id);
                            execute(&mut *tx, query, "starting turn").await?;
                            TurnStart::Started(turn(&row)?)
                        }
                        None => {
                            let row = sqlx::query(q::BY_REQUEST)
                                .bind(session_id)
                                .bind(client_request_id)
                                .fetch_one(&mut *tx)
                                .await
                                .map_err(db("reading duplicate turn"))?;
                            TurnStart::Duplicate(turn(&row)?)
                        }
                    };
                    tx.commit().await.map_err(db("starting turn"))?;
                    Ok(outcome)
                }
            }

            #[async_trait::async_trait]
            impl $crate::TurnStore for $store {
                async fn start_turn(
                    &self,
                    session_id: &str,
                    turn_id: &str,
                    client_request_id: Option<&str>,
                ) -> StoreResult<TurnStart> {
                    self.start_turn_impl(session_id, turn_id, client_request_id)
                        .await
                }

                /// The first finish wins: a turn ends with exactly one
                /// status, so finishing an already finished turn changes
                /// nothing.
                async fn finish_turn(&self, turn_id: &str, status: TurnStatus) -> StoreResult<()> {
                    let _write = self.write_guard().await;
                    let query = sqlx::query(q::FINISH)
                        .bind(status.as_str())
                        .bind(to_ms(now()))
                        .bind(turn_id);
                    if execute(self.writer(), query, "finishing turn")
                        .await?
                        .rows_affected()
                        > 0
                    {
                        return Ok(());
                    }
                    let exists: Option<i64> = sqlx::query_scalar(q::TURN_EXISTS)
                        .bind(turn_id)
                        .fetch_optional(&self.pool)
                        .await
                        .map_err(db("finishing turn"))?;
                    match exists {
                        Some(_) => Ok(()),
                        None => Err(StoreError::NotFound(format!("turn {turn_id}"))),
                    }
                }

                async fn finish_turn_with_session(
                    &self,
                    turn_id: &str,
                    status: TurnStatus,
                    session_id: &str,
                    update: SessionUpdate,
                ) -> StoreResult<SessionRecord> {
                    self.finish_turn_with_session_impl(turn_id, status, session_id, update)
                        .await
                }

                async fn start_turn_fenced(
                    &self,
                    session_id: &str,
                    fence: &$crate::Fence,
                    client_request_id: Option<&str>,
                ) -> StoreResult<TurnStart> {
                    self.start_turn_fenced_impl(session_id, fence, client_request_id)
                        .await
                }

                async fn finish_turn_fenced(
                    &self,
                    session_id: &str,
                    fence: &$crate::Fence,
                    status: TurnStatus,
                ) -> StoreResult<()> {
                    self.finish_turn_fenced_impl(session_id, fence, status)
                        .await
                }

                async fn update_session_fenced(
                    &self,
                    session_id: &str,
                    fence: &$crate::Fence,
                    update: SessionUpdate,
                ) -> StoreResult<SessionRecord> {
                    self.update_session_fenced_impl(session_id, fence, update)
                        .await
                }

                /// Turns still marked running, oldest first.
                async fn running_turns(&self) -> StoreResult<Vec<TurnRecord>> {
                    let query = sqlx::query(q::RUNNING);
                    fetch_all(&self.pool, query, "reading running turns", turn).await
                }

                async fn find_turn(
                    &self,
                    session_id: &str,
                    client_request_id: &str,
                ) -> StoreResult<Option<TurnRecord>> {
                    let query = sqlx::query(q::BY_REQUEST)
                        .bind(session_id)
                        .bind(client_request_id);
                    fetch_optional(&self.pool, query, "reading turn", turn).await
                }
            }
        };
    };
}
pub(crate) use turn_store;
