//! The group-commit writer against a real database: batches that mix
//! sessions, failures that stay alone, and logs cut at a refused entry. Each
//! on both connections a writer commits on: a pool's (an in-memory database)
//! and its own (a file).

use super::statements::batch_sql;
use super::*;
use crate::NewSession;
use crate::prelude::*;
use crate::sqlite::SqliteStore;

/// A store and the connection its writer would commit on.
struct Db {
    store: SqliteStore,
    file: Option<std::path::PathBuf>,
    _dir: Option<tempfile::TempDir>,
}

impl Db {
    /// An in-memory store (`own == false`), or one on a file whose writer
    /// has a connection of its own.
    async fn open(own: bool) -> Self {
        if !own {
            let store = SqliteStore::open_url("sqlite::memory:").await.unwrap();
            return Self {
                store,
                file: None,
                _dir: None,
            };
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agentd.db");
        let store = SqliteStore::open(&file).await.unwrap();
        Self {
            store,
            file: Some(file),
            _dir: Some(dir),
        }
    }

    /// A writer connection of this store's kind.
    fn conn(&self) -> WriterConn {
        match &self.file {
            Some(file) => WriterConn::own(file.clone(), 1000),
            None => WriterConn::pooled(self.store.pool().clone()),
        }
    }
}

async fn setup(own: bool) -> (Db, String, String) {
    let db = Db::open(own).await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let new = NewSession {
            id: None,
            owner: "o".into(),
            title: None,
            workspace: "w".into(),
            existing_workspace: false,
            model: "m".into(),
            profile: "p".into(),
        };
        ids.push(db.store.create_session(new).await.unwrap().id);
    }
    let b = ids.pop().unwrap();
    let a = ids.pop().unwrap();
    (db, a, b)
}

fn job(session: &str, data: &str) -> (AppendJob, oneshot::Receiver<Reply>) {
    let (reply, rx) = oneshot::channel();
    let entry = Entry::Event {
        type_name: "session.updated",
        data: data.into(),
    };
    (with_entries(session, vec![entry], reply), rx)
}

fn with_entries(session: &str, entries: Vec<Entry>, reply: oneshot::Sender<Reply>) -> AppendJob {
    AppendJob {
        session_id: session.into(),
        entries,
        reply,
    }
}

fn message(text: &str) -> Entry {
    let message = agentd_protocol::Message::user_text(text);
    Entry::Message {
        id: uuid::Uuid::now_v7().to_string(),
        turn_id: None,
        role: "user",
        content: serde_json::to_string(&message).unwrap(),
    }
}

/// [`write`] with fresh prepared statements and a commit record of its own.
async fn write_alone(conn: &mut WriterConn, batch: &mut Vec<AppendJob>) {
    write(conn, &mut Statements::default(), batch, &Default::default()).await;
}

async fn run_batch(conn: &mut WriterConn, specs: &[(&str, &str)]) -> Vec<StoreResult<u64>> {
    let (mut batch, rxs): (Vec<_>, Vec<_>) = specs.iter().map(|(s, d)| job(s, d)).unzip();
    write_alone(conn, &mut batch).await;
    assert!(batch.is_empty());
    let mut out = Vec::new();
    for rx in rxs {
        out.push(rx.await.unwrap().map(|(seqs, _)| seqs[0]));
    }
    out
}

#[tokio::test]
async fn one_batch_interleaving_sessions_and_unknown_ones() {
    for own in [false, true] {
        one_batch_interleaving_sessions_and_unknown_ones_on(own).await;
    }
}

async fn one_batch_interleaving_sessions_and_unknown_ones_on(own: bool) {
    let (db, a, b) = setup(own).await;
    let store = &db.store;
    let seqs = run_batch(
        &mut db.conn(),
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
    for own in [false, true] {
        a_failing_event_fails_alone_and_leaves_no_gap_on(own).await;
    }
}

async fn a_failing_event_fails_alone_and_leaves_no_gap_on(own: bool) {
    let (db, a, b) = setup(own).await;
    let store = &db.store;
    let mut conn = db.conn();
    sqlx::query(
        "CREATE TRIGGER poison BEFORE INSERT ON events WHEN NEW.data = 'poison' \
         BEGIN SELECT RAISE(ABORT, 'poisoned'); END",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let seqs = run_batch(
        &mut conn,
        &[(&a, "1"), (&a, "poison"), (&b, "x"), (&a, "2")],
    )
    .await;
    assert_eq!(seqs[0].as_ref().ok(), Some(&1));
    assert!(matches!(seqs[1], Err(StoreError::Database(ref m)) if m.contains("poisoned")));
    assert_eq!(seqs[2].as_ref().ok(), Some(&1));
    assert_eq!(seqs[3].as_ref().ok(), Some(&2));
    // The connection is usable and in no transaction afterwards.
    assert_eq!(
        run_batch(&mut conn, &[(&a, "3")]).await[0].as_ref().ok(),
        Some(&3)
    );
}

/// Events and messages of two sessions in one commit: messages go on
/// from each transcript's end in order, events from each log's.
#[tokio::test]
async fn events_and_messages_share_a_commit() {
    for own in [false, true] {
        events_and_messages_share_a_commit_on(own).await;
    }
}

async fn events_and_messages_share_a_commit_on(own: bool) {
    let (db, a, b) = setup(own).await;
    let store = &db.store;
    let text = agentd_protocol::Message::user_text("before");
    store.append_message(&a, None, &text).await.unwrap();
    let event = |data: &str| Entry::Event {
        type_name: "session.updated",
        data: data.into(),
    };
    let (reply_a, rx_a) = oneshot::channel();
    let (reply_b, rx_b) = oneshot::channel();
    let (reply_a2, rx_a2) = oneshot::channel();
    let mut batch = vec![
        with_entries(
            &a,
            vec![event("1"), message("a2"), event("2"), message("a3")],
            reply_a,
        ),
        with_entries(&b, vec![message("b1"), event("3")], reply_b),
        with_entries(&a, vec![message("a4")], reply_a2),
    ];
    let mut conn = db.conn();
    write_alone(&mut conn, &mut batch).await;
    assert_eq!(rx_a.await.unwrap().unwrap().0, [1, 2, 2, 3]);
    assert_eq!(rx_b.await.unwrap().unwrap().0, [1, 1]);
    assert_eq!(rx_a2.await.unwrap().unwrap().0, [4]);
    let texts: Vec<String> = store
        .messages(&a)
        .await
        .unwrap()
        .iter()
        .map(|m| m.message.text())
        .collect();
    assert_eq!(texts, ["before", "a2", "a3", "a4"]);
    let (reply, rx) = oneshot::channel();
    let mut ghost = vec![with_entries("ghost", vec![message("x"), event("4")], reply)];
    write_alone(&mut conn, &mut ghost).await;
    assert!(matches!(rx.await.unwrap(), Err(StoreError::NotFound(_))));
}

/// `append_log` stores exactly what comes before a refused entry.
#[tokio::test]
async fn a_log_append_stops_at_the_refused_entry() {
    for own in [false, true] {
        a_log_append_stops_at_the_refused_entry_on(own).await;
    }
}

async fn a_log_append_stops_at_the_refused_entry_on(own: bool) {
    use crate::{LogEntry, Logged};
    use agentd_protocol::{ErrorInfo, Event, Message};
    let (db, a, _) = setup(own).await;
    let store = &db.store;
    sqlx::query(
        "CREATE TRIGGER poison BEFORE INSERT ON messages WHEN NEW.content LIKE '%poison%' \
         BEGIN SELECT RAISE(ABORT, 'poisoned'); END",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let event = Event::Error(ErrorInfo {
        code: "e".into(),
        message: String::new(),
        retryable: false,
    });
    let (good, bad) = (Message::user_text("good"), Message::user_text("poison"));
    let message = |message| LogEntry::Message {
        turn_id: Some("t"),
        message,
    };
    let entries = [
        LogEntry::Event(&event),
        message(&good),
        LogEntry::Event(&event),
        message(&bad),
        LogEntry::Event(&event),
    ];
    let appended = store.append_log(&a, &entries).await;
    assert!(matches!(appended.error, Some(StoreError::Database(ref m)) if m.contains("poisoned")));
    assert_eq!(appended.stored.len(), 3);
    assert!(matches!(&appended.stored[1], Logged::Message(m) if m.position == 1));
    assert_eq!(store.messages(&a).await.unwrap().len(), 1);
    assert_eq!(store.events_after(&a, 0, 10).await.unwrap().len(), 2);
    // Without the refused message, all of it goes in one commit.
    let appended = store
        .append_log(&a, &[entries[0], entries[1], entries[2]])
        .await;
    assert!(appended.error.is_none());
    let seqs: Vec<u64> = appended
        .stored
        .iter()
        .map(|logged| match logged {
            Logged::Event(e) => e.seq,
            Logged::Message(m) => m.position,
        })
        .collect();
    assert_eq!(seqs, [3, 2, 4]);
}

#[test]
fn statement_shape() {
    let sql = batch_sql(4, 0);
    assert_eq!(sql.matches("(?, ?, ?, ?, ?)").count(), 4);
    assert!(!sql.contains("INSERT INTO messages"));
    assert!(sql.starts_with("BEGIN IMMEDIATE;") && sql.ends_with("COMMIT;"));
    let sql = batch_sql(0, 2);
    assert_eq!(sql.matches("(?, ?, ?, ?, ?, ?, ?)").count(), 2);
    assert!(!sql.contains("INSERT INTO events"));
}

/// A file store's writer connection, opened by a first append (seq 1 of `a`).
async fn opened(db: &Db, a: &str) -> WriterConn {
    let mut conn = db.conn();
    assert_eq!(
        run_batch(&mut conn, &[(a, "1")]).await[0].as_ref().ok(),
        Some(&1)
    );
    conn
}

/// The SQLite connection of an opened own writer connection.
fn own(conn: &WriterConn) -> &rusqlite::Connection {
    match conn {
        WriterConn::Own {
            conn: Some(own), ..
        } => own,
        _ => panic!("no own connection open"),
    }
}

/// The own connection's page limit, as if the disk were full.
fn limit_pages(conn: &WriterConn, pages: i64) {
    own(conn)
        .execute_batch(&format!("PRAGMA max_page_count = {pages}"))
        .unwrap();
}

/// A full disk fails the append that needed room, alone; nothing is left
/// half done, and once there is room again the log goes on without a gap.
#[tokio::test]
async fn a_full_disk_fails_the_append_and_leaves_no_gap() {
    let (db, a, b) = setup(true).await;
    let mut conn = opened(&db, &a).await;
    // Room for nothing more than is there.
    let pages: i64 = own(&conn)
        .query_row("PRAGMA page_count", [], |row| row.get(0))
        .unwrap();
    limit_pages(&conn, pages);
    let big = "x".repeat(256 * 1024);
    let seqs = run_batch(&mut conn, &[(&a, &big), (&b, &big)]).await;
    for seq in &seqs {
        assert!(
            matches!(seq, Err(StoreError::Database(m)) if m.contains("full")),
            "{seq:?}"
        );
    }
    limit_pages(&conn, 1_073_741_823);
    let seqs = run_batch(&mut conn, &[(&a, "2"), (&b, "1")]).await;
    let ok: Vec<_> = seqs.iter().map(|r| r.as_ref().ok().copied()).collect();
    assert_eq!(ok, [Some(2), Some(1)]);
    assert_eq!(stored_events(&db.store, &a).await, 2);
}

/// How many events of `session` are stored.
async fn stored_events(store: &SqliteStore, session: &str) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE session_id = ?")
        .bind(session)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

/// A connection left inside a transaction (its rollback failed) is let go
/// and the next commit opens a fresh one.
#[tokio::test]
async fn a_connection_left_in_a_transaction_is_replaced() {
    let (db, a, _) = setup(true).await;
    let mut conn = opened(&db, &a).await;
    own(&conn).execute_batch("BEGIN").unwrap();
    assert!(run_batch(&mut conn, &[(&a, "2")]).await[0].is_err());
    assert!(matches!(&conn, WriterConn::Own { conn: None, .. }));
    assert_eq!(
        run_batch(&mut conn, &[(&a, "2")]).await[0].as_ref().ok(),
        Some(&2)
    );
}

/// A batch SQLite rolls back by itself (here a trigger's RAISE(ROLLBACK))
/// fails, and the connection stays: for an in-memory store, dropping it
/// would drop the whole database.
#[tokio::test]
async fn a_batch_rolled_back_by_sqlite_keeps_the_in_memory_database() {
    for own in [false, true] {
        let (db, a, b) = setup(own).await;
        sqlx::query(
            "CREATE TRIGGER poison BEFORE INSERT ON events WHEN NEW.data = 'poison' \
             BEGIN SELECT RAISE(ROLLBACK, 'poisoned'); END",
        )
        .execute(db.store.pool())
        .await
        .unwrap();
        let mut conn = db.conn();
        let seqs = run_batch(&mut conn, &[(&a, "1"), (&a, "poison"), (&b, "x")]).await;
        let ok: Vec<_> = seqs.iter().map(|r| r.as_ref().ok().copied()).collect();
        assert_eq!(ok, [Some(1), None, Some(1)], "own connection: {own}");
        assert_eq!(stored_events(&db.store, &a).await, 1);
        assert!(db.store.get_session(&b).await.unwrap().is_some());
    }
}
