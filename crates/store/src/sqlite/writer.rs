//! Group commit for event appends. Every append goes to one writer task, which
//! takes whatever appends are queued (any sessions), assigns their `seq`s and
//! commits them in a single round trip to SQLite. Under load one commit
//! carries many events; a lone append costs one round trip.
//!
//! The task, not the caller, runs the write: a caller that gives up waiting
//! cannot leave a transaction half done, so `seq`s stay gapless.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Row, SqliteConnection};
use tokio::sync::{Mutex, mpsc, oneshot};

use super::util::{db, now, to_ms, to_u64};
use crate::{StoreError, StoreResult};

/// Rows per commit: 5 binds each stays far below SQLite's 32766 limit.
const MAX_BATCH: usize = 256;
/// Stop gathering once this much event JSON is in the batch.
const MAX_BATCH_BYTES: usize = 8 * 1024 * 1024;
/// Appends waiting for the writer before senders wait (backpressure).
const QUEUE: usize = 4096;

/// What an append answers: the event's `seq` and `at`.
pub(super) type Reply = StoreResult<(u64, DateTime<Utc>)>;

pub(super) struct AppendJob {
    pub session_id: String,
    pub type_name: &'static str,
    pub data: String,
    pub reply: oneshot::Sender<Reply>,
}

/// Start the writer task; it ends when every sender is dropped.
pub(super) fn spawn(pool: SqlitePool, write_lock: Arc<Mutex<()>>) -> mpsc::Sender<AppendJob> {
    let (tx, rx) = mpsc::channel(QUEUE);
    tokio::spawn(run(pool, write_lock, rx));
    tx
}

async fn run(pool: SqlitePool, write_lock: Arc<Mutex<()>>, mut rx: mpsc::Receiver<AppendJob>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.recv().await {
        let mut bytes = first.data.len();
        batch.push(first);
        // Other writes (sessions, messages, turns) hold this lock too.
        let _write = write_lock.lock().await;
        while batch.len() < MAX_BATCH && bytes < MAX_BATCH_BYTES {
            match rx.try_recv() {
                Ok(job) => {
                    bytes += job.data.len();
                    batch.push(job);
                }
                Err(_) => break,
            }
        }
        write(&pool, &mut batch).await;
    }
}

/// Commit `batch` and answer every job in it; leaves `batch` empty.
async fn write(pool: &SqlitePool, batch: &mut Vec<AppendJob>) {
    // Stamped here, not by the callers, so that `at` never decreases as `seq`
    // grows.
    let at = now();
    match commit(pool, batch, at).await {
        Ok(seqs) => {
            for (job, seq) in batch.drain(..).zip(seqs) {
                let _ = job.reply.send(seq.map(|seq| (seq, at)));
            }
        }
        // Nothing of the batch was committed; retry one by one so that one
        // bad event (say, over SQLite's size limit) fails only its caller.
        Err(_) if batch.len() > 1 => {
            for job in batch.drain(..) {
                let one = std::slice::from_ref(&job);
                let result = match commit(pool, one, at).await {
                    Ok(mut seqs) => seqs.pop().unwrap_or_else(|| {
                        Err(StoreError::Database("appending event: no result".into()))
                    }),
                    Err(e) => Err(e),
                };
                let _ = job.reply.send(result.map(|seq| (seq, at)));
            }
        }
        Err(e) => {
            if let Some(job) = batch.pop() {
                let _ = job.reply.send(Err(e));
            }
        }
    }
}

/// Insert all `jobs` in one transaction. Per job: its `seq`, or `NotFound`
/// when its session does not exist. `Err` means nothing was committed (and
/// the jobs may be retried).
async fn commit(
    pool: &SqlitePool,
    jobs: &[AppendJob],
    at: DateTime<Utc>,
) -> StoreResult<Vec<StoreResult<u64>>> {
    // The k-th event of a session in this batch gets `last_seq + k`.
    let mut counts: HashMap<&str, i64> = HashMap::new();
    let mut sessions: Vec<&str> = Vec::new();
    let ks: Vec<i64> = jobs
        .iter()
        .map(|job| {
            let k = counts.entry(job.session_id.as_str()).or_insert_with(|| {
                sessions.push(job.session_id.as_str());
                0
            });
            *k += 1;
            *k
        })
        .collect();

    // Padding to a power of two keeps the number of distinct statements (and
    // so of prepares) small; padded rows have a NULL session and match nothing.
    let slots = jobs.len().next_power_of_two();
    let sql = batch_sql(slots);
    let mut query = sqlx::query(&sql);
    for (job, k) in jobs.iter().zip(&ks) {
        query = query
            .bind(job.session_id.as_str())
            .bind(*k)
            .bind(job.type_name)
            .bind(job.data.as_str())
            .bind(to_ms(at));
    }
    for _ in jobs.len()..slots {
        query = query
            .bind(None::<&str>)
            .bind(0_i64)
            .bind(None::<&str>)
            .bind(None::<&str>)
            .bind(0_i64);
    }
    for i in 0..slots {
        query = query.bind(sessions.get(i).copied());
    }

    let mut conn = pool.acquire().await.map_err(db("appending events"))?;
    let rows = match query.fetch_all(&mut *conn).await {
        Ok(rows) => rows,
        Err(e) => {
            rollback(&mut conn).await;
            return Err(db("appending events")(e));
        }
    };

    Ok(assign(jobs, &ks, &rows))
}

/// Match the committed rows to the jobs. RETURNING order is unspecified:
/// sort each session's seqs, then the k-th smallest is its k-th job's. Runs
/// after COMMIT, so a failure here must not make the caller retry.
fn assign(jobs: &[AppendJob], ks: &[i64], rows: &[SqliteRow]) -> Vec<StoreResult<u64>> {
    let mut assigned: HashMap<String, Vec<i64>> = HashMap::new();
    for row in rows {
        match (row.try_get::<String, _>(0), row.try_get::<i64, _>(1)) {
            (Ok(session), Ok(seq)) => assigned.entry(session).or_default().push(seq),
            (Err(e), _) | (_, Err(e)) => {
                let msg = format!("appended events were stored but cannot be read back: {e}");
                return jobs
                    .iter()
                    .map(|_| Err(StoreError::Corrupt(msg.clone())))
                    .collect();
            }
        }
    }
    for seqs in assigned.values_mut() {
        seqs.sort_unstable();
    }
    jobs.iter()
        .zip(ks)
        .map(|(job, k)| {
            let seq = assigned
                .get(&job.session_id)
                .and_then(|seqs| seqs.get(usize::try_from(*k - 1).ok()?))
                .ok_or_else(|| StoreError::NotFound(format!("session {}", job.session_id)))?;
            to_u64(*seq, "seq")
        })
        .collect()
}

/// Undo a transaction a failed statement left open. If even that fails the
/// connection's state is unknown: drop it rather than return it to the pool.
pub(super) async fn rollback(conn: &mut sqlx::pool::PoolConnection<sqlx::Sqlite>) {
    let c: &mut SqliteConnection = conn;
    if sqlx::query("ROLLBACK").execute(c).await.is_err() {
        conn.close_on_drop();
    }
}

/// One round trip: begin, insert every event with its seq computed from the
/// session's `last_seq`, advance `last_seq`, commit. `slots` rows of binds,
/// then `slots` session ids (both NULL-padded).
fn batch_sql(slots: usize) -> String {
    let mut sql = String::with_capacity(400 + slots * 20);
    sql.push_str(
        "BEGIN IMMEDIATE;\n\
         INSERT INTO events (session_id, seq, type, data, created_at) \
         SELECT v.column1, s.last_seq + v.column2, v.column3, v.column4, v.column5 \
         FROM (VALUES ",
    );
    for i in 0..slots {
        sql.push_str(if i == 0 {
            "(?, ?, ?, ?, ?)"
        } else {
            ", (?, ?, ?, ?, ?)"
        });
    }
    sql.push_str(
        ") AS v JOIN sessions AS s ON s.id = v.column1 \
         RETURNING session_id, seq;\n\
         UPDATE sessions SET last_seq = \
         (SELECT MAX(seq) FROM events WHERE events.session_id = sessions.id) \
         WHERE id IN (",
    );
    for i in 0..slots {
        sql.push_str(if i == 0 { "?" } else { ", ?" });
    }
    sql.push_str(");\nCOMMIT;");
    sql
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::SqliteStore;
    use crate::{NewSession, Store};

    async fn setup() -> (SqliteStore, String, String) {
        let store = SqliteStore::open_url("sqlite::memory:").await.unwrap();
        let mut ids = Vec::new();
        for _ in 0..2 {
            let new = NewSession {
                id: None,
                owner: "o".into(),
                title: None,
                workspace: "w".into(),
                model: "m".into(),
                profile: "p".into(),
            };
            ids.push(store.create_session(new).await.unwrap().id);
        }
        let b = ids.pop().unwrap();
        let a = ids.pop().unwrap();
        (store, a, b)
    }

    fn job(session: &str, data: &str) -> (AppendJob, oneshot::Receiver<Reply>) {
        let (reply, rx) = oneshot::channel();
        let job = AppendJob {
            session_id: session.into(),
            type_name: "session.updated",
            data: data.into(),
            reply,
        };
        (job, rx)
    }

    async fn run_batch(store: &SqliteStore, specs: &[(&str, &str)]) -> Vec<StoreResult<u64>> {
        let (mut batch, rxs): (Vec<_>, Vec<_>) = specs.iter().map(|(s, d)| job(s, d)).unzip();
        write(store.pool(), &mut batch).await;
        assert!(batch.is_empty());
        let mut out = Vec::new();
        for rx in rxs {
            out.push(rx.await.unwrap().map(|(seq, _)| seq));
        }
        out
    }

    #[tokio::test]
    async fn one_batch_interleaving_sessions_and_unknown_ones() {
        let (store, a, b) = setup().await;
        let seqs = run_batch(
            &store,
            &[
                (&a, "1"),
                (&b, "2"),
                ("ghost", "3"),
                (&a, "4"),
                (&a, "5"),
                (&b, "6"),
            ],
        )
        .await;
        let ok: Vec<_> = seqs.iter().map(|r| r.as_ref().ok().copied()).collect();
        assert_eq!(ok, [Some(1), Some(1), None, Some(2), Some(3), Some(2)]);
        assert!(matches!(seqs[2], Err(StoreError::NotFound(_))));

        // Data landed where the seqs say.
        let data: Vec<String> =
            sqlx::query_scalar("SELECT data FROM events WHERE session_id = ? ORDER BY seq")
                .bind(&a)
                .fetch_all(store.pool())
                .await
                .unwrap();
        assert_eq!(data, ["1", "4", "5"]);
        let last: i64 = sqlx::query_scalar("SELECT last_seq FROM sessions WHERE id = ?")
            .bind(&b)
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(last, 2);
    }

    #[tokio::test]
    async fn a_failing_event_fails_alone_and_leaves_no_gap() {
        let (store, a, b) = setup().await;
        sqlx::query(
            "CREATE TRIGGER poison BEFORE INSERT ON events WHEN NEW.data = 'poison' \
             BEGIN SELECT RAISE(ABORT, 'poisoned'); END",
        )
        .execute(store.pool())
        .await
        .unwrap();
        let seqs = run_batch(&store, &[(&a, "1"), (&a, "poison"), (&b, "x"), (&a, "2")]).await;
        assert_eq!(seqs[0].as_ref().ok(), Some(&1));
        assert!(matches!(seqs[1], Err(StoreError::Database(ref m)) if m.contains("poisoned")));
        assert_eq!(seqs[2].as_ref().ok(), Some(&1));
        assert_eq!(seqs[3].as_ref().ok(), Some(&2));
        // The connection is usable and in no transaction afterwards.
        assert_eq!(
            run_batch(&store, &[(&a, "3")]).await[0].as_ref().ok(),
            Some(&3)
        );
    }

    #[test]
    fn statement_shape() {
        let sql = batch_sql(4);
        assert_eq!(sql.matches("(?, ?, ?, ?, ?)").count(), 4);
        assert!(sql.starts_with("BEGIN IMMEDIATE;") && sql.ends_with("COMMIT;"));
    }
}
