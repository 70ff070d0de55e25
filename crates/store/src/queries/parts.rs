//! The parts both backends share of the roles whose other methods stay per
//! backend (turns, events, the transcript, blobs): written once here, called
//! by both.

use agentd_protocol::EventEnvelope;

use crate::records::{Columns, TURN_COLUMNS, envelope, message, turn};
use crate::sql::{Backend, Query};
use agentd_protocol::TurnStatus;

use crate::records::{now, to_ms};
use crate::{StoreError, StoreResult, StoredMessage, TurnRecord};

/// The transcript of session `$1`, in order.
pub(crate) const MESSAGES: &str = "SELECT id, session_id, turn_id, position, content, \
     created_at FROM messages WHERE session_id = $1 ORDER BY position";

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
    let query = Query::new("reading messages", MESSAGES).bind(session_id);
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

/// The first finish wins: a turn ends with exactly one status, so finishing
/// an already finished turn changes nothing. `NotFound` for an unknown turn.
pub(crate) async fn finish_turn(
    db: &impl Backend,
    turn_id: &str,
    status: TurnStatus,
) -> StoreResult<()> {
    let query = Query::new(
        "finishing turn",
        "UPDATE turns SET status = $1, finished_at = $2 WHERE id = $3 AND status IS NULL",
    )
    .bind(status.as_str())
    .bind(to_ms(now()))
    .bind(turn_id);
    if db.execute(query).await? > 0 {
        return Ok(());
    }
    let exists = Query::new("finishing turn", "SELECT id FROM turns WHERE id = $1").bind(turn_id);
    match db.fetch_optional(exists).await? {
        Some(_) => Ok(()),
        None => Err(StoreError::NotFound(format!("turn {turn_id}"))),
    }
}
