//! The statement of each batch shape, built the first time the writer needs
//! it and kept: a batch's slot counts are powers of two, so there are few.

use std::collections::HashMap;

use crate::queries::transcript::{INSERT_EVENTS, INSERT_MESSAGES};

/// The writer's statements by `(event_slots, message_slots)`.
#[derive(Debug, Default)]
pub(super) struct Statements(HashMap<(usize, usize), String>);

impl Statements {
    /// [`batch_sql`] of this shape, built once.
    pub(super) fn batch(&mut self, event_slots: usize, message_slots: usize) -> &str {
        self.0
            .entry((event_slots, message_slots))
            .or_insert_with(|| batch_sql(event_slots, message_slots))
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

/// One round trip: begin; insert every event with its seq computed from the
/// session's `last_seq` and advance `last_seq` by the session's count; insert
/// every message at the session's last position + its ordinal and touch the
/// session; commit. Binds: `event_slots` event rows, then as many (session
/// id, count) pairs; `message_slots` message rows, the time, then as many
/// session ids (all NULL-padded). Rows back: (session, its new `last_seq`, 0)
/// per session with events; (session, position, 1) per message.
pub(super) fn batch_sql(event_slots: usize, message_slots: usize) -> String {
    let mut sql = String::with_capacity(800 + (event_slots + message_slots) * 24);
    sql.push_str("BEGIN IMMEDIATE;\n");
    if event_slots > 0 {
        sql.push_str(INSERT_EVENTS);
        sql.push_str(
            "SELECT v.column1, s.last_seq + v.column2, v.column3, v.column4, v.column5 \
             FROM (VALUES ",
        );
        repeat(&mut sql, "(?, ?, ?, ?, ?)", event_slots);
        // One row back per session (its new `last_seq`), not one per event:
        // the rows come back one at a time through the connection's thread.
        sql.push_str(
            ") AS v JOIN sessions AS s ON s.id = v.column1;\n\
             UPDATE sessions SET last_seq = sessions.last_seq + c.column2 FROM (VALUES ",
        );
        repeat(&mut sql, "(?, ?)", event_slots);
        sql.push_str(
            ") AS c WHERE sessions.id = c.column1 \
             RETURNING sessions.id, sessions.last_seq, 0;\n",
        );
    }
    if message_slots > 0 {
        // SQLite evaluates the whole SELECT before inserting (it reads the
        // table it writes), so MAX(position) is the one from before the batch.
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
             RETURNING session_id, position, 1;\n\
             UPDATE sessions SET updated_at = ? WHERE id IN (",
        );
        repeat(&mut sql, "?", message_slots);
        sql.push_str(");\n");
    }
    sql.push_str("COMMIT;");
    sql
}
