//! The statements of each batch shape, built the first time the writer needs
//! them and kept: a batch's slot counts are powers of two, so there are few.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::queries::transcript::{INSERT_EVENTS, INSERT_MESSAGES};

/// One statement of a batch: its SQL, how many values it binds (they follow
/// the previous statement's in the batch's values) and whether it returns rows.
#[derive(Debug)]
pub(super) struct Part {
    pub sql: String,
    pub binds: usize,
    pub returns_rows: bool,
}

/// A batch shape's statements: one by one, and as one script sent whole
/// (built when first asked for: only a writer without a connection of its
/// own, on an in-memory database or a URL with options, sends it).
#[derive(Debug)]
pub(super) struct Shape {
    pub parts: Vec<Part>,
    script: OnceLock<String>,
}

impl Shape {
    pub(super) fn script(&self) -> &str {
        self.script.get_or_init(|| script(&self.parts))
    }
}

/// The writer's statements by `(event_slots, message_slots)`.
#[derive(Debug, Default)]
pub(super) struct Statements(HashMap<(usize, usize), Shape>);

impl Statements {
    /// The [`batch_parts`] of this shape, built once.
    pub(super) fn batch(&mut self, event_slots: usize, message_slots: usize) -> &Shape {
        self.0
            .entry((event_slots, message_slots))
            .or_insert_with(|| Shape {
                parts: batch_parts(event_slots, message_slots),
                script: OnceLock::new(),
            })
    }
}

/// `n` comma-separated groups of `group`.
fn repeat(sql: &mut String, group: &str, n: usize) {
    for i in 0..n {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(group);
    }
}

/// The statements of a batch, between `BEGIN IMMEDIATE` and `COMMIT`: insert
/// every event with its seq computed from the session's `last_seq` and
/// advance `last_seq` by the session's count; insert every message at the
/// session's last position + its ordinal and touch the session. Binds:
/// `event_slots` event rows, then as many (session id, count) pairs;
/// `message_slots` message rows, the time, then as many session ids (all
/// NULL-padded). Rows back: (session, its new `last_seq`, 0) per session with
/// events; (session, position, 1) per message.
pub(super) fn batch_parts(event_slots: usize, message_slots: usize) -> Vec<Part> {
    let mut parts = Vec::with_capacity(4);
    if event_slots > 0 {
        let mut sql = String::with_capacity(400 + event_slots * 16);
        sql.push_str(INSERT_EVENTS);
        sql.push_str(
            "SELECT v.column1, s.last_seq + v.column2, v.column3, v.column4, v.column5 \
             FROM (VALUES ",
        );
        repeat(&mut sql, "(?, ?, ?, ?, ?)", event_slots);
        sql.push_str(") AS v JOIN sessions AS s ON s.id = v.column1");
        parts.push(Part {
            sql,
            binds: event_slots * 5,
            returns_rows: false,
        });
        // One row back per session (its new `last_seq`), not one per event.
        let mut sql = String::with_capacity(200 + event_slots * 8);
        sql.push_str("UPDATE sessions SET last_seq = sessions.last_seq + c.column2 FROM (VALUES ");
        repeat(&mut sql, "(?, ?)", event_slots);
        sql.push_str(
            ") AS c WHERE sessions.id = c.column1 \
             RETURNING sessions.id, sessions.last_seq, 0",
        );
        parts.push(Part {
            sql,
            binds: event_slots * 2,
            returns_rows: true,
        });
    }
    if message_slots > 0 {
        // SQLite evaluates the whole SELECT before inserting (it reads the
        // table it writes), so MAX(position) is the one from before the batch.
        let mut sql = String::with_capacity(400 + message_slots * 24);
        sql.push_str(INSERT_MESSAGES);
        sql.push_str(
            "SELECT v.column1, s.id, v.column3, \
               COALESCE((SELECT MAX(position) FROM messages AS m WHERE m.session_id = s.id), 0) \
               + v.column4, v.column5, v.column6, v.column7 \
             FROM (VALUES ",
        );
        repeat(&mut sql, "(?, ?, ?, ?, ?, ?, ?)", message_slots);
        sql.push_str(
            ") AS v JOIN sessions AS s ON s.id = v.column2 \
             RETURNING session_id, position, 1",
        );
        parts.push(Part {
            sql,
            binds: message_slots * 7,
            returns_rows: true,
        });
        let mut sql = String::from("UPDATE sessions SET updated_at = ? WHERE id IN (");
        repeat(&mut sql, "?", message_slots);
        sql.push(')');
        parts.push(Part {
            sql,
            binds: 1 + message_slots,
            returns_rows: false,
        });
    }
    parts
}

/// The parts as one transaction sent in one round trip.
fn script(parts: &[Part]) -> String {
    let mut sql = String::from("BEGIN IMMEDIATE;\n");
    for part in parts {
        sql.push_str(&part.sql);
        sql.push_str(";\n");
    }
    sql.push_str("COMMIT;");
    sql
}

/// [`batch_parts`] as one script.
#[cfg(test)]
pub(super) fn batch_sql(event_slots: usize, message_slots: usize) -> String {
    script(&batch_parts(event_slots, message_slots))
}
