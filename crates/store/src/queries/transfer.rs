//! Moving a whole session between stores: export (one consistent snapshot)
//! and import (one transaction, everything kept as it was).

use async_trait::async_trait;

use crate::records::{
    Columns, PENDING_COLUMNS, SESSION_COLUMNS, TURN_COLUMNS, db, envelope, message, now, pending,
    session, to_i64, to_json, to_ms, turn,
};
use crate::sql::{Backend, Query, Row};
use crate::{SessionExport, StoreError, StoreResult, TransferStore};

const CONTEXT: &str = "exporting session";

fn each<T>(rows: &[Row], read: impl Fn(&Row) -> StoreResult<T>) -> StoreResult<Vec<T>> {
    rows.iter().map(read).collect()
}

#[async_trait]
impl<B: Backend> TransferStore for B {
    async fn export_session(&self, id: &str) -> StoreResult<Option<SessionExport>> {
        let of_session = |sql: String| Query::new(CONTEXT, sql).bind(id);
        let queries = vec![
            of_session(format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1"
            )),
            of_session(super::parts::MESSAGES.into()),
            of_session(
                "SELECT seq, data, created_at FROM events WHERE session_id = $1 ORDER BY seq"
                    .into(),
            ),
            of_session(format!(
                "SELECT {TURN_COLUMNS} FROM turns WHERE session_id = $1 ORDER BY started_at, id"
            )),
            of_session(format!(
                "SELECT {PENDING_COLUMNS} FROM pending_requests WHERE session_id = $1 \
                 ORDER BY created_at, id"
            )),
            of_session(super::pending::RULES.into()),
        ];
        let read = self.raw_read_snapshot(queries).await.map_err(db(CONTEXT))?;
        let [sessions, messages, events, turns, pendings, rules] = &read[..] else {
            return Err(StoreError::Database(format!(
                "{CONTEXT}: a query went missing"
            )));
        };
        let Some(row) = sessions.first() else {
            return Ok(None);
        };
        Ok(Some(SessionExport {
            format: SessionExport::FORMAT,
            session: session(row)?,
            messages: each(messages, message)?,
            events: each(events, |row| envelope(id, row))?,
            turns: each(turns, turn)?,
            pending: each(pendings, pending)?,
            rules: each(rules, |row| row.text("rule"))?,
        }))
    }

    async fn import_session(&self, export: &SessionExport) -> StoreResult<()> {
        let ctx = "importing session";
        let queries = import_queries(export)?;
        match self.raw_transaction(queries).await {
            Ok(_) => Ok(()),
            // The session's own row goes first: only it can already be there.
            Err((0, sqlx::Error::Database(e))) if e.is_unique_violation() => {
                Err(StoreError::Database(format!(
                    "{ctx}: session {:?} already exists",
                    export.session.id
                )))
            }
            Err((_, e)) => Err(db(ctx)(e)),
        }
    }
}

/// The inserts that write `export`, the session's row first.
fn import_queries(export: &SessionExport) -> StoreResult<Vec<Query>> {
    let ctx = "importing session";
    let s = &export.session;
    let mut queries = vec![session_insert(s)?];
    for m in &export.messages {
        queries.push(
            Query::new(
                ctx,
                "INSERT INTO messages (id, session_id, turn_id, position, role, content, \
                 created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&m.id)
            .bind(&s.id)
            .bind(&m.turn_id)
            .bind(to_i64(m.position, "position")?)
            .bind(crate::records::role_str(m.message.role))
            .bind(to_json(&m.message, "message")?)
            .bind(to_ms(m.created_at)),
        );
    }
    for e in &export.events {
        queries.push(
            Query::new(
                ctx,
                "INSERT INTO events (session_id, seq, type, data, created_at) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(&s.id)
            .bind(to_i64(e.seq, "seq")?)
            .bind(e.event.type_name())
            .bind(to_json(&e.event, "event")?)
            .bind(to_ms(e.at)),
        );
    }
    for t in &export.turns {
        queries.push(
            Query::new(
                ctx,
                "INSERT INTO turns (id, session_id, status, client_request_id, started_at, \
                 finished_at) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&t.id)
            .bind(&s.id)
            .bind(t.status.map(|st| st.as_str()))
            .bind(&t.client_request_id)
            .bind(to_ms(t.started_at))
            .bind(t.finished_at.map(to_ms)),
        );
    }
    for p in &export.pending {
        queries.push(
            Query::new(
                ctx,
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
            .bind(p.resolution.as_ref().map(|r| r.to_string())),
        );
    }
    // Consecutive times keep the rules' order.
    let base = to_ms(now());
    for (i, rule) in (0_i64..).zip(&export.rules) {
        queries.push(
            Query::new(ctx, super::pending::ADD_RULE)
                .bind(&s.id)
                .bind(rule.as_str())
                .bind(base + i),
        );
    }
    Ok(queries)
}

/// The session's own row, as it was.
fn session_insert(s: &crate::SessionRecord) -> StoreResult<Query> {
    Ok(Query::new(
        "importing session",
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
    .bind(to_i64(s.last_seq, "last_seq")?))
}
