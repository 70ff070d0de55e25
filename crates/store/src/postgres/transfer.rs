//! Moving a whole session between stores: export (one consistent snapshot)
//! and import (one transaction, everything kept as it was).

use super::PostgresStore;
use super::events::envelope_from_row;
use super::messages::{message_from_row, role_str};
use super::pending::pending_from_row;
use super::sessions::session_from_row;
use super::util::{db, now, to_i64, to_json, to_ms};
use crate::{SessionExport, StoreError, StoreResult};

impl PostgresStore {
    pub(super) async fn export_session_impl(&self, id: &str) -> StoreResult<Option<SessionExport>> {
        let ctx = "exporting session";
        let mut tx = self.pool.begin().await.map_err(db(ctx))?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await
            .map_err(db(ctx))?;
        let sql = format!(
            "SELECT {} FROM sessions WHERE id = $1",
            super::sessions::COLUMNS
        );
        let Some(row) = sqlx::query(&sql)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db(ctx))?
        else {
            return Ok(None);
        };
        let session = session_from_row(&row)?;
        let messages = sqlx::query(
            "SELECT id, session_id, turn_id, position, content, created_at \
             FROM messages WHERE session_id = $1 ORDER BY position",
        )
        .bind(id)
        .fetch_all(&mut *tx)
        .await
        .map_err(db(ctx))?
        .iter()
        .map(message_from_row)
        .collect::<StoreResult<Vec<_>>>()?;
        let events = sqlx::query(
            "SELECT seq, data, created_at FROM events WHERE session_id = $1 ORDER BY seq",
        )
        .bind(id)
        .fetch_all(&mut *tx)
        .await
        .map_err(db(ctx))?
        .iter()
        .map(|row| envelope_from_row(id, row))
        .collect::<StoreResult<Vec<_>>>()?;
        let sql = format!(
            "SELECT {} FROM turns WHERE session_id = $1 ORDER BY started_at, id",
            super::turns::COLUMNS
        );
        let turns = sqlx::query(&sql)
            .bind(id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(ctx))?
            .iter()
            .map(super::turns::turn_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        let sql = format!(
            "SELECT {} FROM pending_requests WHERE session_id = $1 ORDER BY created_at, id",
            super::pending::COLUMNS
        );
        let pending = sqlx::query(&sql)
            .bind(id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(ctx))?
            .iter()
            .map(pending_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        let rules: Vec<String> = sqlx::query_scalar(
            "SELECT rule FROM session_rules WHERE session_id = $1 ORDER BY created_at, rule",
        )
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

    pub(super) async fn import_session_impl(&self, export: &SessionExport) -> StoreResult<()> {
        let ctx = "importing session";
        let s = &export.session;
        let mut tx = self.pool.begin().await.map_err(db(ctx))?;
        let inserted = sqlx::query(
            "INSERT INTO sessions (id, owner, title, workspace, model, profile, status, \
             created_at, updated_at, input_tokens, output_tokens, cache_read_tokens, \
             cache_write_tokens, cost_usd, turns, last_seq) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
        )
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
        .execute(&mut *tx)
        .await;
        match inserted {
            Ok(_) => {}
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                return Err(StoreError::Database(format!(
                    "{ctx}: session {:?} already exists",
                    s.id
                )));
            }
            Err(e) => return Err(db(ctx)(e)),
        }
        for m in &export.messages {
            sqlx::query(
                "INSERT INTO messages (id, session_id, turn_id, position, role, content, \
                 created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&m.id)
            .bind(&s.id)
            .bind(&m.turn_id)
            .bind(to_i64(m.position, "position")?)
            .bind(role_str(m.message.role))
            .bind(to_json(&m.message, "message")?)
            .bind(to_ms(m.created_at))
            .execute(&mut *tx)
            .await
            .map_err(db(ctx))?;
        }
        for e in &export.events {
            sqlx::query(
                "INSERT INTO events (session_id, seq, type, data, created_at) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(&s.id)
            .bind(to_i64(e.seq, "seq")?)
            .bind(e.event.type_name())
            .bind(to_json(&e.event, "event")?)
            .bind(to_ms(e.at))
            .execute(&mut *tx)
            .await
            .map_err(db(ctx))?;
        }
        for t in &export.turns {
            sqlx::query(
                "INSERT INTO turns (id, session_id, status, client_request_id, started_at, \
                 finished_at) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&t.id)
            .bind(&s.id)
            .bind(t.status.map(|st| st.as_str()))
            .bind(&t.client_request_id)
            .bind(to_ms(t.started_at))
            .bind(t.finished_at.map(to_ms))
            .execute(&mut *tx)
            .await
            .map_err(db(ctx))?;
        }
        for p in &export.pending {
            sqlx::query(
                "INSERT INTO pending_requests (id, session_id, turn_id, kind, call_id, data, \
                 created_at, resolved_at, resolution) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(&p.id)
            .bind(&s.id)
            .bind(&p.turn_id)
            .bind(p.kind.as_str())
            .bind(&p.call_id)
            .bind(p.data.to_string())
            .bind(to_ms(p.created_at))
            .bind(p.resolved_at.map(to_ms))
            .bind(p.resolution.as_ref().map(|r| r.to_string()))
            .execute(&mut *tx)
            .await
            .map_err(db(ctx))?;
        }
        // Consecutive times keep the rules' order.
        let base = to_ms(now());
        for (i, rule) in (0_i64..).zip(&export.rules) {
            sqlx::query(
                "INSERT INTO session_rules (session_id, rule, created_at) VALUES ($1, $2, $3) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(&s.id)
            .bind(rule)
            .bind(base + i)
            .execute(&mut *tx)
            .await
            .map_err(db(ctx))?;
        }
        tx.commit().await.map_err(db(ctx))
    }
}
