//! Group commit for event and message appends. Every append goes to one
//! writer task, which takes whatever appends are queued (any sessions),
//! assigns their `seq`s and positions and commits them in a single round trip
//! to SQLite. Under load one commit carries many appends; a turn's events and
//! the message they end with share one.
//!
//! The task, not the caller, runs the write: a caller that gives up waiting
//! cannot leave a transaction half done, so `seq`s stay gapless.

pub(super) mod checkpoints;
mod conn;
mod statements;

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use tokio::sync::{Mutex, mpsc, oneshot};

pub(super) use self::conn::WriterConn;
use self::conn::{Arg, Returned};
use self::statements::Statements;
use super::recent_commit::RecentCommit;
use crate::records::{Query, now, to_ms, to_u64};
use crate::{StoreError, StoreResult};

/// Entries per job, and per commit once one job is in (a batch stops taking
/// jobs at this many, so it holds fewer than twice as many): an event binds 7
/// values (with its session's count) and a message 8, far below SQLite's
/// 32766 even padded.
pub(super) const MAX_BATCH: usize = 256;
/// Stop gathering once this much JSON is in the batch.
const MAX_BATCH_BYTES: usize = 8 * 1024 * 1024;
/// Appends waiting for the writer before senders wait (backpressure).
const QUEUE: usize = 4096;

/// One thing to store, serialised.
pub(super) enum Entry {
    Event {
        type_name: &'static str,
        data: String,
    },
    Message {
        id: String,
        turn_id: Option<String>,
        role: &'static str,
        content: String,
    },
}

impl Entry {
    fn bytes(&self) -> usize {
        match self {
            Entry::Event { data, .. } => data.len(),
            Entry::Message { content, .. } => content.len(),
        }
    }

    fn is_event(&self) -> bool {
        matches!(self, Entry::Event { .. })
    }
}

/// What an append answers: per entry, in order, the event's `seq` or the
/// message's position; and the time stamped on all of them.
pub(super) type Reply = StoreResult<(Vec<u64>, DateTime<Utc>)>;

/// Entries of one session (at most [`MAX_BATCH`]), committed together or not
/// at all.
pub(super) struct AppendJob {
    pub session_id: String,
    pub entries: Vec<Entry>,
    pub reply: oneshot::Sender<Reply>,
}

/// The writer task's future.
type Writer = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Start the writer task, committing on `conn`; it ends when every sender is
/// dropped, and lets go of `conn` when `closing` closes. With
/// `checkpoint_on`, WAL checkpoints run there after its commits (see
/// `checkpoints`), and end with it.
pub(super) fn spawn(
    conn: WriterConn,
    closing: SqlitePool,
    write_lock: Arc<Mutex<()>>,
    checkpoint_on: Option<SqlitePool>,
    recent: Arc<RecentCommit>,
) -> mpsc::Sender<AppendJob> {
    let (tx, rx) = mpsc::channel(QUEUE);
    let writer: Writer = match checkpoint_on {
        Some(pool) => {
            let nudge = checkpoints::Nudge::default();
            let writes = run(conn, closing, write_lock, rx, Some(nudge.clone()), recent);
            Box::pin(async move {
                // The checkpoints never end first: the writer's end ends both.
                tokio::select! {
                    () = writes => {}
                    () = checkpoints::run(pool, nudge) => {}
                }
            })
        }
        None => Box::pin(run(conn, closing, write_lock, rx, None, recent)),
    };
    // A thread of its own: it holds the write lock from the first job of a
    // commit to its last row back, and on the server's runtime each of those
    // steps waited behind every stream's task; and its own connection's
    // statements block the thread they run on. Without one, it shares the
    // caller's runtime (and blocks one of its workers while it commits).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::warn!(%err, "no runtime of its own for the event writer");
            tokio::spawn(writer);
            return tx;
        }
    };
    // Handed over once the thread runs: if it cannot start, both are still
    // here (a runtime must not be dropped inside the caller's).
    let (hand_over, handed) = std::sync::mpsc::channel::<(tokio::runtime::Runtime, Writer)>();
    let started = std::thread::Builder::new()
        .name("agentd-writer".into())
        .spawn(move || {
            if let Ok((runtime, writer)) = handed.recv() {
                runtime.block_on(writer);
            }
        });
    match started {
        Ok(_) => {
            // The thread holds the receiver until it has the pair.
            let _ = hand_over.send((runtime, writer));
        }
        Err(err) => {
            tracing::warn!(%err, "no thread of its own for the event writer");
            runtime.shutdown_background();
            tokio::spawn(writer);
        }
    }
    tx
}

async fn run(
    mut conn: WriterConn,
    closing: SqlitePool,
    write_lock: Arc<Mutex<()>>,
    mut rx: mpsc::Receiver<AppendJob>,
    nudge: Option<checkpoints::Nudge>,
    recent: Arc<RecentCommit>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut statements = Statements::default();
    let size = |job: &AppendJob| job.entries.iter().map(Entry::bytes).sum::<usize>();
    // Closing the pool waits for every connection: let go of the writer's.
    let closing = closing.close_event();
    tokio::pin!(closing);
    let mut closed = false;
    loop {
        let first = tokio::select! {
            job = rx.recv() => match job {
                Some(job) => job,
                None => return,
            },
            () = &mut closing, if !closed => {
                closed = true;
                conn.close();
                continue;
            }
        };
        let mut bytes = size(&first);
        let mut entries = first.entries.len();
        batch.push(first);
        // Other writes (sessions, messages, turns) hold this lock too.
        let _write = write_lock.lock().await;
        while entries < MAX_BATCH && bytes < MAX_BATCH_BYTES {
            match rx.try_recv() {
                Ok(job) => {
                    bytes += size(&job);
                    entries += job.entries.len();
                    batch.push(job);
                }
                Err(_) => break,
            }
        }
        write(&mut conn, &mut statements, &mut batch, &recent).await;
        if let Some(nudge) = &nudge {
            nudge.commit_done();
        }
        // Commits on the own connection never wait: let the checkpoints (and
        // sqlx's hand-back of their connection) run between them.
        tokio::task::yield_now().await;
    }
}

/// Commit `batch` and answer every job in it; leaves `batch` empty.
async fn write(
    conn: &mut WriterConn,
    statements: &mut Statements,
    batch: &mut Vec<AppendJob>,
    recent: &RecentCommit,
) {
    // Stamped here, not by the callers, so that `at` never decreases as `seq`
    // grows.
    let at = now();
    let committed = commit(conn, statements, batch, at).await;
    // Any failure, even one job's: the next message probes the store itself.
    // A commit that wrote no row (every session gone) wrote nothing to disk
    // either, and says nothing.
    match &committed {
        Ok(stamps) if stamps.iter().any(Result::is_ok) => recent.committed(),
        Ok(_) => {}
        Err(_) => recent.failed(),
    }
    match committed {
        Ok(stamps) => {
            for (job, stamps) in batch.drain(..).zip(stamps) {
                let _ = job.reply.send(stamps.map(|stamps| (stamps, at)));
            }
        }
        // Nothing of the batch was committed; retry job by job so that one
        // bad append (say, over SQLite's size limit) fails only its caller.
        Err(_) if batch.len() > 1 => {
            for job in batch.drain(..) {
                let one = std::slice::from_ref(&job);
                let result = match commit(conn, statements, one, at).await {
                    Ok(mut stamps) => stamps.pop().unwrap_or_else(|| {
                        Err(StoreError::Database("appending: no result".into()))
                    }),
                    Err(e) => Err(e),
                };
                let _ = job.reply.send(result.map(|stamps| (stamps, at)));
            }
        }
        Err(e) => {
            if let Some(job) = batch.pop() {
                let _ = job.reply.send(Err(e));
            }
        }
    }
}

/// How many events (`true`) or messages (`false`) each session has in a batch.
type Counts<'a> = HashMap<(&'a str, bool), i64>;

/// The k-th event (or message) of a session in a batch: its `k`, 1-based,
/// counted in batch order separately for events and messages; and where the
/// counts end.
fn ordinals(jobs: &[AppendJob]) -> (Vec<Vec<i64>>, Counts<'_>) {
    let mut counts = Counts::new();
    let ks = jobs
        .iter()
        .map(|job| {
            job.entries
                .iter()
                .map(|entry| {
                    let k = counts
                        .entry((job.session_id.as_str(), entry.is_event()))
                        .or_default();
                    *k += 1;
                    *k
                })
                .collect()
        })
        .collect();
    (ks, counts)
}

/// The sessions with entries of the kind (events or messages), each with its
/// count.
fn sessions_with<'a>(counts: &Counts<'a>, events: bool) -> Vec<(&'a str, i64)> {
    counts
        .iter()
        .filter(|((_, kind), _)| *kind == events)
        .map(|((session, _), n)| (*session, *n))
        .collect()
}

/// Insert all `jobs` in one transaction. Per job: its stamps, or `NotFound`
/// when its session does not exist. `Err` means nothing was committed (and
/// the jobs may be retried).
async fn commit(
    conn: &mut WriterConn,
    statements: &mut Statements,
    jobs: &[AppendJob],
    at: DateTime<Utc>,
) -> StoreResult<Vec<StoreResult<Vec<u64>>>> {
    let (ks, counts) = ordinals(jobs);
    let (event_sessions, message_sessions) =
        (sessions_with(&counts, true), sessions_with(&counts, false));
    let total = |sessions: &[(&str, i64)]| {
        usize::try_from(sessions.iter().map(|(_, n)| n).sum::<i64>()).unwrap_or(0)
    };
    let (events, messages) = (total(&event_sessions), total(&message_sessions));
    // Padding to a power of two keeps the number of distinct statements (and
    // so of prepares) small; padded rows have a NULL session and match nothing.
    let slots = |n: usize| if n == 0 { 0 } else { n.next_power_of_two() };
    let (event_slots, message_slots) = (slots(events), slots(messages));
    let shape = statements.batch(event_slots, message_slots);
    let at_ms = to_ms(at);
    let mut args = Vec::with_capacity(shape.parts.iter().map(|part| part.binds).sum());
    if event_slots > 0 {
        for (job, ks) in jobs.iter().zip(&ks) {
            for (entry, k) in job.entries.iter().zip(ks) {
                if let Entry::Event { type_name, data } = entry {
                    args.extend([
                        Arg::Text(Some(job.session_id.as_str())),
                        Arg::Int(*k),
                        Arg::Text(Some(type_name)),
                        Arg::Text(Some(data.as_str())),
                        Arg::Int(at_ms),
                    ]);
                }
            }
        }
        for _ in events..event_slots {
            args.extend([
                Arg::Text(None),
                Arg::Int(0),
                Arg::Text(None),
                Arg::Text(None),
                Arg::Int(0),
            ]);
        }
        for i in 0..event_slots {
            let (session, n) = event_sessions.get(i).copied().unzip();
            args.extend([Arg::Text(session), Arg::Int(n.unwrap_or(0))]);
        }
    }
    if message_slots > 0 {
        for (job, ks) in jobs.iter().zip(&ks) {
            for (entry, k) in job.entries.iter().zip(ks) {
                if let Entry::Message {
                    id,
                    turn_id,
                    role,
                    content,
                } = entry
                {
                    args.extend([
                        Arg::Text(Some(id.as_str())),
                        Arg::Text(Some(job.session_id.as_str())),
                        Arg::Text(turn_id.as_deref()),
                        Arg::Int(*k),
                        Arg::Text(Some(role)),
                        Arg::Text(Some(content.as_str())),
                        Arg::Int(at_ms),
                    ]);
                }
            }
        }
        for _ in messages..message_slots {
            args.extend([
                Arg::Text(None),
                Arg::Text(None),
                Arg::Text(None),
                Arg::Int(0),
                Arg::Text(None),
                Arg::Text(None),
                Arg::Int(0),
            ]);
        }
        args.push(Arg::Int(at_ms));
        for i in 0..message_slots {
            args.push(Arg::Text(
                message_sessions.get(i).map(|(session, _)| *session),
            ));
        }
    }

    match conn.commit(shape, &args).await? {
        Ok(rows) => Ok(assign(jobs, &ks, &counts, &rows)),
        Err(e) => {
            let msg = format!("appended entries were stored but cannot be read back: {e}");
            Ok(jobs
                .iter()
                .map(|_| Err(StoreError::Corrupt(msg.clone())))
                .collect())
        }
    }
}

/// Match the committed rows to the jobs. A session's events got
/// consecutive seqs in batch order, ending at its new `last_seq`: its k-th of
/// n is `last_seq - n + k`. RETURNING order is unspecified: each session's
/// positions are sorted, then the k-th smallest is its k-th message's. Runs
/// after COMMIT, so a failure here must not make the caller retry.
fn assign(
    jobs: &[AppendJob],
    ks: &[Vec<i64>],
    counts: &Counts<'_>,
    rows: &[Returned],
) -> Vec<StoreResult<Vec<u64>>> {
    let mut last_seqs: HashMap<&str, i64> = HashMap::new();
    let mut positions: HashMap<&str, Vec<i64>> = HashMap::new();
    for (session, n, kind) in rows {
        if *kind == 0 {
            last_seqs.insert(session, *n);
        } else {
            positions.entry(session).or_default().push(*n);
        }
    }
    for stamps in positions.values_mut() {
        stamps.sort_unstable();
    }
    jobs.iter()
        .zip(ks)
        .map(|(job, ks)| {
            let session = job.session_id.as_str();
            let not_found = || StoreError::NotFound(format!("session {session}"));
            job.entries
                .iter()
                .zip(ks)
                .map(|(entry, k)| {
                    if entry.is_event() {
                        let last = last_seqs.get(session).ok_or_else(not_found)?;
                        let n = counts.get(&(session, true)).ok_or_else(not_found)?;
                        to_u64(last - n + k, "seq")
                    } else {
                        let stamp = positions
                            .get(session)
                            .and_then(|stamps| stamps.get(usize::try_from(*k - 1).ok()?))
                            .ok_or_else(not_found)?;
                        to_u64(*stamp, "position")
                    }
                })
                .collect()
        })
        .collect()
}

/// Run `query`, a transaction of statements sent together, on a connection
/// of `pool`. A failed statement leaves the transaction open: it is rolled
/// back. If even that fails the connection's state is unknown: it is dropped
/// rather than returned to the pool.
pub(super) async fn run_script(
    pool: &SqlitePool,
    query: Query<'_, sqlx::Sqlite>,
) -> Result<Vec<SqliteRow>, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    let rows = query.fetch_all(&mut *conn).await;
    if rows.is_err() {
        match sqlx::query("ROLLBACK").execute(&mut *conn).await {
            Ok(_) => {}
            // SQLite rolled back by itself (a full disk, a trigger's
            // RAISE(ROLLBACK)): the connection is fine. Dropping it would
            // drop an in-memory database with it.
            Err(e) if e.to_string().contains("no transaction is active") => {}
            Err(_) => conn.close_on_drop(),
        }
    }
    rows
}

#[cfg(test)]
mod tests;
