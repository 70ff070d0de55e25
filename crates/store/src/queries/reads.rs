//! Reads of the roles whose writes stay per backend (turns, events, the
//! transcript, blobs): written once here, called by both.

use agentd_protocol::EventEnvelope;

use crate::records::{Columns, TURN_COLUMNS, envelope, message, turn};
use crate::sql::{Backend, Query};
use crate::{StoreResult, StoredMessage, TurnRecord};

/// Turns still marked running, oldest first.
pub(crate) async fn running_turns(db: &impl Backend) -> StoreResult<Vec<TurnRecord>> {
    let sql =
        format!("SELECT {TURN_COLUMNS} FROM turns WHERE status IS NULL ORDER BY started_at, id");
    let rows = db
        .fetch_all(Query::new("reading running turns", sql))
        .await?;
    rows.iter().map(turn).collect()
}

pub(crate) async fn find_turn(
    db: &impl Backend,
    session_id: &str,
    client_request_id: &str,
) -> StoreResult<Option<TurnRecord>> {
    let sql = format!(
        "SELECT {TURN_COLUMNS} FROM turns WHERE session_id = $1 AND client_request_id = $2"
    );
    let query = Query::new("reading turn", sql)
        .bind(session_id)
        .bind(client_request_id);
    db.fetch_optional(query)
        .await?
        .as_ref()
        .map(turn)
        .transpose()
}

/// Events with `seq > after`, in order; empty for an unknown session.
pub(crate) async fn events_after(
    db: &impl Backend,
    session_id: &str,
    after: u64,
    limit: u32,
) -> StoreResult<Vec<EventEnvelope>> {
    let query = Query::new(
        "reading events",
        "SELECT seq, data, created_at FROM events \
         WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
    )
    .bind(session_id)
    .bind(i64::try_from(after).unwrap_or(i64::MAX))
    .bind(i64::from(limit));
    let rows = db.fetch_all(query).await?;
    rows.iter().map(|row| envelope(session_id, row)).collect()
}

/// The whole transcript in order; empty for an unknown session.
pub(crate) async fn messages(
    db: &impl Backend,
    session_id: &str,
) -> StoreResult<Vec<StoredMessage>> {
    let query = Query::new(
        "reading messages",
        "SELECT id, session_id, turn_id, position, content, created_at \
         FROM messages WHERE session_id = $1 ORDER BY position",
    )
    .bind(session_id);
    let rows = db.fetch_all(query).await?;
    rows.iter().map(message).collect()
}

pub(crate) async fn get_blob(db: &impl Backend, hash: &str) -> StoreResult<Option<Vec<u8>>> {
    let query = Query::new("reading a blob", "SELECT data FROM blobs WHERE hash = $1").bind(hash);
    db.fetch_optional(query)
        .await?
        .map(|row| row.bytes("data"))
        .transpose()
}
