//! [`TransferStore`](crate::TransferStore): moving a whole session between
//! stores: export (one consistent snapshot, `begin_read()` of each backend)
//! and import (one write transaction, everything kept as it was).

use crate::dialect::sql;
use crate::queries::transcript::{INSERT_EVENTS, INSERT_MESSAGES};
use crate::records::{PENDING_COLUMNS, SESSION_COLUMNS, TURN_COLUMNS};

pub(crate) const EVENTS: &str =
    "SELECT seq, data, created_at FROM events WHERE session_id = $1 ORDER BY seq";

sql!(pub(crate) TURNS = "SELECT ", TURN_COLUMNS,
     " FROM turns WHERE session_id = $1 ORDER BY started_at, id");

sql!(pub(crate) PENDING = "SELECT ", PENDING_COLUMNS,
     " FROM pending_requests WHERE session_id = $1 ORDER BY created_at, id");

sql!(pub(crate) INSERT_SESSION = "INSERT INTO sessions (", SESSION_COLUMNS, ") \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, \
     $19, $20, $21)");

sql!(pub(crate) INSERT_MESSAGE = INSERT_MESSAGES, "VALUES ($1, $2, $3, $4, $5, $6, $7)");

sql!(pub(crate) INSERT_EVENT = INSERT_EVENTS, "VALUES ($1, $2, $3, $4, $5)");

sql!(pub(crate) INSERT_TURN = "INSERT INTO turns (", TURN_COLUMNS,
     ") VALUES ($1, $2, $3, $4, $5, $6)");

sql!(pub(crate) INSERT_PENDING = "INSERT INTO pending_requests (", PENDING_COLUMNS,
     ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)");

macro_rules! transfer_store {
    ($store:ty, $db:ty) => {
        const _: () = {
            use sqlx::Transaction;

            use $crate::queries::transfer as q;
            use $crate::queries::{pending, sessions, transcript};
            use $crate::records::{
                self, db, envelope, execute, fetch_all, fetch_optional, message,
            };
            use $crate::records::{now, role_str, to_i64, to_json, to_ms, unique_error};
            use $crate::{SessionExport, StoreResult};

            const CTX: &str = "importing session";

            /// The session's own row, totals and all; an id already here
            /// is an error naming it.
            async fn import_row(
                tx: &mut Transaction<'static, $db>,
                s: &$crate::SessionRecord,
            ) -> StoreResult<()> {
                sqlx::query(q::INSERT_SESSION)
                    .bind(&s.id)
                    .bind(&s.owner)
                    .bind(&s.title)
                    .bind(&s.workspace)
                    .bind(&s.model)
                    .bind(&s.profile)
                    .bind(s.status.as_str())
                    .bind(to_ms(s.created_at))
                    .bind(to_ms(s.updated_at))
                    .bind(to_i64(s.usage.input_tokens, "input_tokens")?)
                    .bind(to_i64(s.usage.output_tokens, "output_tokens")?)
                    .bind(to_i64(s.usage.cache_read_tokens, "cache_read_tokens")?)
                    .bind(to_i64(s.usage.cache_write_tokens, "cache_write_tokens")?)
                    .bind(s.cost_usd)
                    .bind(to_i64(s.turns, "turns")?)
                    .bind(to_i64(s.last_seq, "last_seq")?)
                    .bind(s.existing_workspace)
                    .bind(s.thinking_budget.map(i64::from))
                    .bind(s.pinned)
                    .bind(s.archived)
                    .bind(to_json(&s.tags, "session tags")?)
                    .execute(&mut **tx)
                    .await
                    .map_err(unique_error(CTX, || {
                        format!("session {:?} already exists", s.id)
                    }))?;
                Ok(())
            }

            /// The transcript and the event log.
            async fn import_log(
                tx: &mut Transaction<'static, $db>,
                export: &SessionExport,
            ) -> StoreResult<()> {
                let id = &export.session.id;
                for m in &export.messages {
                    let query = sqlx::query(q::INSERT_MESSAGE)
                        .bind(&m.id)
                        .bind(id)
                        .bind(&m.turn_id)
                        .bind(to_i64(m.position, "position")?)
                        .bind(role_str(m.message.role))
                        .bind(to_json(&m.message, "message")?)
                        .bind(to_ms(m.created_at));
                    execute(&mut **tx, query, CTX).await?;
                }
                for e in &export.events {
                    let query = sqlx::query(q::INSERT_EVENT)
                        .bind(id)
                        .bind(to_i64(e.seq, "seq")?)
                        .bind(e.event.type_name())
                        .bind(to_json(&e.event, "event")?)
                        .bind(to_ms(e.at));
                    execute(&mut **tx, query, CTX).await?;
                }
                Ok(())
            }

            /// Turns, pending requests and the session's rules.
            async fn import_state(
                tx: &mut Transaction<'static, $db>,
                export: &SessionExport,
            ) -> StoreResult<()> {
                let id = &export.session.id;
                for t in &export.turns {
                    let query = sqlx::query(q::INSERT_TURN)
                        .bind(&t.id)
                        .bind(id)
                        .bind(t.status.map(|st| st.as_str()))
                        .bind(&t.client_request_id)
                        .bind(to_ms(t.started_at))
                        .bind(t.finished_at.map(to_ms));
                    execute(&mut **tx, query, CTX).await?;
                }
                for p in &export.pending {
                    let query = sqlx::query(q::INSERT_PENDING)
                        .bind(&p.id)
                        .bind(id)
                        .bind(&p.turn_id)
                        .bind(p.kind.as_str())
                        .bind(&p.call_id)
                        .bind(p.data.to_string())
                        .bind(to_ms(p.created_at))
                        .bind(p.resolved_at.map(to_ms))
                        .bind(p.resolution.as_ref().map(|r| r.to_string()));
                    execute(&mut **tx, query, CTX).await?;
                }
                // Consecutive times keep the rules' order.
                let base = to_ms(now());
                for (i, rule) in (0_i64..).zip(&export.rules) {
                    let query = sqlx::query(pending::ADD_RULE)
                        .bind(id)
                        .bind(rule)
                        .bind(base + i);
                    execute(&mut **tx, query, CTX).await?;
                }
                Ok(())
            }

            #[async_trait::async_trait]
            impl $crate::TransferStore for $store {
                async fn export_session(&self, id: &str) -> StoreResult<Option<SessionExport>> {
                    let ctx = "exporting session";
                    let mut tx = self.begin_read().await.map_err(db(ctx))?;
                    let by_id = |sql| sqlx::query(sql).bind(id);
                    let session =
                        fetch_optional(&mut *tx, by_id(sessions::GET), ctx, records::session);
                    let Some(session) = session.await? else {
                        return Ok(None);
                    };
                    let messages =
                        fetch_all(&mut *tx, by_id(transcript::MESSAGES), ctx, message).await?;
                    let envelope = |row: &_| envelope(id, row);
                    let events = fetch_all(&mut *tx, by_id(q::EVENTS), ctx, envelope).await?;
                    let turns = fetch_all(&mut *tx, by_id(q::TURNS), ctx, records::turn).await?;
                    let pending =
                        fetch_all(&mut *tx, by_id(q::PENDING), ctx, records::pending).await?;
                    let rules: Vec<String> = sqlx::query_scalar(pending::RULES)
                        .bind(id)
                        .fetch_all(&mut *tx)
                        .await
                        .map_err(db(ctx))?;
                    tx.commit().await.map_err(db(ctx))?;
                    Ok(Some(SessionExport {
                        format: SessionExport::FORMAT,
                        session,
                        messages,
                        events,
                        turns,
                        pending,
                        rules,
                    }))
                }

                async fn import_session(&self, export: &SessionExport) -> StoreResult<()> {
                    let _write = self.write_guard().await;
                    let mut tx = self.begin_write().await.map_err(db(CTX))?;
                    import_row(&mut tx, &export.session).await?;
                    import_log(&mut tx, export).await?;
                    import_state(&mut tx, export).await?;
                    tx.commit().await.map_err(db(CTX))
                }
            }
        };
    };
}
pub(crate) use transfer_store;
